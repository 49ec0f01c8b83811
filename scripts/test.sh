#!/usr/bin/env bash
# Runs every check of jupyter-tool-terminal, as CI does: set-up, Python lint/format/types,
# pytest against the real Docker Engine, the frontend's typecheck/lint/unit tests, the
# real-browser end-to-end test in Debian's chromium, the documentation site and the benchmark's
# quick mode.
# Every stage runs, whatever the others did; a table at the end says how each went and how
# long it took, and the exit status is non-zero when any failed.
# Stages: all of them, or those named as arguments or in JTT_STAGES (with the set-up they need):
#   lint mypy shellcheck pytest acp frontend packaging wheel browser hub-browser binder docs benchmark
# e.g. `bash scripts/test.sh pytest docs`.
# What waits for the network, and the stages that compute nothing timed, run beside the long
# pytest stage (installs, mypy, the frontend's checks, the wheel, the docs; the Jupyter AI tier
# once the Docker tier is done); the timed stages (browser, benchmark) run alone.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
step() { printf '\n== %s\n' "$*"; }
as_root=$([ "$(id -u)" = 0 ] && echo yes || echo no)

all_stages="lint mypy shellcheck pytest acp frontend packaging wheel browser hub-browser binder docs benchmark"
selected=" $(echo "${*:-${JTT_STAGES:-$all_stages}}" | tr ',' ' ') "
for name in $selected; do
  if [[ " $all_stages " != *" $name "* ]]; then
    echo "unknown stage: $name (stages: $all_stages)" >&2
    exit 2
  fi
done
wants() {  # wants STAGE...: whether any of them runs
  local name
  for name; do [[ "$selected" != *" $name "* ]] || return 0; done
  return 1
}

# Background work: each job's output, duration and status go to files of its own (KEY.log,
# KEY.time, KEY.status); the output is shown when the job is waited for.
jobs_dir=$(mktemp -d /tmp/jtt-test.XXXXXX)
declare -A job_pids=()
logged() {  # logged KEY command...
  local key=$1 started=$SECONDS status=0
  shift
  "$@" >"$jobs_dir/$key.log" 2>&1 || status=$?
  echo "$((SECONDS - started))" >"$jobs_dir/$key.time"
  echo "$status" >"$jobs_dir/$key.status"
}
background() {  # background KEY command...: starts it, `waited KEY` waits for it
  logged "$@" &
  job_pids[$1]=$!
}
waited() {  # waited KEY: waits for the job (if it runs), shows its output, returns its status
  local key=$1 status began=$SECONDS
  if [ -n "${job_pids[$key]:-}" ]; then
    wait "${job_pids[$key]}" || true
    unset "job_pids[$key]"
  fi
  [ -f "$jobs_dir/$key.status" ] || return 0  # (never started: nothing wanted it)
  cat "$jobs_dir/$key.log"
  # (What a stage's time holds besides its own work: where a slow run's time went.)
  echo "($key: took $(cat "$jobs_dir/$key.time" 2>/dev/null || echo '?') s in the background;" \
    "waited for $((SECONDS - began)) s at $(date -u +%H:%M:%S))"
  status=$(cat "$jobs_dir/$key.status" 2>/dev/null || echo 1)
  [ "$status" -eq 0 ] || echo "($key FAILED)" >&2
  return "$status"
}

second_engine=no
podman_service=no  # `started` once this run started Podman's test service
cleanup() {
  for pid in "${job_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  [ "$second_engine" = no ] || bash scripts/second-engine.sh stop
  [ "$podman_service" = no ] || bash scripts/podman.sh stop
  # This run started the engine: stop it again at the end, whatever happens.
  [ "$engine_was_up" = yes ] || pkill -TERM -x dockerd || true
  rm -rf "$jobs_dir"
}
engine_was_up=$(docker info >/dev/null 2>&1 && echo yes || echo no)
trap cleanup EXIT

