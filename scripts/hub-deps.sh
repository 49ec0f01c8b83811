#!/usr/bin/env bash
# Installs what the JupyterHub tests need besides the Python packages of the `test` extra:
# configurable-http-proxy (npm) into a project-local folder, .hub-deps/ (or $JTT_HUB_DEPS).
# Work already done is skipped. The tests find the proxy at $JTT_HUB_DEPS/node_modules/.bin.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
deps=${JTT_HUB_DEPS:-$repo/.hub-deps}
version=${JTT_CHP_VERSION:-5}
proxy="$deps/node_modules/.bin/configurable-http-proxy"
if [ -x "$proxy" ] && "$proxy" --version >/dev/null 2>&1; then
  exit 0
fi
printf '\n== installing configurable-http-proxy@%s into %s\n' "$version" "$deps"
mkdir -p "$deps"
# The proxy wants Node 22 in its metadata and runs on Debian's Node 20: no engine check.
npm install --silent --no-audit --no-fund --engine-strict=false --prefix "$deps" \
  "configurable-http-proxy@$version" >/dev/null
"$proxy" --version >/dev/null
