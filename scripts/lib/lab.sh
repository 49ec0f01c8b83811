# shellcheck shell=bash
# A JupyterLab server of a browser test's own, for the scripts that drive one (test-browser.sh,
# test-acp-browser.sh, test-binder.sh): a free port, a token, its Jupyter
# directories below the script's temporary one, its start in the background, the wait until
# the extension's API answers, and its stop at exit. Sourced (bash); defines functions only.
#
# The directories below WORK: root (the server's root and working directory), config, runtime,
# data (JUPYTER_PATH: the built labextension is linked there), settings, workspaces.

#: The pid of the server lab_start started last.
lab_pid=""

# lab_free_port: a TCP port on 127.0.0.1 that nothing listens on now.
lab_free_port() {
  python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# lab_token: a fresh token for the server.
lab_token() {
  python -c 'import secrets; print(secrets.token_hex(24))'
}

# lab_directories WORK: makes the directories, with user settings that keep JupyterLab's news
# and update toasts off the page (the network is closed anyway).
lab_directories() {
  local work=$1
  mkdir -p "$work/root" "$work/config" "$work/runtime" "$work/workspaces" "$work/data" \
    "$work/settings/@jupyterlab/apputils-extension"
  cat >"$work/settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings" <<'JSON'
{ "fetchNews": "false", "checkForUpdates": false }
JSON
}

# lab_labextension REPO WORK: serves this checkout's built labextension (built when missing, or
# again when E2E_REBUILD is set) from WORK/data, without touching the Python environment: the
# private JUPYTER_PATH comes first.
lab_labextension() {
  local repo=$1 work=$2 built=$1/jupyter_tool_terminal/labextension
  if [ ! -f "$built/static/style.js" ] || [ -n "${E2E_REBUILD:-}" ]; then
    (cd "$repo/labextension" && jlpm install --immutable && jlpm build)
  fi
  mkdir -p "$work/data/labextensions"
  ln -s "$built" "$work/data/labextensions/jupyter-tool-terminal"
}

# lab_config FILE PORT TOKEN WORK: the server configuration every browser test shares (the
# address, the token, no browser, no news, the directories); the caller appends its own.
lab_config() {
  local file=$1 port=$2 token=$3 work=$4
  cat >"$file" <<PY
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
PY
}

# lab_start WORK LOG COMMAND...: runs COMMAND (`jupyter lab ...`) in the background from
# WORK/root with Jupyter's directories in WORK, output to LOG; its pid in `lab_pid`. Variables
# assigned in front of the call (DOCKER_HOST=... lab_start ...) reach the server too.
lab_start() {
  local work=$1 log=$2
  shift 2
  (
    cd "$work/root" || exit 1
    export JUPYTER_CONFIG_DIR="$work/config" JUPYTER_RUNTIME_DIR="$work/runtime" \
      JUPYTER_PATH="$work/data" JUPYTERLAB_SETTINGS_DIR="$work/settings" \
      JUPYTERLAB_WORKSPACES_DIR="$work/workspaces" JUPYTER_PLATFORM_DIRS=1
    exec "$@"
  ) >"$log" 2>&1 &
  # shellcheck disable=SC2034  # (read by the script that sourced this)
  lab_pid=$!
}

# lab_wait URL TOKEN PID [NAME]: waits (up to a minute) until the extension's API answers at
# URL (the server's base URL, ending in /); fails when the server PID exits first or it never
# answers.
lab_wait() {
  local url=$1 token=$2 pid=$3 name=${4:-JupyterLab}
  for _ in $(seq 1 120); do
    curl -fsS -o /dev/null -H "Authorization: token $token" "${url}tool-terminal/api/instances" 2>/dev/null &&
      return 0
    kill -0 "$pid" 2>/dev/null || { echo "$name exited" >&2; return 1; }
    sleep 0.5
  done
  echo "$name did not answer at $url" >&2
  return 1
}

# lab_stop PID: stops the server (SIGTERM: it ends its terminals first; SIGKILL after 30 s) and
# reaps it. Nothing when PID is empty or gone.
lab_stop() {
  local pid=$1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}
