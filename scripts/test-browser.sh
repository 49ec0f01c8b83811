#!/usr/bin/env bash
# Real-browser end-to-end test of the JupyterLab extension.
#
# Starts labelled tool containers on the real Docker Engine and JupyterLab
# (with jupyter-tool-terminal, under a JupyterHub-like prefix /user/<owner>/,
# token auth), then drives Debian's chromium with Playwright (ui-tests/):
# launcher tile -> terminal -> `echo $((6*7))` -> 42 -> resize -> stty size
# -> exit code -> new session -> reset -> close -> shell gone from docker top;
# a reload reattaches to the same shell. It writes only below a temporary
# directory (README pictures come from scripts/screenshots.sh). Every
# container and server it started is removed on exit, failure included.
#
# Arguments go to `playwright test` (e.g. tests/reload.spec.ts to run one spec).
#
# Assumes: chromium at /usr/bin/chromium (or E2E_CHROMIUM), dockerd running,
# the Python package installed (scripts/setup.sh, or the wheel), Node and
# jlpm, and the image jupyter-tool-terminal-test:latest (built with
# scripts/build-test-image.sh when missing).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/lab.sh
source "$repo/scripts/lib/lab.sh"
image=${E2E_IMAGE:-jupyter-tool-terminal-test:latest}
chromium=${E2E_CHROMIUM:-/usr/bin/chromium}
owner=e2e-alice
tool=e2etool
display_name="E2E Tool"
suffix="$$-$RANDOM"
container="jtt-e2e-$suffix"
other_container="jtt-e2e-other-$suffix"

work=$(mktemp -d /tmp/jtt-e2e.XXXXXX)
server_pid=""
no_engine_pid=""
containers=()

cleanup() {
  local rc=$?
  set +e
  lab_stop "$server_pid"
  lab_stop "$no_engine_pid"
  for name in "${containers[@]}"; do
    docker rm -f "$name" >/dev/null 2>&1
  done
  if [ "$rc" -ne 0 ] && [ -f "$work/jupyter.log" ]; then
    echo "---- last lines of the JupyterLab log ----" >&2
    tail -n 60 "$work/jupyter.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }

step "prerequisites"
[ -x "$chromium" ] || { echo "chromium not found at $chromium" >&2; exit 1; }
docker info >/dev/null || { echo "the Docker Engine does not answer" >&2; exit 1; }
python -c "import jupyter_tool_terminal" || {
  echo "install the package first: bash scripts/setup.sh (or pip install the wheel)" >&2
  exit 1
}
if ! docker image inspect "$image" >/dev/null 2>&1; then
  bash "$repo/scripts/build-test-image.sh" "$image"
fi

step "labextension build"
lab_directories "$work"
lab_labextension "$repo" "$work"

step "tool containers"
docker run -d --network none \
  --label jupyter-tool-terminal.owner="$owner" \
  --label jupyter-tool-terminal.tool="$tool" \
  --name "$container" "$image" >/dev/null
containers+=("$container")
docker run -d --network none \
  --label jupyter-tool-terminal.owner=someone-else \
  --label jupyter-tool-terminal.tool="$tool" \
  --name "$other_container" "$image" >/dev/null
containers+=("$other_container")

step "JupyterLab"
port=$(lab_free_port)
token=$(lab_token)
banner="TOOL-BANNER-$RANDOM-READY"
base_path="/user/$owner/"
mkdir -p "$work/settings/@jupyterlab/terminal-extension"
# The user's JupyterLab terminal settings, which tool terminals follow too:
# the screen reader mode gives the test the screen as text.
cat > "$work/settings/@jupyterlab/terminal-extension/plugin.jupyterlab-settings" <<'JSON'
{ "screenReaderMode": true, "fontSize": 14 }
JSON
lab_config "$work/config/jupyter_server_config.py" "$port" "$token" "$work"
cat >> "$work/config/jupyter_server_config.py" <<PY
c.ServerApp.jpserver_extensions = {"jupyter_tool_terminal": True, "jupyterlab": True}
c.ServerApp.base_url = "$base_path"
c.ToolTerminalApp.owner = "$owner"
# A reload reattaches within this grace (set here, whatever the default is).
c.ToolTerminalApp.disconnect_grace = 60
c.ToolTerminalApp.recording_dir = "$work/recordings"
c.ToolTerminalApp.tool_types = {
    "$tool": {
        "display_name": "$display_name",
        "shell": ["/bin/sh"],
        # The image's own user, named: the status bar says root@instance.
        "user": "root",
        "startup_command": "echo $banner",
        # Recorded: the recordings spec plays its terminals back.
        "record": True,
        "icon": (
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
            '<rect x="2" y="4" width="20" height="16" rx="2" fill="#616161"/>'
            '<circle data-e2e-icon="1" cx="8" cy="12" r="3" fill="#f5f5f5"/>'
            '</svg>'
        ),
    },
}
PY
lab_start "$work" "$work/jupyter.log" jupyter lab --config="$work/config/jupyter_server_config.py"
server_pid=$lab_pid
base_url="http://127.0.0.1:$port$base_path"
lab_wait "$base_url" "$token" "$server_pid"
curl -fsS -H "Authorization: token $token" "${base_url}tool-terminal/api/instances"
echo
curl -fsS -H "Authorization: token $token" "${base_url}lab/api/extensions" | grep -q '"name": *"jupyter-tool-terminal"' || {
  echo "JupyterLab does not serve the jupyter-tool-terminal labextension" >&2
  exit 1
}

step "JupyterLab whose server reaches no engine"
# The same configuration, with DOCKER_HOST on a socket nobody serves: the
# extension answers 503 with its message, which the UI must show.
no_engine_port=$(lab_free_port)
DOCKER_HOST="unix://$work/no-engine.sock" lab_start "$work" "$work/jupyter-no-engine.log" \
  jupyter lab --config="$work/config/jupyter_server_config.py" --port="$no_engine_port" \
  --ToolTerminalApp.runtime=docker
no_engine_pid=$lab_pid
no_engine_url="http://127.0.0.1:$no_engine_port$base_path"
for _ in $(seq 1 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: token $token" "${no_engine_url}tool-terminal/api/instances" || true)
  [ "$code" = 503 ] && break
  kill -0 "$no_engine_pid" 2>/dev/null || { echo "JupyterLab (no engine) exited" >&2; exit 1; }
  sleep 0.5
done
[ "$code" = 503 ] || { echo "expected 503 without an engine, got $code" >&2; exit 1; }

step "ui-tests (Playwright + $chromium)"
cd "$repo/ui-tests"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable
E2E_BASE_URL="$base_url" E2E_TOKEN="$token" E2E_CONTAINER="$container" \
  E2E_OTHER_CONTAINER="$other_container" E2E_DISPLAY_NAME="$display_name" \
  E2E_NO_ENGINE_URL="$no_engine_url" E2E_BANNER="$banner" E2E_IMAGE="$image" E2E_OWNER="$owner" E2E_TOOL="$tool" \
  E2E_CHROMIUM="$chromium" E2E_OUTPUT_DIR="${E2E_OUTPUT_DIR:-/tmp/jtt-e2e-results}" \
  jlpm playwright test "$@"
echo
echo "browser end-to-end test passed"