# What later stages need from Debian, installed by engine.sh's apt-get in one transaction.
more_packages=()
if [ "$as_root" = yes ] && command -v apt-get >/dev/null; then
  if wants browser hub-browser binder && [ ! -x /usr/bin/chromium ]; then more_packages+=(chromium); fi
  if wants shellcheck && ! command -v shellcheck >/dev/null; then more_packages+=(shellcheck); fi
  if wants pytest && { ! command -v podman >/dev/null || [ ! -x /usr/libexec/podman/catatonit ]; }; then
    more_packages+=(podman catatonit)
  fi
  command -v node >/dev/null || more_packages+=(nodejs npm)
  python3 -c 'import ensurepip, venv' 2>/dev/null || more_packages+=(python3-venv)
fi
if wants pytest acp browser hub-browser benchmark; then
  JTT_MORE_DEBIAN_PACKAGES="${more_packages[*]}" bash scripts/engine.sh
fi
if wants pytest && [ "$as_root" = yes ]; then
  # The contract tests run against Podman's Docker API too (tests/runtime/test_podman.py).
  # A service that answered before this run is left running at its end.
  if ! { command -v podman >/dev/null && podman --url unix:///run/podman-test.sock version >/dev/null 2>&1; }; then
    podman_service=started
  fi
  background podman bash scripts/podman.sh
  # The Hub tier runs on an engine of its own, beside the rest (see pytest_stage).
  background second-engine bash scripts/second-engine.sh
  second_engine=starting
fi
bash scripts/setup.sh "test,benchmark"
# Everything below runs in the project's virtual environment.
export PATH="${JTT_VENV:-$repo/.venv}/bin:$PATH"

node_packages() {
  # The reference terminal of the screen-fidelity tests (xterm.js headless), from its lockfile,
  # and the official TypeScript MCP SDK's client of the agent tests (tests/agents/test_mcp_ts.py).
  npm ci --prefix tests/support/xterm --no-audit --no-fund --silent &&
    npm ci --prefix tests/support/mcp-ts --no-audit --no-fund --silent &&
    bash scripts/hub-deps.sh &&
    { ! wants browser hub-browser binder ||
      (cd ui-tests && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable >/dev/null); }
}
background node-packages node_packages
# The isolation test runs a Hub as root with real Unix users, who need a Python they may run.
if wants pytest && [ "$as_root" = yes ]; then background hub-users-env bash scripts/hub-users-env.sh; fi
if wants acp; then background acp-venv bash scripts/test-acp.sh install; fi
if wants binder; then
  export JTT_BINDER_VENV="$jobs_dir/binder-venv"
  background binder-venv bash scripts/test-binder.sh install
fi

# One stage: a name and a command (or a function). It runs even when an earlier one failed.
names=()
outcomes=()
times=()
failed=0
record() {  # record NAME STATUS SECONDS
  names+=("$1")
  if [ "$2" -eq 0 ]; then outcomes+=(passed); else
    outcomes+=(FAILED)
    failed=1
  fi
  times+=("$3s")
}
stage() {
  local name=$1 started=$SECONDS status=0
  shift
  step "$name"
  # A function stage chains its commands with && (set -e does not hold inside an `if`).
  "$@" || status=$?
  record "$name" "$status" "$((SECONDS - started))"
}
joined() {  # joined KEY NAME: the result of a stage run in the `background`, at its place in the table
  local key=$1 name=$2 status=0
  step "$name (ran during the stages before)"
  waited "$key" || status=$?
  record "$name" "$status" "$(cat "$jobs_dir/$key.time" 2>/dev/null || echo 0)"
}

pytest_stage() {
  local status=$node_packages_status
  waited hub-users-env || status=1
  # CI owns its engine, so the test that restarts dockerd mid-session runs there.
  if [ "${CI:-}" = true ] && [ "$as_root" = yes ]; then export JTT_TEST_RESTART_DOCKERD=1; fi
  if [ "$as_root" = yes ]; then
    waited podman || return 1
    JTT_PODMAN_HOST=$(tail -n 1 "$jobs_dir/podman.log")
    export JTT_PODMAN_HOST
  fi
  local hub_engine=""
  if [ "$second_engine" = starting ]; then
    if waited second-engine; then
      second_engine=yes
      hub_engine=$(tail -n 1 "$jobs_dir/second-engine.log")
    else
      echo "no second engine: the Hub tier runs after the Docker tier, on the same engine"
    fi
  fi
  # Native tracebacks: pytest's own (it parses the failing test's source) once crashed the
  # whole run with CPython 3.11's "AST constructor recursion depth mismatch" (an INTERNALERROR
  # that stopped pytest at the first failure it formatted); the assertion's message is kept.
  # Three lanes at once, together every test:
  # - the Docker tier (-m "docker and not hub") against the machine's engine, then the Hub
  #   isolation test (real Unix users in the group of the machine engine's socket), then the
  #   Jupyter AI tier's tests;
  # - the engine-free tier (-m "not docker") with no engine reachable, which shows that a
  #   machine without Docker runs it;
  # - the Hub's Docker tier (-m "hub and docker") on the second engine: the tests use fixed
  #   owners (alice, bob), so two tiers on one engine would meet.
  # One lane waits on processes, one mostly computes screens, the Hub's mostly waits for its
  # Hub, proxy and servers. (In two lanes, the engine-free tier then the Hub tier, the stage
  # took 1306 s and 1056 s on 2026-12-06, the Docker tier's lane 683-945 s.)
  local pytest=(python -m pytest -q --tb=native -p no:cacheprovider)
  local isolation=tests/hub/test_hub_isolation.py
  local lane_log
  lane_log=$(mktemp /tmp/jtt-pytest-lane.XXXXXX)
  local hub_log
  hub_log=$(mktemp /tmp/jtt-pytest-hub.XXXXXX)
  echo "(the lanes start at $(date -u +%H:%M:%S))"
  (
    tier=0
    DOCKER_HOST=unix:///nonexistent/docker.sock "${pytest[@]}" -m "not docker" || tier=1
    echo "(the engine-free tier ended at $(date -u +%H:%M:%S))"
    exit "$tier"
  ) >"$lane_log" 2>&1 &
  local lane=$!
  # The Hub tier waits on its Hub, proxy and servers more than it computes: a lane of its own.
  local hub_lane=""
  if [ -n "$hub_engine" ]; then
    (
      printf '\n== pytest, the Hub tier (-m "hub and docker") on the second engine (%s)\n' "$hub_engine"
      tier=0
      DOCKER_HOST=$hub_engine "${pytest[@]}" -m "hub and docker" --deselect "$isolation" || tier=1
      echo "(the Hub tier ended at $(date -u +%H:%M:%S))"
      exit "$tier"
    ) >"$hub_log" 2>&1 &
    hub_lane=$!
  fi
  "${pytest[@]}" -m "docker and not hub" || status=1
  echo "(the Docker tier ended at $(date -u +%H:%M:%S))"
  if [ -n "$hub_engine" ]; then
    "${pytest[@]}" -m docker "$isolation" || status=1
  else
    "${pytest[@]}" -m "hub and docker" || status=1
  fi
  # The Jupyter AI tier's tests (on this engine too) while the other lane ends: a stage of its
  # own in the table. (The browser test through JupyterHub ran here too once, and its observer
  # dialog timed out beside the other lane's Hub tier: it runs alone, after.)
  if wants acp; then logged acp acp_stage; fi
  echo "(the first lane ended at $(date -u +%H:%M:%S))"
  wait "$lane" || status=1
  printf '\n== pytest, the engine-free tier (-m "not docker", no engine reachable)\n'
  cat "$lane_log"
  if [ -n "$hub_lane" ]; then
    wait "$hub_lane" || status=1
    cat "$hub_log"
  fi
  rm -f "$lane_log" "$hub_log"
  # (Idle from here: the timed stages after run without it.)
  if [ "$second_engine" = yes ]; then
    bash scripts/second-engine.sh stop
    second_engine=no
  fi
  if [ "$podman_service" = started ]; then
    bash scripts/podman.sh stop
    podman_service=no
  fi
  return "$status"
}
acp_stage() {
  waited acp-venv && bash scripts/test-acp.sh
}
extensions_enabled() {
  jupyter server extension list 2>&1 | tee /tmp/jtt-server-extensions.txt | grep -i "jupyter_tool_terminal.*OK" &&
    jupyter labextension list 2>&1 | tee /tmp/jtt-labextensions.txt | grep -i "jupyter-tool-terminal.*OK"
}
shellcheck_stage() {
  if ! command -v shellcheck >/dev/null && command -v apt-get >/dev/null && [ "$as_root" = yes ]; then
    echo "installing Debian's shellcheck"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null || return 1
  fi
  # The scripts the package runs in tool containers (POSIX sh); warnings and errors fail.
  shellcheck --shell=sh --severity=warning jupyter_tool_terminal/runtime/*.sh
}
browser_stage() {
  if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$as_root" = yes ]; then
    echo "installing Debian's chromium for the browser test"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null || return 1
  fi
  bash scripts/test-browser.sh
}
binder_stage() {
  waited binder-venv && bash scripts/test-binder.sh
}

set +e
if wants lint; then
  stage "ruff check" ruff check .
  stage "ruff format --check" ruff format --check .
fi
if wants shellcheck; then stage "shellcheck (the reaper's script)" shellcheck_stage; fi
# The node packages first: the frontend's checks run jlpm too, and two at once share its cache.
node_packages_status=0
waited node-packages || node_packages_status=1
# Beside pytest, one after the other (they compute; the tests come first): checks that time
# nothing. The docs build in their own environment (.venv-docs): installing into the project's
# would change it under the running tests.
checks_beside() {
  if wants mypy; then logged mypy mypy; fi
  if wants frontend; then logged frontend bash scripts/test-frontend.sh; fi
  if wants wheel; then logged wheel bash scripts/check-wheel.sh; fi
  if wants docs; then logged docs bash scripts/docs.sh; fi
}
checks_beside &
for key in mypy frontend wheel docs; do job_pids[$key]=$!; done
if wants pytest; then stage "pytest (real Docker Engine, real jupyter_server)" pytest_stage; fi
if wants mypy; then joined mypy "mypy (strict)"; fi
acp_name="Jupyter AI tier: beside jupyter-ai 3.2.0 (mcp 1.x), MCP and ACP tests"
if wants acp && wants pytest; then
  joined acp "$acp_name"
elif wants acp; then
  stage "$acp_name" acp_stage
fi
if wants frontend; then joined frontend "frontend: typecheck, lint, unit tests"; fi
if wants packaging; then
  stage "packaging: server and lab extensions enabled and OK" extensions_enabled
fi
if wants wheel; then joined wheel "packaging: the wheel, installed into a fresh environment"; fi
if wants browser; then stage "browser end-to-end test (Debian chromium)" browser_stage; fi
if wants hub-browser; then
  stage "browser test through JupyterHub (service mode, Debian chromium)" bash scripts/test-browser-hub.sh
fi
if wants binder; then
  stage "Binder demo: binder/ in a fresh environment, no Docker, contract and browser" binder_stage
fi
if wants docs; then joined docs "docs: the Sphinx site builds (warnings are errors)"; fi
if wants benchmark; then
  stage "benchmark, quick mode (every measurement path works, no guarded ratio regressed)" \
    python benchmarks/run.py --quick
fi

echo
# The stage column is as wide as the longest name, so that the columns stay aligned.
width=5
for name in "${names[@]}"; do [ "${#name}" -le "$width" ] || width=${#name}; done
printf '%-*s  %-7s %7s\n' "$width" stage result time
for i in "${!names[@]}"; do
  printf '%-*s  %-7s %7s\n' "$width" "${names[$i]}" "${outcomes[$i]}" "${times[$i]}"
done
printf '%-*s  %-7s %7s\n' "$width" "the whole run, set-up included" "" "${SECONDS}s"
echo
if [ "$failed" -ne 0 ]; then
  echo "some checks FAILED"
  exit 1
fi
echo "all checks passed"
