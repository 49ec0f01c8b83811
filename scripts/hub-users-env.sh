#!/usr/bin/env bash
# The Python environment that JupyterHub's real Unix users run from in the isolation test
# (tests/hub/test_hub_isolation.py): users' servers and the tool-terminal service run as
# unprivileged users, who cannot execute a Python under /root (the project's .venv may be
# built on one). So they get their own environment in a prefix every user may read, as The
# Littlest JupyterHub keeps its user environment in /opt/tljh/user: the system's python3 with
# jupyterhub (the Hub's own version) and this package's runtime dependencies; the package
# itself comes from the checkout (PYTHONPATH), read-only for them.
# Usage: scripts/hub-users-env.sh [PREFIX]   (default $JTT_HUB_USERS_ENV, else /opt/jupyter-tool-terminal/hub-users-env)
# Work already done is skipped.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-${JTT_HUB_USERS_ENV:-/opt/jupyter-tool-terminal/hub-users-env}}
python=${JTT_HUB_USERS_PYTHON:-/usr/bin/python3}
hub_version=$("${JTT_VENV:-$repo/.venv}/bin/python" -c 'import jupyterhub; print(jupyterhub.__version__)')
# One requirement a line: a requirement may hold spaces (an environment marker).
wanted="jupyterhub==$hub_version
$(cd "$repo" && "${JTT_VENV:-$repo/.venv}/bin/python" - <<'PY'
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
)"
stamp="$prefix/.installed"
if [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]; then
  exit 0
fi
printf '\n== creating the Hub users'"'"' environment %s (about a minute)\n' "$prefix"
rm -rf "$prefix"
mkdir -p "$(dirname "$prefix")"
"$python" -m venv "$prefix"
"$prefix/bin/python" -m pip install -q -r /dev/stdin <<<"$wanted"
chmod -R a+rX "$prefix"
echo "$wanted" > "$stamp"
