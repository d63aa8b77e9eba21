# Short verbs for the whole project. Every target sets up .venv itself on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Runtime extras (the framework adapters' `mcp`, `openai-agents` and `langgraph` included, so their tests
# run) plus `compat` (the reference library, for the compatibility tests); the tools (pytest,
# ruff, mypy, ...) are the PEP 735 group `dev`, installed with --group (pip >= 25.1).
EXTRAS ?= embedded,onnx,openai,telemetry,mcp,openai-agents,langgraph,langchain,compat

.PHONY: demo test test-unit test-valkey-search test-cluster conformance conformance-langchain check format bench bench-quality bench-cluster bench-1m clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@sh scripts/bootstrap.sh "$(PYTHON)" "$(VENV)"
	$(PY) -m pip install -q --upgrade "pip>=25.1"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]" --group dev --group conformance
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -q

test-unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# The suite against valkey-search (standalone, AOF everysec) and the cluster tests, on the
# optional test engine in ../shared/engines/valkey-search: one line and success when it is absent.
# The standalone run deselects the tests/unit tests with no server fixture (tests/conftest.py).
test-valkey-search: $(STAMP)
	@PYTHON=$(PY) bash scripts/with-valkey-search.sh standalone $(PY) -m pytest -q --ignore=tests/cluster

test-cluster: $(STAMP)
	@PYTHON=$(PY) bash scripts/with-valkey-search.sh cluster-replicas $(PY) -m pytest -q tests/cluster

# The framework adapters against their frameworks' own checks (also part of `make test`): the
# MCP server through the mcp SDK's client and the npm @modelcontextprotocol/conformance server
# scenarios (needs npx; one skip line without it), the OpenAI Agents session through Runner.run
# and against the SDK's SQLiteSession.
conformance: $(STAMP)
	$(PY) -m pytest -q -rs tests/conformance tests/integration/test_adapter_mcp.py \
		tests/integration/test_adapter_openai_agents.py tests/unit/test_adapters_agent_items.py
	$(MAKE) --no-print-directory conformance-langchain

# LangChain's standard suites (langchain-tests: retriever, vector store, embeddings) on the
# LangChain adapters, with their own pytest ini (their plugins and warnings do not run under
# the project's filterwarnings = error); not part of `make test`, run by .ci/run.
conformance-langchain: $(STAMP)
	$(PY) -m pytest -c tests/conformance/langchain/pytest.ini -q -rsx tests/conformance/langchain

check: $(STAMP)
	$(VENV)/bin/ruff check betterdb_memory tests bench examples
	$(VENV)/bin/ruff format --check betterdb_memory tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict tests/typing
	$(PY) scripts/gen_sync.py --check

format: $(STAMP)
	$(VENV)/bin/ruff format betterdb_memory tests bench examples
	$(VENV)/bin/ruff check --fix betterdb_memory tests bench examples

bench: $(STAMP)
	$(PY) -m pip install -q -e ".[$(EXTRAS),bench]"
	$(PY) bench/bench_store.py
	BETTERDB_TELEMETRY=false DO_NOT_TRACK=1 $(PY) bench/bench_compare.py

# Growth to a million memories (not in CI; an hour or more per engine on 2 cores):
# BENCH_1M_ARGS="--sizes 10k,100k --max-minutes 20" to shorten.
bench-1m: $(STAMP)
	cd bench && $(abspath $(PY)) bench_1m.py --engine embedded $(BENCH_1M_ARGS)
	cd bench && $(abspath $(PY)) bench_1m.py --engine cluster $(BENCH_1M_ARGS)

bench-quality: $(STAMP)
	$(PY) -m pip install -q -e ".[$(EXTRAS),bench]"
	$(PY) bench/quality.py

# 3-primary valkey-search cluster vs standalone, on the optional test engine in
# ../shared/engines/valkey-search (one line and success when it is absent).
bench-cluster: $(STAMP)
	$(PY) bench/bench_cluster.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info

.PHONY: docs docs-check

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link, a missing
# anchor or an unresolved API reference fails) into build/site, with objects.inv. The
# tools are the `docs` dependency group; the docs tests of `make test` need none of them.
docs: $(STAMP)
	$(PY) -m pip install -q --group docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --clean
	@test -s build/site/objects.inv

# Every page of build/site opened in headless Chromium (Debian's chromium and
# chromium-driver, installed here when missing): fails on console errors, missing assets
# and any fetch from outside; screenshots in build/docs-check. Run by .ci/run, not by
# `make test` (the README's two commands need no browser).
docs-check: docs
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; \
		else \
			echo "docs-check needs chromium and chromium-driver: sudo apt-get install chromium chromium-driver"; exit 1; \
		fi; \
	fi
	$(PY) scripts/docs_check.py build/site build/docs-check

# The soak (not in CI; issue 30): the model-based test's long profile, then the chaos
# workload round after round for SOAK_MINUTES (default 30; `make soak SOAK_MINUTES=5`),
# audited every round, with the process's memory, connections, tasks and keys printed.
SOAK_MINUTES ?= 30
MODEL_EXAMPLES ?= 300
.PHONY: soak
soak: $(STAMP)
	BETTERDB_MODEL_EXAMPLES=$(MODEL_EXAMPLES) BETTERDB_MODEL_STEPS=60 $(PY) -m pytest -q -s tests/reliability/test_model.py
	BETTERDB_SOAK_SECONDS=$$(( $(SOAK_MINUTES) * 60 )) $(PY) -m pytest -q -s tests/reliability/test_soak.py
