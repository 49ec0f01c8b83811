#!/usr/bin/env bash
# Starts Podman's Docker-compatible API service for the Podman contract tests (tests/runtime/test_podman.py)
# and imports the test image into it. As root on Debian, installs `podman` and `catatonit` (the
# init of `--init` containers) when missing. Prints the DOCKER_HOST to use; the tests read it from
# JTT_PODMAN_HOST. Log: /tmp/podman-service.log. The service it starts writes its pid beside the
# socket (SOCKET.pid); `stop` ends that service (scripts/test.sh does, when it started it).
# Usage: scripts/podman.sh [stop] [SOCKET] (default /run/podman-test.sock).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
stop=no
if [ "${1:-}" = stop ]; then
  stop=yes
  shift
fi
socket=${1:-/run/podman-test.sock}
host=unix://$socket
pidfile=$socket.pid

if [ "$stop" = yes ]; then
  pid=$(cat "$pidfile" 2>/dev/null || true)
  # (only while that pid is still Podman's: a service that ended by itself left its pid free)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = podman ] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$pidfile"
  exit 0
fi

if ! command -v podman >/dev/null || ! [ -x /usr/libexec/podman/catatonit ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian packages: podman catatonit" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman catatonit >/dev/null
  else
    echo "podman is not installed (Debian: apt-get install podman catatonit)" >&2
    exit 1
  fi
fi

if ! podman --url "$host" version >/dev/null 2>&1; then
  # Without systemd (a container in a VM), Podman keeps cgroups itself (cgroupfs) and its
  # events in a file; its default storage (overlay, in /var/lib/containers) works. Its default limits for rootful containers (1048576 open files, as many
  # processes as there are pids) exceed what a process may set here, and every container
  # would fail to start ("error setting rlimits"): the defaults are what this shell may have.
  config=$(mktemp -d)/containers.conf
  processes=$(ulimit -Hu)
  pid_max=$(cat /proc/sys/kernel/pid_max)
  if [ "$processes" = unlimited ] || [ "$processes" -gt "$pid_max" ]; then processes=$pid_max; fi
  cat > "$config" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$processes:$processes"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  # (From /: it outlives this checkout, and containers failed to start, "write child: broken
  # pipe", once the directory it was started in was removed.)
  (cd / && CONTAINERS_CONF=$config exec nohup podman system service --time=0 "$host" >>/tmp/podman-service.log 2>&1) &
  echo $! >"$pidfile"  # (the subshell execs nohup, which execs podman: the service's own pid)
  for _ in $(seq 1 100); do podman --url "$host" version >/dev/null 2>&1 && break; sleep 0.2; done
  if ! podman --url "$host" version >/dev/null 2>&1; then
    echo "Podman's service did not answer at $host (log: /tmp/podman-service.log)" >&2
    exit 1
  fi
fi

podman --url "$host" image exists jupyter-tool-terminal-test:latest \
  || CONTAINER_CLI="podman --url $host" bash "$repo/scripts/build-test-image.sh" jupyter-tool-terminal-test:latest >&2
echo "$host"
