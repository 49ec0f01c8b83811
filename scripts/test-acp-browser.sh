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
# shellcheck source-path=SCRIPTDIR source=lib/lab.sh
source "$repo/scripts/lib/lab.sh"
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
  lab_stop "$server_pid"
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
lab_directories "$work"
lab_labextension "$repo" "$work"
mkdir -p "$work/settings/jupyter-tool-terminal"

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

port=$(lab_free_port)
token=$(lab_token)
persona="jupyter-ai-personas::jtt_acp_persona::ScriptedAcpPersona"
lab_config "$work/config/jupyter_server_config.py" "$port" "$token" "$work"
cat >>"$work/config/jupyter_server_config.py" <<PY
c.MCPExtensionApp.mcp_port = $(lab_free_port)
c.PersonaManager.default_persona_id = "$persona"
c.ToolTerminalApp.owner = "$owner"
# Agents of this run only (the default is the user's Jupyter data directory).
c.AgentStore.path = "$work/agents.json"
c.ToolTerminalApp.tool_types = {"$tool": {"display_name": "ACP Tool", "shell": ["/bin/sh"]}}
PY
JUPYTER_AI_ACP_CLIENT_E2E_TESTING_ONLY=1 lab_start "$work" "$work/jupyter.log" \
  jupyter lab --config="$work/config/jupyter_server_config.py"
server_pid=$lab_pid
base_url="http://127.0.0.1:$port/"
lab_wait "$base_url" "$token" "$server_pid"
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
