#!/usr/bin/env bash
# Runs every check of jupyter-tool-terminal, as CI does: set-up, Python lint/format/types,
# pytest against the real Docker Engine, the frontend's typecheck/lint/unit tests, the
# real-browser end-to-end test in Debian's chromium, and the benchmark's quick mode.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step() { printf '\n== %s\n' "$*"; }

bash scripts/setup.sh "test,benchmark"

step "ruff check"
ruff check .
step "ruff format --check"
ruff format --check .
step "mypy (strict)"
mypy
step "pytest (real Docker Engine, real jupyter_server)"
python3 -m pytest -q

step "frontend: typecheck, lint, unit tests"
bash scripts/test-frontend.sh

step "packaging: server and lab extensions enabled and OK"
jupyter server extension list 2>&1 | tee /tmp/jtt-server-extensions.txt | grep -i "jupyter_tool_terminal.*OK"
jupyter labextension list 2>&1 | tee /tmp/jtt-labextensions.txt | grep -i "jupyter-tool-terminal.*OK"

if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  step "installing Debian's chromium for the browser test"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
step "browser end-to-end test (Debian chromium)"
bash scripts/test-browser.sh

step "benchmark, quick mode (checks that every measurement path works)"
python3 benchmarks/run.py --quick

echo
echo "all checks passed"
