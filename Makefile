# The habits of this repository. `make test` and `make run` set everything up themselves.
.PHONY: setup test test-fast run golden bench clean

PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

## tests: everything, Spark and golden-regeneration included (what CI runs)
test: setup
	@bash scripts/test.sh

## tests without the JVM-heavy ones and the browser test (quick local loop)
test-fast: setup
	$(PY) -m pytest -q -m "not spark and not slow and not browser"

## the main job on the bundled sample store (a golden store written by RocketMQ 5.5.1)
run: setup
	./spark-submit.sh jobs/store_summary.py --store tests/golden/rocketmq-5.5.1/clean/store

## regenerate the golden stores with RocketMQ's own store code (needs a JDK and Maven)
golden:
	python3 tests/golden/regenerate.py

bench: setup
	$(PY) bench/bench_read.py

clean:
	rm -rf .venv .setup-stamp jars/*.jar tests/golden/generator/target
