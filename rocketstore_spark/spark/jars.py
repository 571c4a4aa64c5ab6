"""The Delta Lake JARs Spark needs, fetched by Maven into a local folder (nothing is downloaded at run time).

    python -m rocketstore_spark.spark.jars fetch [DIR]      (also installed as ``rocketstore-spark-jars fetch [DIR]``)

runs Maven (a JDK 17 and ``mvn`` on the PATH) on the ``pom.xml`` shipped with the package — the checkout's
``jars/pom.xml``, the one place naming the Delta version — copies delta-spark and its runtime dependencies
into DIR and drops those Spark already ships (a second jackson, hadoop or parquet on the classpath would
shadow Spark's own and break it). DIR defaults to the per-user cache, ``$XDG_CACHE_HOME/rocketstore-spark/jars``
(``~/.cache/...``), where ``get_spark()`` finds them; ``make setup`` runs the same into the checkout's jars/.
For another DIR set ``ROCKETSTORE_JARS=DIR``. A fetch replaces the JARs of the previous one in DIR
(and other versions of the same artifacts); other files there stay.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

POM = Path(__file__).resolve().parents[1] / "pom.xml"   # the package's: in a checkout a link to jars/pom.xml; in a wheel a copy
CHECKOUT_JARS = Path(__file__).resolve().parents[2] / "jars"
FETCHED = ".stamp"                  # in DIR: the names of the JARs the last fetch put there


def cache_dir() -> Path:
    """The per-user JAR cache: ``$XDG_CACHE_HOME/rocketstore-spark/jars``, else ``~/.cache/rocketstore-spark/jars``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocketstore-spark" / "jars"


def checkout_jars() -> Path | None:
    """The jars/ folder of the checkout this package runs from (``make setup`` fills it); None when installed."""
    return CHECKOUT_JARS if (CHECKOUT_JARS / "pom.xml").is_file() else None


def artifact(jar: Path) -> str:
    """A JAR's artifact name without its version: ``delta-storage-4.4.0.jar`` -> ``delta-storage``."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar.name)


def drop_shipped(directory: Path) -> None:
    """Delete the JARs of ``directory`` whose artifact Spark (the pyspark wheel) already ships."""
    import pyspark
    shipped = {artifact(p) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    for jar in directory.glob("*.jar"):
        if artifact(jar) in shipped:
            jar.unlink()


class FetchError(RuntimeError):
    """Maven is missing or failed; the message is one line."""


def fetch(directory: Path, pom: Path = POM) -> list[Path]:
    """Fetch the JARs of ``pom`` with Maven into ``directory`` (created), replacing those of an earlier
    fetch; returns the JARs now there."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FetchError("mvn not found: install Maven and a JDK 17 (apt-get install maven openjdk-17-jdk-headless)")
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=directory) as tmp:
        staging = Path(tmp) / "jars"
        shutil.copyfile(pom, Path(tmp) / "pom.xml")           # Maven's target/ stays out of site-packages
        proc = subprocess.run([mvn, "-q", "-B", "-Dstyle.color=never", "dependency:copy-dependencies",
                               f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
                              cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            sys.stderr.write(proc.stdout)
            raise FetchError(f"mvn dependency:copy-dependencies failed (exit {proc.returncode}) for {pom}")
        drop_shipped(staging)
        new = sorted(staging.glob("*.jar"))
        stamp = directory / FETCHED
        earlier = set(stamp.read_text().split()) if stamp.is_file() else set()
        for old in directory.glob("*.jar"):
            if old.name in earlier or artifact(old) in {artifact(j) for j in new}:
                old.unlink()
        for jar in new:
            os.replace(jar, directory / jar.name)
        stamp.write_text("".join(f"{j.name}\n" for j in new))
    return sorted(directory.glob("*.jar"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketstore_spark.spark.jars", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch_cmd = commands.add_parser("fetch", help="fetch the Delta Lake JARs with Maven into DIR")
    fetch_cmd.add_argument("dir", nargs="?", type=Path, default=None, help=f"default: {cache_dir()}")
    args = parser.parse_args(argv)
    directory = args.dir or cache_dir()
    try:
        jars = fetch(directory)
    except FetchError as e:
        print(f"rocketstore-spark-jars: {e}", file=sys.stderr)
        return 1
    print(f"{args.dir or directory}: {', '.join(j.name for j in jars)}")
    if directory.resolve() not in (cache_dir().resolve(), checkout_jars()):
        print(f"for get_spark() to use them: export ROCKETSTORE_JARS={directory.resolve()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
