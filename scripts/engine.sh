#!/usr/bin/env bash
# Makes sure a Docker Engine answers, and prepares the tool image the tests and the demo use.
# When none answers and this runs as root on Debian, installs `docker.io` and starts `dockerd`
# (log appended to /tmp/dockerd.log). An engine chosen with DOCKER_HOST is used as it is: no
# local dockerd is started for it. Exits 1 (with one line saying why) when no engine answers.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '\n== %s\n' "$*"; }

apt_packages=()
[ -x /bin/busybox ] || command -v busybox >/dev/null || apt_packages+=(busybox-static)
[ -x /bin/bash-static ] || apt_packages+=(bash-static)
if [ -z "${DOCKER_HOST:-}" ] && [ "$(id -u)" = 0 ]; then
  command -v dockerd >/dev/null || apt_packages+=(docker.io)
  # tests/runtime/test_engines.py: more dockerd of its own, one in a network namespace (ip, nsenter)
  # over TLS (openssl).
  command -v ip >/dev/null || apt_packages+=(iproute2)
  command -v nsenter >/dev/null || apt_packages+=(util-linux)
  command -v openssl >/dev/null || apt_packages+=(openssl)
  # ... and one behind an sshd (ssh://).
  [ -x /usr/sbin/sshd ] || apt_packages+=(openssh-server)
  # tests/screen/test_screen_fidelity.py: full-screen programs replayed against xterm.js.
  for program in vim less htop tmux vttest; do
    command -v "$program" >/dev/null || apt_packages+=("$program")
  done
  command -v top >/dev/null || apt_packages+=(procps)
fi
# What the caller needs from Debian besides (scripts/test.sh: its later stages'), in the same
# transaction: apt runs once.
read -r -a more_packages <<<"${JTT_MORE_DEBIAN_PACKAGES:-}"
apt_packages+=("${more_packages[@]}")
if [ "${#apt_packages[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing Debian packages: ${apt_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if [ -n "${DOCKER_HOST:-}" ]; then
    echo "no Docker Engine answers at DOCKER_HOST=$DOCKER_HOST" >&2
    exit 1
  fi
  if command -v dockerd >/dev/null && [ "$(id -u)" = 0 ]; then
    log "starting dockerd (log: /tmp/dockerd.log)"
    nohup dockerd >>/tmp/dockerd.log 2>&1 &
    for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  fi
  if ! docker info >/dev/null 2>&1; then
    socket=/var/run/docker.sock
    if [ -S "$socket" ] && { ! [ -r "$socket" ] || ! [ -w "$socket" ]; }; then
      # The engine may well run: this user may not use its socket (not in its group).
      echo "the Docker socket $socket exists, but $(id -un) may not use it ($(stat -c '%U:%G %A' "$socket")):" \
        "join its group (sudo usermod -aG $(stat -c %G "$socket") $(id -un), then log in again)," \
        "or use rootless Docker or Podman (set DOCKER_HOST)" >&2
    else
      echo "no Docker Engine answers at $socket (start Docker, or set DOCKER_HOST)" >&2
    fi
    exit 1
  fi
fi

docker image inspect jupyter-tool-terminal-test:latest >/dev/null 2>&1 \
  || bash "$repo/scripts/build-test-image.sh" jupyter-tool-terminal-test:latest
