#!/usr/bin/env bash
# Makes the README's pictures (docs/launcher.png, docs/terminal.png) on purpose, from the demo's
# own tool types: runs `python -m jupyter_tool_terminal.demo` in a temporary directory, drives
# Debian's chromium with Playwright (ui-tests/screenshots/), and stops the demo (which removes
# its containers). Tests never write into the checkout; this script is the one thing that
# replaces these files.
#
# Assumes what scripts/demo.sh sets up: the project's virtual environment (or JTT_VENV), a Docker
# Engine, the demo image, the built labextension, Node and jlpm, chromium at /usr/bin/chromium.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="${JTT_VENV:-$repo/.venv}/bin:$PATH"
chromium=${E2E_CHROMIUM:-/usr/bin/chromium}
# An owner no test uses (tests label containers for alice and bob).
owner=${SHOTS_OWNER:-student}
work=$(mktemp -d /tmp/jtt-screenshots.XXXXXX)
demo_pid=""

cleanup() {
  local rc=$?
  set +e
  if [ -n "$demo_pid" ] && kill -0 "$demo_pid" 2>/dev/null; then
    # SIGTERM, not SIGINT: a job started with & by a script ignores SIGINT. The demo stops
    # JupyterLab and removes its containers either way.
    kill -TERM "$demo_pid"
    wait "$demo_pid"
  fi
  if [ "$rc" -ne 0 ] && [ -f "$work/demo.log" ]; then
    tail -n 40 "$work/demo.log" >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Serve this checkout's built extension, whatever the environment links to.
mkdir -p "$work/data/labextensions"
ln -s "$repo/jupyter_tool_terminal/labextension" "$work/data/labextensions/jupyter-tool-terminal"
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
token=$(python -c 'import secrets; print(secrets.token_hex(24))')
mkdir -p "$work/home" "$work/settings/@jupyterlab/apputils-extension" \
  "$work/settings/@jupyterlab/terminal-extension"
# The screen reader mode gives Playwright the screen as text (nothing visible changes).
cat > "$work/settings/@jupyterlab/terminal-extension/plugin.jupyterlab-settings" <<'JSON'
{ "screenReaderMode": true }
JSON
# No news/update toast over the pictures.
cat > "$work/settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings" <<'JSON'
{ "fetchNews": "false", "checkForUpdates": false }
JSON
(
  cd "$work/home"
  export JUPYTER_CONFIG_DIR="$work/config" JUPYTER_RUNTIME_DIR="$work/runtime" \
    JUPYTERLAB_SETTINGS_DIR="$work/settings" JUPYTERLAB_WORKSPACES_DIR="$work/workspaces" \
    JUPYTER_PATH="$work/data" JUPYTER_PLATFORM_DIRS=1
  exec python -m jupyter_tool_terminal.demo --owner "$owner" --no-browser --ip=127.0.0.1 \
    --port="$port" --ServerApp.port_retries=0 --IdentityProvider.token="$token" \
    --LabApp.news_url=None
) >"$work/demo.log" 2>&1 &
demo_pid=$!
url="http://127.0.0.1:$port/"
for _ in $(seq 1 120); do
  curl -fsS -o /dev/null -H "Authorization: token $token" "${url}tool-terminal/api/instances" && break
  kill -0 "$demo_pid" 2>/dev/null || { echo "the demo exited" >&2; exit 1; }
  sleep 0.5
done

cd "$repo/ui-tests"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable >/dev/null
SHOTS_URL="$url" SHOTS_TOKEN="$token" SHOTS_DIR="$repo/docs" E2E_CHROMIUM="$chromium" \
  E2E_OUTPUT_DIR="$work/results" jlpm playwright test --config screenshots.config.ts
echo "wrote $repo/docs/launcher.png and $repo/docs/terminal.png"
