# The habits of this repository. `make test` and `make run` set everything up themselves.
.PHONY: setup test test-fast run golden bench clean

PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

## tests: everything, Spark and golden-regeneration included (what CI runs)
test: setup
	@bash scripts/test.sh

## tests without Spark, real RocketMQ, the browser and any test over 30 s (quick local loop)
test-fast: setup
	$(PY) -m pytest -q -m "not spark and not slow and not long and not browser"

## the audit of a bundled sample store: a crashed RocketMQ 5.5.1 broker with a corrupt record; the report is
## printed and written to build/audit-report.html (exit 0; the audit's own status 3 is expected here)
run: setup
	@bash scripts/run.sh

## regenerate the golden stores with RocketMQ's own store code (needs a JDK and Maven)
golden:
	python3 tests/golden/regenerate.py

bench: setup
	$(PY) bench/bench_read.py

clean:
	rm -rf .venv .setup-stamp jars/*.jar tests/golden/generator/target
