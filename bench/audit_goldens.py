"""`rocketstore audit --json` over every golden store (tests/golden/*/*/store), in one process, for comparing two
checkouts' audits byte for byte (the checkout on PYTHONPATH audits; the goldens are this checkout's):

    cd /tmp && PYTHONPATH=OLD python CHECKOUT/bench/audit_goldens.py /tmp/audit-old
    cd /tmp && PYTHONPATH=NEW python CHECKOUT/bench/audit_goldens.py /tmp/audit-new
    diff -r /tmp/audit-old /tmp/audit-new

Writes OUT/NNN.json (the audit's stdout, a store) and OUT/codes (each store and its exit code).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from click.testing import CliRunner

from rocketstore_spark.cli.main import cli

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    stores = sorted(GOLDEN.glob("*/*/store"))
    codes = []
    for n, store in enumerate(stores):
        r = CliRunner().invoke(cli, ["audit", str(store), "--json"])
        Path(out, f"{n:03d}.json").write_text(r.stdout)
        codes.append(f"{store.relative_to(GOLDEN)} {r.exit_code}")
    Path(out, "codes").write_text("\n".join(codes) + "\n")
    print(f"{len(stores)} stores audited by {sys.modules['rocketstore_spark'].__file__}")


if __name__ == "__main__":
    main(sys.argv[1])
