#!/usr/bin/env bash
# Builds the documentation site (docs/source, MyST Markdown) into docs/_build/html, warnings as
# errors: a broken cross-reference, a missing page or a reference page that cannot be generated
# from the code fails the build.
# The tools and the package's runtime dependencies go into a virtual environment of their own
# (.venv-docs, or $JTT_DOCS_VENV; CI passes the project's .venv, which has the runtime ones
# already); the package itself is imported from this checkout, so the frontend is not built.
# Usage: scripts/docs.sh [extra sphinx-build arguments]   (e.g. -b linkcheck)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${JTT_DOCS_VENV:-$repo/.venv-docs}
cd "$repo"

[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
stamp="$venv/.jupyter-tool-terminal-docs-installed"
wanted=$(cat docs/requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
  echo "== installing the docs' requirements into $venv"
  "$venv/bin/python" -m pip install -q -r docs/requirements.txt \
    -r <("$venv/bin/python" docs/runtime_requirements.py)
  echo "$wanted" >"$stamp"
fi

echo "== building the site into docs/_build/html"
rm -rf docs/_build/html
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" -m sphinx \
  -W --keep-going -n -q -b html "$@" docs/source docs/_build/html
echo "built: docs/_build/html/index.html"
