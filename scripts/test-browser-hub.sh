#!/usr/bin/env bash
# Real-browser test through JupyterHub in service mode (ui-tests/hub): a Hub with
# configurable-http-proxy, the tool-terminal service and users' servers without an engine;
# alice opens a tool terminal from her own JupyterLab, bob sees none of her tiles; alice
# shares a terminal read-only with bob, who watches it in his own JupyterLab at the same time.
# Arguments go to Playwright (e.g. `observe.spec.ts` runs that spec only).
# Assumes what scripts/test-browser.sh assumes, plus scripts/hub-deps.sh.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bash scripts/hub-deps.sh
if [ ! -f jupyter_tool_terminal/labextension/static/style.js ]; then
  (cd labextension && jlpm install --immutable >/dev/null && jlpm build >/dev/null)
fi
(cd ui-tests && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 jlpm install --immutable >/dev/null)
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python -m tests.support.hub_browser "$@"
echo
echo "browser test through JupyterHub passed"
