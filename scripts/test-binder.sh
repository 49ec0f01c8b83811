#!/usr/bin/env bash
# Smoke test of the Binder demo, as Binder would build and start it, on a machine without
# Docker: installs exactly the pip section of binder/environment.yml into a fresh virtual
# environment (with a Node.js that satisfies its pin), runs
# binder/postBuild, starts JupyterLab with exactly binder/'s configuration and DOCKER_HOST
# pointing at nothing, then opens a terminal over the contract (REST + WebSocket, a small
# Python client) and in Debian's chromium (ui-tests/binder). Everything it started is stopped.
# The environment is a fresh one of its own, or $JTT_BINDER_VENV: scripts/test.sh makes that one
# fresh for each run and prepares it beside the main pytest run (`scripts/test-binder.sh install`
# installs the pip section there and stops; the run itself then skips that install).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/lab.sh
source "$repo/scripts/lib/lab.sh"
chromium=${E2E_CHROMIUM:-/usr/bin/chromium}
work=$(mktemp -d /tmp/jtt-binder.XXXXXX)
server_pid=""
cleanup() {
  local rc=$?
  set +e
  # JupyterLab stops on SIGTERM and ends its terminals first; the script waits for that.
  lab_stop "$server_pid"
  [ "$rc" -eq 0 ] || { echo "---- JupyterLab's log ends with ----" >&2; tail -n 40 "$work/jupyter.log" >&2; }
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { printf '\n== %s\n' "$*"; }

step "binder/environment.yml (its pip section) into a fresh virtual environment"
# The conda part is Node.js and Python: this machine's Node must satisfy the same pin.
node_pin=$(sed -n 's/^ *- nodejs>=\([0-9]*\).*/\1/p' "$repo/binder/environment.yml")
node_major=$(node --version | sed 's/^v\([0-9]*\).*/\1/')
if [ -z "$node_pin" ] || [ "$node_major" -lt "$node_pin" ]; then
  echo "binder/environment.yml pins nodejs>=${node_pin:-?}; this machine has $(node --version)" >&2
  exit 1
fi
venv=${JTT_BINDER_VENV:-$work/venv}
sed -n '/^ *- pip:$/,$p' "$repo/binder/environment.yml" | sed -n 's/^ *- \(.*[<>=].*\)$/\1/p' >"$work/requirements.txt"
[ -s "$work/requirements.txt" ] || { echo "no pip section in binder/environment.yml" >&2; exit 1; }
stamp="$venv/.binder-requirements"
if ! cmp -s "$work/requirements.txt" "$stamp"; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --prefer-binary -r "$work/requirements.txt"
  cp "$work/requirements.txt" "$stamp"
fi
[ "${1:-}" != install ] || exit 0
export PATH="$venv/bin:$PATH"

step "binder/postBuild"
lab_directories "$work"
# (its configuration goes where lab_start's JupyterLab reads it)
(cd "$repo" && JUPYTER_CONFIG_DIR="$work/config" bash binder/postBuild)

step "JupyterLab with binder/'s configuration, no Docker"
port=$(lab_free_port)
token=$(lab_token)
# The test reads the screen through xterm's accessibility tree (a user setting, not Binder's).
mkdir -p "$work/settings/@jupyterlab/terminal-extension"
echo '{ "screenReaderMode": true }' > "$work/settings/@jupyterlab/terminal-extension/plugin.jupyterlab-settings"
# (binder/'s own configuration, from postBuild, and flags: not lab_config's file)
HOME="$work/root" DOCKER_HOST=tcp://127.0.0.1:9 lab_start "$work" "$work/jupyter.log" \
  jupyter lab --no-browser --ip=127.0.0.1 --port="$port" --port-retries=0 --allow-root \
  --IdentityProvider.token="$token" --LabApp.news_url=None \
  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate
server_pid=$lab_pid
base_url="http://127.0.0.1:$port/"
lab_wait "$base_url" "$token" "$server_pid"

step "a terminal over the contract (REST + WebSocket)"
python - "$base_url" "$token" <<'PY'
import asyncio, json, sys
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

base, token = sys.argv[1], sys.argv[2]
auth = {"Authorization": f"token {token}"}

async def main() -> None:
    http = AsyncHTTPClient()
    instances = json.loads((await http.fetch(HTTPRequest(base + "tool-terminal/api/instances", headers=auth))).body)
    assert sorted((i["id"], i["runtime"]) for i in instances) == [
        ("notes", "local"), ("python", "local"), ("welcome", "local")], instances
    assert all(i["icon"] and i["icon"].startswith("<svg") for i in instances), instances
    request = HTTPRequest(base + "tool-terminal/api/sessions", method="POST", headers=auth,
                          body=json.dumps({"instance": "welcome"}))
    session = json.loads((await http.fetch(request)).body)
    ws = await websocket_connect(HTTPRequest(
        base.replace("http", "ws", 1) + "tool-terminal/websocket/" + session["id"], headers=auth))
    assert json.loads(await ws.read_message()) == ["setup", {}]
    ws.write_message(json.dumps(["stdin", 'echo "tool=$TOOL_TERMINAL_DEMO"\r']))
    output = ""
    while "tool=welcome\r\n" not in output or "Welcome to jupyter-tool-terminal" not in output:
        frame = json.loads(await asyncio.wait_for(ws.read_message(), 20))
        output += frame[1] if frame[0] == "stdout" else ""
    ws.close()
    await http.fetch(HTTPRequest(base + "tool-terminal/api/sessions/" + session["id"], method="DELETE", headers=auth))
    print("contract: banner, tool variable and session delete OK")

asyncio.run(main())
PY

step "a terminal in the browser (Playwright + $chromium)"
cd "$repo/ui-tests"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable >/dev/null
E2E_BASE_URL="$base_url" E2E_TOKEN="$token" E2E_CONTAINER=welcome \
  E2E_DISPLAY_NAME="Welcome tour" E2E_BANNER="Welcome to jupyter-tool-terminal" \
  E2E_CHROMIUM="$chromium" jlpm playwright test -c playwright.binder.config.ts
echo
echo "Binder demo smoke test passed"
