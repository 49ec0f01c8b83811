#!/usr/bin/env bash
# Builds the wheel and installs it into a fresh virtual environment, as a user's
# `pip install jupyter-tool-terminal` would, then checks that both the server extension and the
# prebuilt JupyterLab extension are enabled and OK there, with no manual step.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/jtt-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$repo"
# Built from a copy of the checkout: the build writes into its source tree (the version file),
# and scripts/test.sh runs this beside tests that import the package from this one.
mkdir "$work/src"
tar -c --exclude=./.git --exclude=node_modules --exclude='./.venv*' --exclude=./.hub-deps \
  --exclude=./docs/_build --exclude=./benchmarks/results --exclude='*_cache' . | tar -x -C "$work/src"
python3 -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/jupyter_tool_terminal-*.whl)
python3 - "$wheel" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for wanted in ("share/jupyter/labextensions/jupyter-tool-terminal/package.json",
               "share/jupyter/labextensions/jupyter-tool-terminal/install.json",
               "etc/jupyter/jupyter_server_config.d/jupyter_tool_terminal.json",
               "jupyter_tool_terminal/py.typed",
               "jupyter_tool_terminal/event_schemas/session/v1.yaml"):
    if not any(name.endswith(wanted) for name in names):
        sys.exit(f"the wheel lacks {wanted}")
print("wheel contents OK")
PY
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel" "jupyterlab>=4.2,<5"
"$work/venv/bin/jupyter" server extension list 2>&1 | tee "$work/server.txt"
"$work/venv/bin/jupyter" labextension list 2>&1 | tee "$work/lab.txt"
grep -iq "jupyter_tool_terminal.*enabled" "$work/server.txt"
grep -iq "jupyter_tool_terminal.*OK" "$work/server.txt"
grep -iq "jupyter-tool-terminal.*enabled.*OK" "$work/lab.txt"
echo "wheel install: both extensions enabled and OK"
