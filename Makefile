SHELL := /bin/bash
# The two commands a fresh machine needs are `make demo` and `make test`; both bootstrap first.
# Bootstrapping is idempotent: stamps record what is installed, so a second run fetches nothing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
JARS := runtime/jars

.PHONY: bootstrap demo test unit bench clean lock stop

bootstrap: $(VENV)/.installed $(JARS)/.fetched

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "stormwatch needs Python 3.11 (PyFlink 2.2); set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --constraint constraints.txt --editable '.[test]'
	touch $@

# Maven Central only, versions pinned in jvm/pom.xml; it also builds our Java modules, without their
# tests (`make test` runs those): the otlp format, the trace assembler, the SQL functions, in the
# folders jvm/pom.xml's <modules> names (connectors/java, udfs/traces, udfs/java), read from there.
# Our jars are removed first, so one of an old name or version (stormwatch-flink-functions-*.jar, the
# single jar before the split) is not shipped beside its successor: every jar in runtime/jars/flink/ is.
JAVA_MODULES := $(patsubst jvm/../%,%,$(shell sed -n 's|^ *<module>\(.*\)</module> *$$|jvm/\1|p' jvm/pom.xml))
$(JARS)/.fetched: jvm/pom.xml $(JAVA_MODULES:%=%/pom.xml) $(shell find $(JAVA_MODULES:%=%/src/main) -type f)
	rm -f $(JARS)/flink/stormwatch-*.jar
	mvn --quiet --batch-mode -f jvm/pom.xml -DskipTests package
	touch $@

demo: bootstrap
	$(BIN)/stormwatch demo

# The Java modules' own unit tests (src/test of each of JAVA_MODULES), then every Python test.
test: bootstrap
	mvn --batch-mode --no-transfer-progress -f jvm/pom.xml test -Dsurefire.printSummary=true | grep -E "Tests run|FAIL|ERROR|BUILD" ; test $${PIPESTATUS[0]} -eq 0
	$(BIN)/pytest

unit: bootstrap
	$(BIN)/pytest tests/unit

# Every benchmark against the real Kafka and Flink (about 40 minutes): bench/results/all.md.
bench: bootstrap
	$(BIN)/python bench/run_all.py

stop:
	-$(BIN)/stormwatch flink stop
	-$(BIN)/stormwatch kafka stop

clean: stop
	rm -rf runtime $(VENV)

# Re-resolve every Python package after changing pyproject.toml.
lock:
	rm -rf /tmp/stormwatch-lock && $(PYTHON) -m venv /tmp/stormwatch-lock
	/tmp/stormwatch-lock/bin/pip install --quiet '.[test]'
	( sed -n '1,2p' constraints.txt; /tmp/stormwatch-lock/bin/pip freeze --exclude stormwatch ) > constraints.txt.new
	mv constraints.txt.new constraints.txt
