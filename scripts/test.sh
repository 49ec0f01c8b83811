#!/usr/bin/env bash
# Runs every check of jupyter-tool-terminal, as CI does: set-up, Python lint/format/types,
# pytest against the real Docker Engine, the frontend's typecheck/lint/unit tests, the
# real-browser end-to-end test in Debian's chromium, and the benchmark's quick mode.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step() { printf '\n== %s\n' "$*"; }

engine_was_up=$(docker info >/dev/null 2>&1 && echo yes || echo no)
bash scripts/engine.sh
bash scripts/setup.sh "test,benchmark"
bash scripts/hub-deps.sh
# Everything below runs in the project's virtual environment.
export PATH="${JTT_VENV:-$repo/.venv}/bin:$PATH"
if [ "$engine_was_up" = no ]; then
  # This run started the engine: stop it again at the end, whatever happens.
  trap 'pkill -TERM -x dockerd || true' EXIT
fi

step "ruff check"
ruff check .
step "ruff format --check"
ruff format --check .
step "mypy (strict)"
mypy
step "pytest (real Docker Engine, real jupyter_server)"
# CI owns its engine, so the test that restarts dockerd mid-session runs there.
if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then export JTT_TEST_RESTART_DOCKERD=1; fi
python -m pytest -q

step "frontend: typecheck, lint, unit tests"
bash scripts/test-frontend.sh

step "packaging: server and lab extensions enabled and OK"
jupyter server extension list 2>&1 | tee /tmp/jtt-server-extensions.txt | grep -i "jupyter_tool_terminal.*OK"
jupyter labextension list 2>&1 | tee /tmp/jtt-labextensions.txt | grep -i "jupyter-tool-terminal.*OK"
step "packaging: the wheel, installed into a fresh environment"
bash scripts/check-wheel.sh

if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  step "installing Debian's chromium for the browser test"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
step "browser end-to-end test (Debian chromium)"
bash scripts/test-browser.sh
bash scripts/test-browser-hub.sh

step "benchmark, quick mode (checks that every measurement path works)"
python benchmarks/run.py --quick

echo
echo "all checks passed"
