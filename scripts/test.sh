#!/usr/bin/env bash
# Runs every check of jupyter-tool-terminal, as CI does: set-up, Python lint/format/types,
# pytest against the real Docker Engine, the frontend's typecheck/lint/unit tests, the
# real-browser end-to-end test in Debian's chromium, the documentation site and the benchmark's
# quick mode.
# Every stage runs, whatever the others did; a table at the end says how each went and how
# long it took, and the exit status is non-zero when any failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step() { printf '\n== %s\n' "$*"; }

engine_was_up=$(docker info >/dev/null 2>&1 && echo yes || echo no)
bash scripts/engine.sh
bash scripts/setup.sh "test,benchmark"
bash scripts/hub-deps.sh
# The isolation test runs a Hub as root with real Unix users, who need a Python they may run.
if [ "$(id -u)" = 0 ]; then bash scripts/hub-users-env.sh; fi
# The reference terminal of the screen-fidelity tests (xterm.js headless), from its lockfile.
npm ci --prefix tests/support/xterm --no-audit --no-fund --silent
# The official TypeScript MCP SDK's client of the agent tests (tests/agents/test_mcp_ts.py).
npm ci --prefix tests/support/mcp-ts --no-audit --no-fund --silent
# Everything below runs in the project's virtual environment.
export PATH="${JTT_VENV:-$repo/.venv}/bin:$PATH"
if [ "$engine_was_up" = no ]; then
  # This run started the engine: stop it again at the end, whatever happens.
  trap 'pkill -TERM -x dockerd || true' EXIT
fi

# One stage: a name and a command (or a function). It runs even when an earlier one failed.
names=()
outcomes=()
times=()
failed=0
stage() {
  local name=$1 started=$SECONDS result=passed
  shift
  step "$name"
  # A function stage chains its commands with && (set -e does not hold inside an `if`).
  if ! "$@"; then
    result=FAILED
    failed=1
  fi
  names+=("$name")
  outcomes+=("$result")
  times+=("$((SECONDS - started))s")
}

pytest_stage() {
  # CI owns its engine, so the test that restarts dockerd mid-session runs there.
  if [ "${CI:-}" = true ] && [ "$(id -u)" = 0 ]; then export JTT_TEST_RESTART_DOCKERD=1; fi
  # The contract tests run against Podman's Docker API too (tests/runtime/test_podman.py).
  if [ "$(id -u)" = 0 ]; then
    JTT_PODMAN_HOST=$(bash scripts/podman.sh) || return 1
    export JTT_PODMAN_HOST
  fi
  # Native tracebacks: pytest's own (it parses the failing test's source) once crashed the
  # whole run with CPython 3.11's "AST constructor recursion depth mismatch" (an INTERNALERROR
  # that stopped pytest at the first failure it formatted); the assertion's message is kept.
  # Two tiers at once, together every test: the engine-free one (-m "not docker") with no
  # engine reachable, which shows that a machine without Docker runs it, and the one against
  # the real engine; one waits on processes, the other mostly computes screens.
  local engine_free_log status_docker=0 status_engine_free=0
  engine_free_log=$(mktemp /tmp/jtt-pytest-engine-free.XXXXXX)
  DOCKER_HOST=unix:///nonexistent/docker.sock python -m pytest -q --tb=native -m "not docker" \
    -p no:cacheprovider >"$engine_free_log" 2>&1 &
  local engine_free=$!
  python -m pytest -q --tb=native -m docker || status_docker=$?
  wait "$engine_free" || status_engine_free=$?
  printf '\n== pytest, the engine-free tier (-m "not docker", no engine reachable)\n'
  cat "$engine_free_log"
  rm -f "$engine_free_log"
  [ "$status_docker" -eq 0 ] && [ "$status_engine_free" -eq 0 ]
}
extensions_enabled() {
  jupyter server extension list 2>&1 | tee /tmp/jtt-server-extensions.txt | grep -i "jupyter_tool_terminal.*OK" &&
    jupyter labextension list 2>&1 | tee /tmp/jtt-labextensions.txt | grep -i "jupyter-tool-terminal.*OK"
}
shellcheck_stage() {
  if ! command -v shellcheck >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's shellcheck"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null || return 1
  fi
  # The scripts the package runs in tool containers (POSIX sh); warnings and errors fail.
  shellcheck --shell=sh --severity=warning jupyter_tool_terminal/runtime/*.sh
}
browser_stage() {
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's chromium for the browser test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || return 1
  fi
  bash scripts/test-browser.sh
}

set +e
stage "ruff check" ruff check .
stage "ruff format --check" ruff format --check .
stage "mypy (strict)" mypy
stage "shellcheck (the reaper's script)" shellcheck_stage
stage "pytest (real Docker Engine, real jupyter_server)" pytest_stage
stage "Jupyter AI tier: beside jupyter-ai 3.2.0 (mcp 1.x), MCP and ACP tests" bash scripts/test-acp.sh
stage "frontend: typecheck, lint, unit tests" bash scripts/test-frontend.sh
stage "packaging: server and lab extensions enabled and OK" extensions_enabled
stage "packaging: the wheel, installed into a fresh environment" bash scripts/check-wheel.sh
stage "browser end-to-end test (Debian chromium)" browser_stage
stage "browser test through JupyterHub (service mode, Debian chromium)" bash scripts/test-browser-hub.sh
stage "Binder demo: binder/ in a fresh environment, no Docker, contract and browser" bash scripts/test-binder.sh
# The documentation site, warnings as errors, with the tools installed into the project's venv.
stage "docs: the Sphinx site builds (warnings are errors)" env JTT_DOCS_VENV="${JTT_VENV:-$repo/.venv}" bash scripts/docs.sh
stage "benchmark, quick mode (every measurement path works, no guarded ratio regressed)" python benchmarks/run.py --quick

echo
# The stage column is as wide as the longest name, so that the columns stay aligned.
width=5
for name in "${names[@]}"; do [ "${#name}" -le "$width" ] || width=${#name}; done
printf '%-*s  %-7s %7s\n' "$width" stage result time
for i in "${!names[@]}"; do
  printf '%-*s  %-7s %7s\n' "$width" "${names[$i]}" "${outcomes[$i]}" "${times[$i]}"
done
echo
if [ "$failed" -ne 0 ]; then
  echo "some checks FAILED"
  exit 1
fi
echo "all checks passed"
