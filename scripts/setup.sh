#!/usr/bin/env bash
# Prepares this machine for jupyter-tool-terminal: the Docker Engine (installed from Debian's
# packages and started when none answers and we are root), the Python package with its
# JupyterLab extension built in, and the busybox tool image the tests and the demo use.
# Idempotent: what is already there is kept. Usage: scripts/setup.sh [extra,extras]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-test}
log() { printf '\n== %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

apt_packages=()
command -v dockerd >/dev/null || apt_packages+=(docker.io)
[ -x /bin/busybox ] || command -v busybox >/dev/null || apt_packages+=(busybox-static)
[ -x /bin/bash-static ] || apt_packages+=(bash-static)
command -v node >/dev/null || apt_packages+=(nodejs npm)
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null; then
  log "installing Debian packages: ${apt_packages[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if command -v dockerd >/dev/null && [ "$(id -u)" = 0 ]; then
    log "starting dockerd (log: /tmp/dockerd.log)"
    nohup dockerd >/tmp/dockerd.log 2>&1 &
    for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  fi
  docker info >/dev/null 2>&1 || { echo "no Docker Engine answers (see /tmp/dockerd.log)" >&2; exit 1; }
fi

log "installing jupyter-tool-terminal[$extras] (builds the JupyterLab extension)"
cd "$repo"
# A development link left by an earlier checkout would redirect the install into that checkout.
installed_ext="$(python3 -c 'import sys; print(sys.prefix)')/share/jupyter/labextensions/jupyter-tool-terminal"
[ -L "$installed_ext" ] && rm -f "$installed_ext"
python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e ".[$extras]"
# An editable install leaves the built labextension in the source tree: link it where
# JupyterLab looks, as the extension template's development set-up does.
jupyter labextension develop --overwrite . >/dev/null

log "building the tool image"
docker image inspect jupyter-tool-terminal-test:latest >/dev/null 2>&1 \
  || bash "$repo/scripts/build-test-image.sh" jupyter-tool-terminal-test:latest
