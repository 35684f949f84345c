# The two commands a new user needs: `make run` (demo) and `make test` (the suite).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The ledger benchmark's peer (django-hordak) lives in a virtualenv of its own: bench/peer/.
PEER_VENV := .venv-peer
PEER_STAMP := $(PEER_VENV)/.installed-stamp
HOST ?= 127.0.0.1
# The worker clusters, one per class of background work (config/settings/base.py Q_CLUSTER).
Q_CLASSES := joyback ticks notices webhooks
PORT ?= 8000

.PHONY: install run test lint format bench-ledger bench-ingest bench-payouts bench-recon bench-api bench-webhooks bench-viral bench-walk bench-ab migrate demo run-cluster

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# axe-core for the browser tests' accessibility pass, from npm (tests/browser/package-lock.json).
# Without npm, or offline, the accessibility tests are skipped with the reason shown.
AXE := tests/browser/node_modules/axe-core/axe.min.js
$(AXE): tests/browser/package.json tests/browser/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  (cd tests/browser && npm ci --no-audit --no-fund --silent) && touch $(AXE) \
	  || echo "  npm ci failed in tests/browser: the axe-core accessibility tests will be skipped"; \
	else echo "  npm not found: the axe-core accessibility tests will be skipped"; fi

install: $(STAMP) $(AXE)

$(PEER_STAMP): bench/peer-requirements.txt
	test -x $(PEER_VENV)/bin/python || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r bench/peer-requirements.txt
	touch $(PEER_STAMP)

migrate: install
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py seed_demo

# Web server and a django-q2 worker cluster side by side; Ctrl-C stops both.
run: demo
	@echo ""
	@echo "  Public site (EN / IT):        http://$(HOST):$(PORT)/  and  http://$(HOST):$(PORT)/it/"
	@echo "  Admin (ops, reconciliation):  http://$(HOST):$(PORT)/admin/"
	@echo "  Demo staff login:             ops / ops-demo-password  (superuser: admin / admin-demo-password)"
	@echo "  Second approver (four-eyes):  approver / approver-demo-password"
	@echo "  Brand portal:                 http://$(HOST):$(PORT)/portal/  (brand@demo.joyback.example / brand-demo-password)"
	@echo "  Trial brand in test mode:     http://$(HOST):$(PORT)/portal/  (trial@demo.joyback.example / trial-demo-password)"
	@echo "  Claim pages (JoyBack):         http://$(HOST):$(PORT)/c/sole-shoes/summer-joy/  (fake TikTok and WhatsApp built in)"
	@echo "  Claim pages (cashback):        http://$(HOST):$(PORT)/c/sole-shoes/cashback/"
	@echo "  Emails (sign-up, claim links): printed here, in this terminal"
	@echo "  Workers:                      django-q2 clusters money, ticks, notices, webhooks (ORM broker, same database)"
	@echo "  Stop them all with Ctrl-C."
	@echo ""
	@# Each server runs in its own session, so Ctrl-C reaches only this shell, which asks each to
	@# stop once (SIGTERM), waits up to 7 s, then kills what is left — no signal storm, and the
	@# terminal is back within 10 s even when a worker is busy. One worker cluster per class of
	@# background work (settings.Q_CLUSTER): money (the default), ticks, notices, webhooks.
	@export HOST=$(HOST) PORT=$(PORT); \
	  pids=""; \
	  for cls in $(Q_CLASSES); do \
	    Q_CLUSTER_NAME=$$cls setsid $(PY) manage.py qcluster --skip-checks & pids="$$pids $$!"; \
	  done; \
	  setsid $(PY) manage.py runserver $(HOST):$(PORT) --noreload & pids="$$pids $$!"; \
	  stop() { trap '' INT TERM; echo ""; \
	    kill -TERM $$pids 2>/dev/null; \
	    for _ in $$(seq 1 14); do alive=0; for p in $$pids; do kill -0 $$p 2>/dev/null && alive=1; done; \
	      [ $$alive = 0 ] && break; sleep 0.5; done; \
	    for p in $$pids; do kill -KILL -$$p 2>/dev/null; done; wait 2>/dev/null; \
	    echo "  Web server stopped."; echo "  Workers stopped."; exit 0; }; \
	  trap stop INT TERM; wait

# The production topology as local processes (deploy/cluster.py): PgBouncer in transaction mode, two
# gunicorn web nodes on PORT and PORT+1, Redis as the shared cache, a qcluster per class (money on
# two nodes), all on PostgreSQL (DATABASE_URL, default .../joyback_cluster, created and migrated);
# Ctrl-C stops them all. ARGS="--seed" loads the demo data; ARGS="--check 200" runs 200 events
# and their payouts through it and exits 0 only when nothing was doubled or lost.
run-cluster: install
	HOST=$(HOST) PORT=$(PORT) $(PY) deploy/cluster.py $(ARGS)

# On PostgreSQL whenever one can be had (DATABASE_URL, a local server, or a throwaway cluster),
# SQLite otherwise: tests/run.py says which. ARGS go to pytest.
test: install
	$(PY) -m tests.run $(ARGS)

# lint-imports checks the import contracts in pyproject.toml: the apps import one way.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# PEER=1 also measures django-hordak in the same run (its own virtualenv and database), e.g.
# make bench-ledger PEER=1 ARGS="--n 2000"
bench-ledger: install $(if $(PEER),$(PEER_STAMP))
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.ledger $(if $(PEER),--peer) $(ARGS)

bench-ingest: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.ingest

bench-payouts: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.payouts

bench-api: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.api

bench-recon: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.recon

bench-webhooks: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.webhooks

bench-walk: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.walk $(ARGS)

# One hot campaign and the same load spread over 8, with the class clusters of 2 nodes: make bench-viral ARGS="--people 300"
bench-viral: install
	DJANGO_SETTINGS_MODULE=config.settings.bench $(PY) -m bench.viral $(ARGS)

# Two commits side by side, alternated, each run on a fresh database (issue 26's baseline:
# 4702ea0, each phase >= 0.9x): make bench-ab OLD=4702ea0 NEW=HEAD ARGS="--n 2000"
bench-ab: install
	$(PY) -m bench.ab $(or $(OLD),4702ea0) $(or $(NEW),HEAD) $(ARGS)
