#!/usr/bin/env bash
# The Jupyter AI tier: this package installed beside Jupyter AI 3 in one environment, as a
# Jupyter AI user would (`pip install jupyter-ai==3.2.0 jupyter-tool-terminal` must resolve, which
# holds the MCP SDK at 1.x: Jupyter AI's fastmcp asks mcp<2), then the MCP endpoint's tests and
# the ACP tests (Jupyter AI's agents in tool terminals) against the real Docker Engine there, and
# Jupyter AI's chat once in the real browser (scripts/test-acp-browser.sh, Debian's chromium).
# The environment is $JTT_ACP_VENV (default .venv-acp); it is installed again only when
# pyproject.toml or the test persona's (tests/support/acp-persona: a scripted agent on the official ACP
# SDK, registered through the jupyter_ai.personas entry point) changed. Needs the Docker Engine and the test
# images (scripts/test.sh prepares both) and the TypeScript MCP client (tests/support/mcp-ts).
# Usage: scripts/test-acp.sh [install]   (`install`: prepare the environment only, no tests;
# scripts/test.sh does that beside the main pytest run)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=${JTT_ACP_VENV:-$repo/.venv-acp}
jupyter_ai=jupyter-ai==3.2.0
pip() { "$venv/bin/python" -m pip "$@"; }

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
stamp="$venv/.jupyter-tool-terminal-acp-installed"
wanted=$(cat pyproject.toml tests/support/acp-persona/pyproject.toml <(echo "$jupyter_ai" "$repo") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  started=$SECONDS
  # The package's build tools go into the environment (no build isolation: pip would install
  # JupyterLab a second time to build in); the frontend is the checkout's own build
  # (scripts/setup.sh made it), not built again here.
  mapfile -t build_requirements < <(grep '^requires = ' pyproject.toml | grep -o '"[^"]*"' | tr -d '"')
  pip install -q --upgrade pip
  pip install -q "${build_requirements[@]}" editables
  # One resolution for all three, as a user's `pip install` would do it.
  SKIP_JUPYTER_BUILDER=1 pip install -q --no-build-isolation \
    "$jupyter_ai" -e ".[test]" -e tests/support/acp-persona
  echo "$wanted" >"$stamp"
  echo "installed $jupyter_ai and this package into $venv in $((SECONDS - started)) s"
fi
[ "${1:-}" != install ] || exit 0
"$venv/bin/python" - <<'EOF'
import importlib.metadata as metadata

versions = {name: metadata.version(name) for name in ("jupyter-ai", "jupyter-ai-acp-client", "mcp")}
print("resolved:", ", ".join(f"{name} {version}" for name, version in versions.items()))
# The tier exists for the SDK's 1.x: if Jupyter AI's environment ever allows 2.x, say so.
assert versions["mcp"].startswith("1."), "Jupyter AI's environment no longer holds mcp 1.x"
EOF
"$venv/bin/python" -m pytest -q --tb=native -p no:cacheprovider \
  tests/agents/test_mcp.py tests/agents/test_mcp_ts.py tests/agents/test_acp.py
PATH="$venv/bin:$PATH" bash scripts/test-acp-browser.sh
