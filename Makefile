# Probboard: `make run` starts the service, `make test` runs the checks and the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
REDIS_URL ?= memory://
export PORT HOST REDIS_URL

.PHONY: run test lint typecheck pytest clean

# Every dependency from the lock (exact versions, hashes checked), then the package itself,
# in a venv made afresh (--clear), so a package the lock no longer names is gone.
# One line while it installs; pip's own output (notices included) goes to INSTALL_LOG,
# whose last lines are shown if it fails.
INSTALL_LOG ?= $(VENV)-install.log
$(BIN)/activate: setup.cfg setup.py requirements.lock
	@echo "make: installing the locked dependencies into $(VENV) (a minute or two; log: $(INSTALL_LOG))"
	@{ $(PYTHON) -m venv --clear $(VENV) \
		&& $(BIN)/pip install --disable-pip-version-check --require-hashes -r requirements.lock \
		&& $(BIN)/pip install --disable-pip-version-check --no-deps -e . ; } > $(INSTALL_LOG) 2>&1 \
		|| { tail -n 20 $(INSTALL_LOG) >&2; echo "make: the install failed; the whole log: $(INSTALL_LOG)" >&2; exit 1; }
	@touch $(BIN)/activate

## run: the service on http://$(HOST):$(PORT) (embedded; set REDIS_URL=redis://... for the production shape)
# A bad setting stops make itself with the one line the check printed (make's $(error): one
# line, status 2), not a failing recipe followed by make's own "Error 2" trailer. The recipe
# is expanded once the venv exists, before its first line runs. Only a failing check's output
# counts (a warning printed by a good configuration does not stop make).
# On memory:// the development server serves (flask run): --dev-server refuses a HOST that
# is not loopback, in the same one line (app.config.load.check_dev_server).
DEV_SERVER = $(if $(filter memory://%,$(REDIS_URL)),--dev-server)
run_config_error = $(shell out=$$(HOST='$(HOST)' PORT='$(PORT)' REDIS_URL='$(REDIS_URL)' $(BIN)/python -m app.config $(DEV_SERVER) 2>&1) || printf '%s' "$$out")
run: $(BIN)/activate
	$(if $(run_config_error),$(error $(run_config_error)))
	$(BIN)/flask --app wsgi db upgrade
	@if [[ "$(REDIS_URL)" == memory://* ]]; then \
		echo "Probboard (embedded, memory://) on http://$(HOST):$(PORT)"; \
		exec $(BIN)/flask --app wsgi run --host "$(HOST)" --port "$(PORT)" --no-reload 2>&1; \
	else \
		exec ./scripts/serve.sh; \
	fi

## test: lint, type check, the lock's known vulnerabilities (skipped offline), tests
test: lint typecheck audit pytest

lint: $(BIN)/activate
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/activate
	$(BIN)/mypy

# In parallel: PYTEST_WORKERS pytest-xdist workers, each test file on one worker (setup.cfg's
# --dist loadfile), so a module's servers start once. The tests mostly wait on servers and
# clocks, so more workers than cores pay (measured: docs/tests.md). PYTEST_ARGS comes last and
# wins: PYTEST_ARGS="-n 0 tests/unit" runs one folder serially.
PYTEST_WORKERS ?= 4
pytest: $(BIN)/activate
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

.PHONY: audit lock
## audit: requirements.lock against the advisory data PyPI serves (pip-audit); says SKIPPED
## when that cannot be reached, AUDIT=require makes that an error
audit: $(BIN)/activate
	$(BIN)/python scripts/audit_lock.py

## lock: refresh requirements.lock (every runtime and dev dependency, exact versions and hashes,
## resolved from the ranges in setup.cfg) with pip-tools
lock: $(BIN)/activate
	$(BIN)/pip install --quiet "pip-tools>=7.4"
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --extra dev --strip-extras \
		--no-emit-index-url --no-emit-find-links $(LOCK_ARGS) --output-file requirements.lock setup.py

clean:
	rm -rf $(VENV) *.egg-info .mypy_cache .ruff_cache .pytest_cache

.PHONY: bench bench-latest
## bench: performance figures (never part of `make test`); needs wrk (apt-get install wrk)
bench: bench-latest bench-stream bench-refresher bench-backtest bench-failover

## bench-latest: /latest against a bare route, ordinary (2 workers) then pinned (1 worker on CPU 0)
bench-latest: $(BIN)/activate
	$(BIN)/python -m bench.latest $(BENCH_LATEST_ARGS)
	$(BIN)/python -m bench.latest --pinned $(BENCH_LATEST_ARGS)

.PHONY: bench-stream bench-refresher bench-truth bench-backtest bench-failover bench-record bench-alerts
## bench-record: the track record at a year of four markets, per period, on PostgreSQL and SQLite
## (bench/record.py; needs the local PostgreSQL server and wrk; about 10 minutes)
bench-record: $(BIN)/activate
	$(BIN)/python -m bench.record $(BENCH_RECORD_ARGS)

## bench-alerts: 10,000 alerts, 1,000 firing: board to receiver p50/p99; the refresher's publish with alerts off vs on
bench-alerts: $(BIN)/activate
	$(BIN)/python -m bench.alerts $(BENCH_ALERTS_ARGS)

## bench-failover: from SIGKILL of the leading refresher to the standby's first board (N kills)
bench-failover: $(BIN)/activate
	$(BIN)/python -m bench.failover

## bench-backtest: tape seconds replayed per second by the backtest, on one CPU (a 6 h tape)
bench-backtest: $(BIN)/activate
	$(BIN)/python -m bench.backtest --hours $(or $(BACKTEST_HOURS),6)

.PHONY: bench-real
## bench-real DATA=folder: the model on public real data (bench/real.py; DATA searched for klines, outcomes, books)
bench-real: $(BIN)/activate
	@test -n "$(strip $(DATA))" || { echo 'usage: make bench-real DATA=folder [BENCH_REAL_ARGS="--rule twap --json out.json --chart docs/real-reliability.svg"]' >&2; exit 2; }
	$(BIN)/python -m bench.real "$(DATA)" $(BENCH_REAL_ARGS)

## bench-truth: the live source against a moving stand-in market: P(up) vs the exact value (7 min)
## (TRUTH_PATH=feed: on the settlement-feed stand-in, against the Brownian formula at its realised sigma)
bench-truth: $(BIN)/activate
	$(BIN)/python -m bench.truth --seconds $(or $(TRUTH_SECONDS),420) --path $(or $(TRUTH_PATH),brownian)

## bench-refresher: time from a (fake) upstream change to the published board
bench-refresher: $(BIN)/activate
	$(BIN)/python -m bench.refresher

## bench-stream: N concurrent SSE clients (default 10000) on this machine
## (four markets against one: make bench-stream BENCH_STREAM_ARGS="--markets BTC,ETH,SOL,XRP
##  --clients 1000 --seconds 15 --pinned --rounds 3"; docs/performance.md)
bench-stream: $(BIN)/activate
	$(BIN)/python -m bench.stream $(or $(BENCH_STREAM_ARGS),--clients $(or $(CLIENTS),1000 5000 10000))

.PHONY: cluster drill
## cluster: the production shape on loopback: Redis Sentinel, two web hosts, two refreshers, nginx
cluster: $(BIN)/activate
	$(BIN)/python -m harness.cluster

## drill: the same, then kill the leader, the Redis primary and a web host in turn, and report
drill: $(BIN)/activate
	$(BIN)/python -m harness.cluster --drill

.PHONY: release deploy rollback
## release: build a deployable bundle (wheel + wheelhouse) in dist/
release: $(BIN)/activate
	bash deploy/build-release.sh

## deploy HOST=user@vm or HOSTS="vm1 vm2" [BUNDLE=file]: build once (or take BUNDLE), then to each host in turn behind its health gate
# HOST also names the address `make run` binds (127.0.0.1 by default): only a HOST given on
# the command line is a deploy target.
DEPLOY_HOSTS = $(strip $(or $(HOSTS),$(if $(filter command line,$(origin HOST)),$(HOST))))
deploy: $(BIN)/activate
	@test -n "$(DEPLOY_HOSTS)" || { echo 'usage: make deploy HOST=user@vm  or  make deploy HOSTS="user@vm1 user@vm2" [SHARED_ENV=file]'; exit 2; }
	SHARED_ENV="$(SHARED_ENV)" bash deploy/ship-hosts.sh "$(or $(BUNDLE),$$(bash deploy/build-release.sh))" $(DEPLOY_HOSTS)

## rollback HOST=user@vm or HOSTS="vm1 vm2": switch back to the previous release, host by host
rollback:
	@test -n "$(DEPLOY_HOSTS)" || { echo 'usage: make rollback HOST=user@vm  or  make rollback HOSTS="user@vm1 user@vm2"'; exit 2; }
	for host in $(DEPLOY_HOSTS); do \
		ssh $(if $(SSH_PORT),-p $(SSH_PORT)) $(SSH_OPTS) "$$host" "sudo bash /opt/probboard/current/deploy/remote.sh rollback $(REMOTE_ARGS)" || exit 1; \
	done
