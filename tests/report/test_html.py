"""The HTML report (``rocketstore audit --html``) opened in a real headless Chromium — Debian's ``chromium``,
installed by scripts/chromium.sh when absent, driven by Playwright: it renders without a script error, every
chart draws, it loads nothing but itself, it states what RocketMQ's own view of the golden stores says (the
manifests, not our output), and strings from a store are text, never markup.

A full-page screenshot of the golden stores' report is kept as a CI artefact: build/artifacts/audit-report.png.
"""
from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.report.html import MAX_PER_CHECK
from rocketstore_spark.verify.store import verify_store
from tests.cli.helpers import run
from tests.builders import write_store
from tests.golden.goldens import BY_ID, committed_offsets

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "build" / "artifacts" / "audit-report.png"
REPORTED = ["5.5.1/corrupt-body", "5.5.1/consumer-offsets", "5.5.1/clean"]
HOSTILE = "<script>alert(1)</script>"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        subprocess.run(["bash", str(ROOT / "scripts" / "chromium.sh")], check=True, stdin=subprocess.DEVNULL)
        found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "no chromium after scripts/chromium.sh"
    return found


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield b
        b.close()


def audit_html(path: Path, *stores, status: int) -> str:
    r = run("audit", *stores, "--html", path)
    assert r.exit_code == status, r.output
    assert f"HTML report written to {path}" in r.stdout
    return path.read_text(encoding="utf-8")


