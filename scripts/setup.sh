#!/usr/bin/env bash
# Prepares this checkout for jupyter-tool-terminal, without touching the machine's own Python:
# a project virtual environment (.venv, or $JTT_VENV) holding the package installed editable
# with its JupyterLab extension built in. Work already done is skipped: the install runs again
# only when pyproject.toml, the extras or the frontend's lockfile changed, the frontend is
# rebuilt only when its sources are newer than the build.
# Usage: scripts/setup.sh [extra,extras]   (default: test)
# Prints nothing on success but what it did; the environment is used as "$JTT_VENV/bin/...".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-test}
venv=${JTT_VENV:-$repo/.venv}
log() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

# Node builds the JupyterLab extension; bash-static and busybox-static make the tool image.
apt_packages=()
command -v node >/dev/null || apt_packages+=(nodejs npm)
python3 -c 'import ensurepip, venv' 2>/dev/null || apt_packages+=(python3-venv)
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null; then
  log "installing Debian packages: ${apt_packages[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if [ ! -x "$venv/bin/python" ]; then
  log "creating the virtual environment $venv"
  python3 -m venv "$venv"
fi
cd "$repo"
stamp="$venv/.jupyter-tool-terminal-installed"
wanted=$(cat pyproject.toml labextension/package.json labextension/yarn.lock <(echo "$extras" "$repo") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  log "installing jupyter-tool-terminal[$extras] into $venv (builds the JupyterLab extension)"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -e ".[$extras]"
  echo "$wanted" > "$stamp"
fi

# An editable install builds the labextension into the source tree; rebuild when its sources
# changed since, and link it where JupyterLab looks for it (as a development install does).
built="$repo/jupyter_tool_terminal/labextension"
if [ -n "$(find labextension/src labextension/style labextension/package.json -newer "$built/package.json" -print -quit 2>/dev/null || echo missing)" ]; then
  log "building the JupyterLab extension"
  (cd labextension && PATH="$venv/bin:$PATH" jlpm install --immutable >/dev/null && PATH="$venv/bin:$PATH" jlpm build >/dev/null)
fi
link="$venv/share/jupyter/labextensions/jupyter-tool-terminal"
if [ "$(readlink "$link" 2>/dev/null)" != "$built" ]; then
  mkdir -p "$(dirname "$link")"
  rm -rf "$link"
  ln -s "$built" "$link"
fi
