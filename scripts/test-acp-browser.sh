#!/usr/bin/env bash
# Jupyter AI's chat in the real browser: JupyterLab with jupyter-ai 3.2.0 (its prebuilt
# labextensions come with its wheels) and this extension, the scripted ACP persona of
# tests/support/acp-persona; Debian's chromium types a message in a chat, the owner allows the agent in
# JupyterLab's notification, and the reply holds the tool container's hostname (ui-tests/acp).
# Two instances run: the one JupyterLab's setting *Tool Terminals: Jupyter AI > Instance* names
# (a user-settings file here) is where the command runs.
#
# Run by scripts/test-acp.sh with its environment's python first on PATH (JupyterLab and Jupyter
# AI from there). Assumes dockerd, chromium, jlpm and the frontend build, as
# scripts/test-browser.sh does. Everything it starts is removed on exit.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${E2E_IMAGE:-jupyter-tool-terminal-test:latest}
chromium=${E2E_CHROMIUM:-/usr/bin/chromium}
owner=acp-alice
tool=acptool
suffix="$$-$RANDOM"
chosen="jtt-acp-chosen-$suffix"
other="jtt-acp-other-$suffix"
hostname="acp-browser-$RANDOM"
work=$(mktemp -d /tmp/jtt-acp-e2e.XXXXXX)
server_pid=""

cleanup() {
  local rc=$?
  set +e
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$server_pid" 2>/dev/null
  fi
  docker rm -f "$chosen" "$other" >/dev/null 2>&1
  if [ "$rc" -ne 0 ] && [ -f "$work/jupyter.log" ]; then
    echo "---- last lines of the JupyterLab log ----" >&2
    tail -n 80 "$work/jupyter.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ ! -x "$chromium" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  # (CI's browser stage installs it too, after this tier.)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
[ -x "$chromium" ] || { echo "chromium not found at $chromium" >&2; exit 1; }
built="$repo/jupyter_tool_terminal/labextension"
if [ ! -f "$built/static/style.js" ]; then
  (cd "$repo/labextension" && jlpm install --immutable && jlpm build)
fi
mkdir -p "$work/data/labextensions" "$work/root" "$work/config" "$work/runtime" \
  "$work/workspaces" "$work/settings/jupyter-tool-terminal" \
  "$work/settings/@jupyterlab/apputils-extension"
ln -s "$built" "$work/data/labextensions/jupyter-tool-terminal"

docker run -d --network none --hostname "$hostname" \
  --label jupyter-tool-terminal.owner="$owner" --label jupyter-tool-terminal.tool="$tool" \
  --name "$chosen" "$image" >/dev/null
docker run -d --network none --hostname "other-$hostname" \
  --label jupyter-tool-terminal.owner="$owner" --label jupyter-tool-terminal.tool="$tool" \
  --name "$other" "$image" >/dev/null

# The user's choice, as JupyterLab's settings editor saves it.
cat >"$work/settings/jupyter-tool-terminal/jupyter-ai.jupyterlab-settings" <<JSON
{ "instance": "$chosen" }
JSON
cat >"$work/settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings" <<'JSON'
{ "fetchNews": "false", "checkForUpdates": false }
JSON

free_port() { python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
port=$(free_port)
token=$(python -c 'import secrets; print(secrets.token_hex(24))')
persona="jupyter-ai-personas::jtt_acp_persona::ScriptedAcpPersona"
cat >"$work/config/jupyter_server_config.py" <<PY
c = get_config()  # noqa: F821
c.ServerApp.ip = "127.0.0.1"
c.ServerApp.port = $port
c.ServerApp.port_retries = 0
c.ServerApp.open_browser = False
c.ServerApp.allow_root = True
c.ServerApp.root_dir = "$work/root"
c.IdentityProvider.token = "$token"
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
c.LabServerApp.workspaces_dir = "$work/workspaces"
c.LabServerApp.user_settings_dir = "$work/settings"
c.MCPExtensionApp.mcp_port = $(free_port)
c.PersonaManager.default_persona_id = "$persona"
c.ToolTerminalApp.owner = "$owner"
# Agents of this run only (the default is the user's Jupyter data directory).
c.AgentStore.path = "$work/agents.json"
c.ToolTerminalApp.tool_types = {"$tool": {"display_name": "ACP Tool", "shell": ["/bin/sh"]}}
PY
(
  cd "$work/root"
  export JUPYTER_CONFIG_DIR="$work/config" JUPYTER_RUNTIME_DIR="$work/runtime" \
    JUPYTER_PATH="$work/data" JUPYTERLAB_SETTINGS_DIR="$work/settings" \
    JUPYTERLAB_WORKSPACES_DIR="$work/workspaces" JUPYTER_PLATFORM_DIRS=1 \
    JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY=1
  exec jupyter lab --config="$work/config/jupyter_server_config.py"
) >"$work/jupyter.log" 2>&1 &
server_pid=$!
base_url="http://127.0.0.1:$port/"
for _ in $(seq 1 120); do
  curl -fsS -o /dev/null -H "Authorization: token $token" "${base_url}tool-terminal/api/instances" 2>/dev/null && break
  kill -0 "$server_pid" 2>/dev/null || { echo "JupyterLab exited" >&2; exit 1; }
  sleep 0.5
done
extensions=$(curl -fsS -H "Authorization: token $token" "${base_url}lab/api/extensions")
grep -q '"name": *"jupyter-ai-acp-client"' <<<"$extensions" || {
  echo "JupyterLab does not serve Jupyter AI's labextensions" >&2
  exit 1
}

cd "$repo/ui-tests"
[ -d node_modules ] || PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable
E2E_BASE_URL="$base_url" E2E_TOKEN="$token" E2E_HOSTNAME="$hostname" E2E_CHOSEN="$chosen" \
  E2E_CHROMIUM="$chromium" E2E_OUTPUT_DIR="${E2E_OUTPUT_DIR:-/tmp/jtt-acp-e2e-results}" \
  jlpm playwright test --config playwright.acp.config.ts "$@"
