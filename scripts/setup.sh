#!/usr/bin/env bash
# One-time (idempotent) setup: .venv with the package and its test dependencies, and the JARs Spark needs
# (Delta Lake) fetched by Maven into jars/. Called by `make setup`, hence by `make test` and `make run`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' 2>/dev/null \
  || { echo "setup: Python 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
command -v java >/dev/null || { echo "setup: java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "setup: mvn not found: install Maven (apt-get install maven)" >&2; exit 1; }

stamp_input=$(cat setup.cfg pyproject.toml jars/pom.xml | sha256sum | cut -c1-16)
if [ -f .setup-stamp ] && [ "$(cat .setup-stamp)" = "$stamp_input" ] && [ -x .venv/bin/python ]; then
  exit 0
fi

echo "setup: creating .venv and installing rocketstore-spark[test]" >&2
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'

echo "setup: fetching Delta Lake JARs with Maven into jars/" >&2
rm -f jars/*.jar
(cd jars && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory=. -DincludeScope=runtime)
# Keep only what Spark does not already ship: a second copy of jackson, hadoop or parquet on the
# classpath would shadow Spark's own and break it.
.venv/bin/python - <<'PY'
import pathlib, re, pyspark
spark_jars = pathlib.Path(pyspark.__file__).parent / "jars"
artifact = lambda p: re.sub(r"-\d[\w.\-]*\.jar$", "", p.name)
shipped = {artifact(p) for p in spark_jars.glob("*.jar")}
for jar in pathlib.Path("jars").glob("*.jar"):
    if artifact(jar) in shipped:
        jar.unlink()
print("setup: jars/ =", ", ".join(sorted(p.name for p in pathlib.Path("jars").glob("*.jar"))))
PY
echo "$stamp_input" > .setup-stamp
