# Two entry points (README Quick start): `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The CPU wheel keeps dev/CI light; the package itself asks for torch>=2.2.
TORCH_SPEC ?= torch==2.13.0
export QT_QPA_PLATFORM ?= $(if $(DISPLAY)$(WAYLAND_DISPLAY),,offscreen)
# pytest-xdist workers; JOBS=0 runs in one process. A file's tests stay on one worker
# (loadfile): module-scoped fixtures are computed once. `make test` runs at least 4: about
# half its tests wait (scripts that sleep per item, sshd, the app's event loop) while their
# children work, so on 2 cores 4 workers keep both busy (9.3 min against 11-15 with 2).
# `make quick` has no children and no waits: one worker per core.
JOBS   ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 4 ] && n=4; echo $$n)
QUICK_JOBS ?= auto
PYTEST := $(PY) -m pytest -q -rs -p no:cacheprovider --durations=25 --dist loadfile

.PHONY: setup setup-system run test quick package-test lint typecheck bench gpu-check screenshots \
	package clean

$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[dev,frameworks]"
	touch $@

setup: $(VENV)/.stamp

## Set up and open the app on the bundled demo (runs the demo under the profiler). Without a
## display it runs the demo headless, prints where the screenshot of its analysis is, and exits;
## missing system libraries of Qt's xcb plugin are named in one line (README: System libraries).
run: setup
	$(VENV)/bin/stallscope --demo

## Set up, check the import contracts (pyproject [tool.importlinter]), run every test but the
## PyInstaller build (`make package-test`); the 25 slowest are listed at the end.
test: setup setup-system
	$(VENV)/bin/lint-imports
	$(PYTEST) -n $(JOBS) -m "not packaging"

## The fast loop while developing: no child processes (tests marked `runner` in their files;
## tests/conftest.py fails a test that starts one unmarked), no PyInstaller build.
quick: setup
	$(PYTEST) -n $(QUICK_JOBS) -m "not runner and not packaging"

## The PyInstaller build of the desktop app, started offscreen on a real trace (tests marked
## `packaging`; .ci/run runs it after `make test`).
package-test: setup
	$(PY) -m pytest -q -rs -p no:cacheprovider --durations=5 -m packaging tests/gui/test_packaging.py

## What the remote (SSH) tests need from the system: OpenSSH's sshd and ssh. Installs them with
## apt-get as root when /usr/sbin/sshd is absent; otherwise says in one line that they skip.
setup-system:
	@if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null; then \
		echo "setup-system: sshd and ssh present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q openssh-server openssh-client; \
	else \
		echo "setup-system: no sshd and no root/apt-get to install it: the SSH tests skip"; \
	fi

## ruff over the sources and tests, then the type check.
lint: setup
	$(VENV)/bin/ruff check core gui tests
	MYPY=$(VENV)/bin/mypy .ci/typecheck

## mypy over stallscope.core and stallscope.gui (pyproject [tool.mypy]; .ci/typecheck).
typecheck: setup
	MYPY=$(VENV)/bin/mypy .ci/typecheck

## Benchmarks: run by hand, not part of `make test`.
bench: setup
	$(PY) tests/bench/bench_load.py
	$(PY) tests/bench/bench_timeline.py
	$(PY) tests/bench/bench_runner.py
	$(PY) tests/bench/bench_lmdb.py
	$(PY) tests/bench/bench_lineprof.py
	$(PY) tests/bench/bench_hostile.py
	$(PY) tests/bench/bench_ranks.py
	$(PY) tests/bench/bench_tune.py

## On a CUDA machine: small scripts under the runner must each produce their advice id
## (tests/gpu; about a minute). Elsewhere it says "no CUDA device: skipped".
gpu-check: setup
	$(PY) tests/gpu/check.py

## The README screenshot (resources/screenshot.png).
screenshots: setup
	$(PY) resources/make_readme_screenshot.py

## A one-folder desktop app in dist/stallscope (PyInstaller).
package: setup
	bash packaging/build.sh

clean:
	rm -rf $(VENV) build dist *.egg-info
