#!/usr/bin/env bash
# A second Docker Engine on this machine, for a test tier that runs beside the main one: the
# tests use fixed owners (alice, bob), so two tiers may run at once only on two engines. A
# dockerd of its own (socket, exec root and pid file in $JTT_SECOND_ENGINE_DIR, default
# /run/jtt-second-engine; its data in /var/lib/ under the same name), without networking (the
# test containers run with `--network none`), holding the test images of the machine's engine
# (scripts/engine.sh prepared them). Needs root and `dockerd`. Prints the DOCKER_HOST to use.
# Usage: scripts/second-engine.sh [stop]
set -euo pipefail
dir=${JTT_SECOND_ENGINE_DIR:-/run/jtt-second-engine}
host=unix://$dir/docker.sock

if [ "${1:-}" = stop ]; then
  pid=$(cat "$dir/docker.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null; then
  echo "a second engine needs root and dockerd" >&2
  exit 1
fi
if ! docker -H "$host" info >/dev/null 2>&1; then
  mkdir -p "$dir"
  # (From /: it outlives this checkout.) Its data lives beside the machine engine's, not in
  # /run (a tmpfs): images are large.
  (cd / && exec nohup dockerd --host="$host" --data-root="/var/lib/$(basename "$dir")" \
    --exec-root="$dir/exec" --pidfile="$dir/docker.pid" --bridge=none --iptables=false \
    --ip6tables=false --ip-forward=false --ip-masq=false >>"$dir/dockerd.log" 2>&1) &
  for _ in $(seq 1 120); do docker -H "$host" info >/dev/null 2>&1 && break; sleep 0.5; done
  if ! docker -H "$host" info >/dev/null 2>&1; then
    echo "the second engine did not answer at $host (log: $dir/dockerd.log)" >&2
    exit 1
  fi
fi
for image in $(docker images --format '{{.Repository}}:{{.Tag}}' 'jupyter-tool-terminal-test*'); do
  docker -H "$host" image inspect "$image" >/dev/null 2>&1 ||
    docker save "$image" | docker -H "$host" load -q >&2
done
echo "$host"
