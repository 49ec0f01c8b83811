#!/usr/bin/env bash
# The main job: set everything up, then start JupyterLab with jupyter-tool-terminal and two
# demo tool instances: containers labelled for you on the local Docker Engine, or, where no
# engine answers (no Docker, not root), two local instances: working directories whose shells
# run as you on this machine.
# Extra arguments go to `jupyter lab` (e.g. --ip=0.0.0.0 --port=8888 --no-browser).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
if ! bash "$repo/scripts/engine.sh"; then
  echo "(so the demo runs local tool instances instead)" >&2
fi
bash "$repo/scripts/setup.sh" test
exec "${JTT_VENV:-$repo/.venv}/bin/python" -m jupyter_tool_terminal.demo "$@"
