#!/usr/bin/env bash
# The main job: set everything up, then start JupyterLab with jupyter-tool-terminal and two
# demo tool instances (containers labelled for you) on the local Docker Engine.
# Extra arguments go to `jupyter lab` (e.g. --ip=0.0.0.0 --port=8888 --no-browser).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
bash "$repo/scripts/engine.sh"
bash "$repo/scripts/setup.sh" test
exec "${JTT_VENV:-$repo/.venv}/bin/python" -m jupyter_tool_terminal.demo "$@"
