# Two entry points: `make run` (the leaderboard app + a local worker) and `make test`.
# Both create .venv and install the package into it on first use.

PYTHON ?= python3
VENV := .venv
STORE ?= .culturelens
HOST ?= 127.0.0.1
PORT ?= 7860
# The authors' CUBE-1K file: a local copy if this checkout sits next to ../shared (as on the team's machines),
# else its public URL.
SHARED_CUBE := ../shared/data/cube/cube_1k.json
CUBE_SOURCE ?= $(if $(wildcard $(SHARED_CUBE)),$(SHARED_CUBE),https://raw.githubusercontent.com/google-deepmind/cube/4ec2d350102dcfc03e41aa51ee0f2398d642a1a6/dataset/cube_1k.json)
# The suite folder `culturelens suite build --out suite` makes: served when it is there (its datasets, and every track
# whose scoring assets it holds). Without one the app serves CUBE-1K (built from CUBE_SOURCE) and scores awareness;
# `make run` says so first, and whether the public sources answer from here: `make run BUILD_SUITE=1` then builds the
# suite from them before serving it (resumable: run it again after an interruption). The Queue tab names the
# command that turns each track still off on.
SUITE ?= $(if $(or $(BUILD_SUITE),$(wildcard suite/suite.json)),suite)
# The VLM judges of the two judged tracks: the operator's choice, not the suite's (`suite status` says which are off).
# EXPECTATIONS_JUDGE has no default (its track is off without one); RELEVANCE_JUDGE defaults to serve's (Qwen2.5-VL-7B,
# downloaded on first use); `probe` is relevance's CLIP-probe baseline. A Hub id or a local folder.
EXPECTATIONS_JUDGE ?=
RELEVANCE_JUDGE ?=
JUDGES = $(if $(EXPECTATIONS_JUDGE),--expectations-judge $(EXPECTATIONS_JUDGE)) \
	$(if $(RELEVANCE_JUDGE),--relevance-judge $(RELEVANCE_JUDGE))

.PHONY: run test test-fast docs browser postgresql clean

# The full install, with the app's libraries at the versions requirements.txt pins (what a Space installs).
$(VENV)/.installed: pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]' -r requirements.txt
	touch $@

run: $(VENV)/.installed
	$(if $(BUILD_SUITE),$(VENV)/bin/culturelens suite build --out $(SUITE) || [ $$? -eq 1 ])
	@$(VENV)/bin/culturelens suite status $(or $(SUITE),suite) $(JUDGES)
	$(VENV)/bin/culturelens serve --store $(STORE) --host $(HOST) --port $(PORT) --cube-source $(CUBE_SOURCE) \
		$(if $(SUITE),--suite $(SUITE)) $(if $(CULTURELENS_BACKBONES),--backbones $(CULTURELENS_BACKBONES)) $(JUDGES)

# Browser tests need Debian's chromium; install it when possible (root + apt), else they skip with a reason.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		(apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) \
		|| echo "chromium not installed: browser tests will be skipped"; }

# The queue's PostgreSQL tests need Debian's postgresql (initdb, pg_ctl); installed the same way, else skipped.
postgresql:
	@{ ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; } || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		(apt-get install -y -q postgresql >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null)) \
		|| echo "postgresql not installed: the queue's PostgreSQL tests will be skipped"; }

test: $(VENV)/.installed browser postgresql
	$(VENV)/bin/python -m pytest

# The tests not marked slow (no browser, wheel build or multi-process run): a couple of minutes, for while you work.
test-fast: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -m "not slow"

# The manual (mkdocs.yml, docs/) on http://$(HOST):$(DOCS_PORT), rebuilt as its pages change. The tests build it
# with --strict (tests/test_docs.py).
DOCS_PORT ?= 8000
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr $(HOST):$(DOCS_PORT)

clean:
	rm -rf $(VENV) $(STORE) *.egg-info build/site