def open_report(browser, path: Path):
    """(page, what went wrong: console errors, page errors and dialogs, every URL requested)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    trouble, requested = [], []
    page.on("console", lambda m: m.type in ("error", "warning") and trouble.append(f"console {m.type}: {m.text}"))
    page.on("pageerror", lambda e: trouble.append(f"page error: {e}"))
    page.on("dialog", lambda d: (trouble.append(f"dialog: {d.message}"), d.dismiss()))

    def route(r):
        requested.append(r.request.url)
        r.continue_() if r.request.url == path.as_uri() else r.abort()
    page.route("**/*", route)
    page.goto(path.as_uri(), wait_until="load")
    return page, trouble, requested


def charts_drawn(page) -> list[dict]:
    """Per chart div: its kind, the size of Plotly's SVG, and how many bars or markers it drew."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.chart')).map(c => {
        const svg = c.querySelector('.main-svg'), box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
        const marks = Array.from(c.querySelectorAll('.point path, .point')).filter(e => {
            const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; }).length;
        return {store: c.closest('section').dataset.store, kind: c.dataset.chart, width: box.width,
                height: box.height, marks: marks};
    })""")


def table(page, store: Path, name: str) -> list[list[str]]:
    return page.evaluate("""([store, name]) => Array.from(document.querySelectorAll(
            `section[data-store="${store}"] table[data-table="${name}"] tbody tr`))
        .map(tr => Array.from(tr.cells).map(td => td.textContent))""", [str(store), name])


def text_of(page, store: Path, selector: str) -> str:
    return page.evaluate("([s, sel]) => document.querySelector(`section[data-store=\"${s}\"] ${sel}`).textContent",
                         [str(store), selector])


def number(text: str) -> int | None:
    return None if text == "-" else int(text.replace(",", ""))


@pytest.mark.browser
def test_the_audit_report_renders_in_chromium_and_says_what_rocketmq_stored(browser, tmp_path):
    stores = [BY_ID[i].store for i in REPORTED]
    out = tmp_path / "audit.html"
    audit_html(out, *stores, status=3)                   # the crashed store would lose messages
    page, trouble, requested = open_report(browser, out)
    assert trouble == [] and requested == [out.as_uri()]

    drawn = charts_drawn(page)
    kinds = {str(s): [d["kind"] for d in drawn if d["store"] == str(s)] for s in stores}
    offsets = BY_ID["5.5.1/consumer-offsets"].store
    assert kinds == {str(s): ["strip", "timeline", "queues"] + (["lag"] if s == offsets else []) for s in stores}
    assert all(d["width"] > 0 and d["height"] > 0 and d["marks"] > 0 for d in drawn), drawn

    for gid, store in zip(REPORTED, stores):
        g = BY_ID[gid]
        # messages and record bytes per topic: RocketMQ's own walk of every segment
        want = Counter(m["topic"] for m in g.messages)
        size = Counter()
        for m in g.messages:
            size[m["topic"]] += m["total_size"]
        assert {r[0]: (number(r[1]), number(r[2])) for r in table(page, store, "topics")} == \
            {t: (n, size[t]) for t, n in want.items()}
        assert [(r[0], number(r[3]), number(r[4])) for r in table(page, store, "segments")] == \
            [(s["file"], s["records"], s["valid_end"]) for s in g.manifest["segments"]]
        # every check id links to its catalogue entry in the page
        links = page.evaluate("""(s) => Array.from(document.querySelectorAll(
            `section[data-store="${s}"] table[data-table="checks"] a`)).map(a => [a.textContent,
            !!document.getElementById(a.getAttribute('href').slice(1))])""", str(store))
        assert links and all(found for _, found in links)

    # the crashed store with two flipped body bytes: both damaged records, and RocketMQ's recovery of a copy
    g = BY_ID["5.5.1/corrupt-body"]
    crc = sorted(int(r[3].replace(",", "")) for r in table(page, g.store, "findings") if r[1] == "commitlog.body_crc")
    assert crc == sorted(next(m for m in g.messages if m["physical_offset"] <= s["physical_offset"]
                              < m["physical_offset"] + m["total_size"])["file_position"] for s in g.manifest["surgery"])
    end = g.manifest["recovery"]["commitlog_max_offset"]
    lost = [m for m in g.messages if m["physical_offset"] > end and m["body_crc_ok"]]
    verdict = text_of(page, g.store, "[data-fact=verdict]")
    topics = len({m["topic"] for m in lost})
    assert verdict == f"A restart now would lose {len(lost)} valid messages in {topics} topics."
    assert f"the log ends at physical offset {end:,}." in text_of(page, g.store, ".words")
    assert text_of(page, BY_ID["5.5.1/clean"].store, "[data-fact=verdict]") == \
        "A restart now keeps everything: nothing would be cut or lost."

    # consumer lag per group and queue: the committed offsets of the broker's own file against RocketMQ's max offsets
    g = BY_ID["5.5.1/consumer-offsets"]
    want = {}
    for key, (offset, bounds, status) in committed_offsets(g).items():
        # the broker moves an offset out of range to the queue's min or max before the group pulls again
        want[key] = (offset, None, status, None) if bounds is None else \
            (offset, bounds[1], status, bounds[1] - min(max(offset, bounds[0]), bounds[1]))
    rows = {(r[0], r[1], int(r[2])): (number(r[3]), number(r[5]), r[6], number(r[7]))
            for r in table(page, g.store, "lag")}
    assert rows == want and {v[2] for v in want.values()} == \
        {"unknown_queue", "below_min", "beyond_max", "caught_up", "in_range"}

    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACT), full_page=True)
    assert ARTIFACT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page.close()


@pytest.mark.browser
def test_strings_from_a_store_are_text_never_markup(browser, tmp_path):
    topics = [HOSTILE, "\"'><img src=x onerror=alert(2)>"] + [f"topic-{k:02d}" for k in range(10)]
    # the last topics' records carry a wrong BODYCRC: more findings of one check than the page lists
    messages = [Message(topic=t, body=b"x" * (k + 1), properties={"KEYS": HOSTILE, "TAGS": "<b>bold</b>"},
                        store_timestamp=1_700_000_000_000 + 1000 * k, body_crc=1 if k >= 9 else None)
                for k, t in enumerate(topics) for _ in range(1 + k)]
    write_store(tmp_path / "store" / "commitlog", messages)
    out = tmp_path / "report.html"
    html = audit_html(out, tmp_path / "store", status=3)      # BODYCRC errors
    assert HOSTILE not in html and "<img src=x" not in html and "<b>bold" not in html
    page, trouble, requested = open_report(browser, out)
    assert trouble == [] and requested == [out.as_uri()]
    store = tmp_path / "store"
    names = [r[0] for r in table(page, store, "topics")]
    assert sorted(names) == sorted(topics)                    # the browser shows them exactly, as text
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("(h) => Array.from(document.scripts).some(s => s.textContent.includes(h))", HOSTILE) is False
    # the timeline's legend: the 10 topics with the most messages by name (as text), the other 2 summed
    legend = page.evaluate("""(s) => Array.from(document.querySelectorAll(
        `section[data-store="${s}"] [data-chart=timeline] .legendtext`)).map(e => e.textContent)""", str(store))
    assert sorted(legend) == sorted([f"topic-{k:02d}" for k in range(10)] + ["2 other topics"])
    assert all(d["marks"] > 0 for d in charts_drawn(page))
    # findings: every one counted per check, the first MAX_PER_CHECK of a check listed, and the page says so
    crc = [f for f in verify_store(str(store)).findings if f.check == "commitlog.body_crc"]
    assert len(crc) > MAX_PER_CHECK
    assert [r[2] for r in table(page, store, "checks") if r[0] == "commitlog.body_crc"] == [str(len(crc))]
    listed = [int(r[4].replace(",", "")) for r in table(page, store, "findings") if r[1] == "commitlog.body_crc"]
    assert listed == [f.physical_offset for f in crc[:MAX_PER_CHECK]]
    assert f"The first {MAX_PER_CHECK} findings of each check" in page.inner_text("body")
    page.close()


def test_the_report_is_refused_inside_a_store(tmp_path):
    g = BY_ID["5.5.1/clean"]
    r = run("audit", g.store, "--html", g.store / "report.html")
    assert r.exit_code == 2 and "inside the store" in r.output and not (g.store / "report.html").exists()
    r = run("audit", g.store, "--html", tmp_path / "no-such-dir" / "report.html")
    assert r.exit_code == 2 and "no-such-dir" in r.output
