#!/usr/bin/env bash
# Prepares this checkout for jupyter-tool-terminal, without touching the machine's own Python:
# a project virtual environment (.venv, or $JTT_VENV) holding the package installed editable
# with its JupyterLab extension built in. Work already done is skipped: the install runs again
# only when pyproject.toml, the extras or the frontend's lockfile changed, the frontend is
# rebuilt only when its sources are newer than the build.
# Usage: scripts/setup.sh [extra,extras]   (default: test)
# Prints each step it takes, with what a first run takes for it and what it took; the
# environment is used as "$JTT_VENV/bin/...".
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
extras=${1:-test}
venv=${JTT_VENV:-$repo/.venv}
log() { printf '\n== %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

# Node builds the JupyterLab extension; bash-static and busybox-static make the tool image.
apt_packages=()
command -v node >/dev/null || apt_packages+=(nodejs npm)
python3 -c 'import ensurepip, venv' 2>/dev/null || apt_packages+=(python3-venv)
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null; then
  log "installing Debian packages: ${apt_packages[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi

# Each step says what it does, about how long it takes on a first run (measured on a 2-core
# machine with an empty pip and yarn cache; a second run skips what is done), and how long it
# took. Long steps print a line every 20 s, so that a first run is never silent for minutes.
steps=5
step_number=0
ticker=
ticking() {  # ticking STARTED command...: runs it, a line every 20 s, then how long it took
  local started=$1 status=0
  shift
  ( while sleep 20 >/dev/null; do echo "   ... still at it ($((SECONDS - started)) s)"; done ) &
  ticker=$!
  disown "$ticker"  # (not this shell's job: bash would note, when waiting, a child reaped early)
  "$@" || status=$?
  kill "$ticker" 2>/dev/null || true
  ticker=
  if [ "$status" -ne 0 ]; then
    echo "   FAILED after $((SECONDS - started)) s" >&2
    return "$status"
  fi
  echo "   done in $((SECONDS - started)) s"
}
run_step() {  # run_step "what" "estimate" command...
  local what=$1 estimate=$2
  shift 2
  step_number=$((step_number + 1))
  log "[$step_number/$steps] $what (first run: about $estimate)"
  ticking "$SECONDS" "$@"
}
background=
trap '[ -z "$ticker" ] || kill "$ticker" 2>/dev/null; [ -z "$background" ] || kill "$background" 2>/dev/null' EXIT
pip() { "$venv/bin/python" -m pip "$@"; }

if [ ! -x "$venv/bin/python" ]; then
  run_step "creating the virtual environment $venv" "10 s" python3 -m venv "$venv"
else
  step_number=$((step_number + 1))
fi
cd "$repo"
stamp="$venv/.jupyter-tool-terminal-installed"
wanted=$(cat pyproject.toml labextension/package.json labextension/yarn.lock <(echo "$extras" "$repo") | sha256sum | cut -d' ' -f1)
install_wanted=$([ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ] && echo yes || echo no)

# The build requirements (JupyterLab, which brings jlpm) go into the environment itself and
# the package is installed without build isolation: pip would otherwise install JupyterLab a
# second time, into a throw-away build environment, and build the frontend there, silently.
if [ "$install_wanted" = yes ]; then
  mapfile -t build_requirements < <(grep '^requires = ' pyproject.toml | grep -o '"[^"]*"' | tr -d '"')
  # (`editables`: what hatchling adds to them for an editable install.)
  install_build_tools() { pip install -q --upgrade pip && pip install -q "${build_requirements[@]}" editables; }
  run_step "installing JupyterLab and the build tools into $venv" "2.5 min" install_build_tools
else
  step_number=$((step_number + 1))
fi

# The package and its dependencies install in the background while the frontend builds: pip
# mostly waits for the network and unpacks, webpack mostly computes, and the install does not
# need the build (an editable install's labextension is linked below, not copied).
background=
step_number=$((step_number + 1))
background_number=$step_number
link="$venv/share/jupyter/labextensions/jupyter-tool-terminal"
if [ "$install_wanted" = yes ]; then
  # pip would write the package's shared data (and remove the last install's) through the link
  # to the frontend's build below, into the source tree, while it is being built.
  [ ! -L "$link" ] || rm "$link"
  background_log="$venv/.jupyter-tool-terminal-install.log"
  log "[$background_number/$steps] installing jupyter-tool-terminal[$extras] and its dependencies" \
    "(jupyter_server, the Docker SDK...), in the background beside the next steps (first run: about 2 min)"
  background_started=$SECONDS
  SKIP_JUPYTER_BUILDER=1 "$venv/bin/python" -m pip install -q --no-build-isolation -e ".[$extras]" \
    > "$background_log" 2>&1 &
  background=$!
fi

# The frontend is built from the source tree (an editable install's labextension lives there):
# again only when its sources changed since the last build.
built="$repo/jupyter_tool_terminal/labextension"
if [ -n "$(find labextension/src labextension/style labextension/package.json labextension/yarn.lock -newer "$built/package.json" -print -quit 2>/dev/null || echo missing)" ]; then
  quietly() {  # a command's output only when it fails
    local output status=0
    output=$(cd labextension && PATH="$venv/bin:$PATH" "$@" 2>&1) || status=$?
    [ "$status" -eq 0 ] || printf '%s\n' "$output" >&2
    return "$status"
  }
  jlpm_install() { quietly jlpm install --immutable; }
  jlpm_build() { quietly jlpm build; }
  run_step "installing the JupyterLab extension's node packages (jlpm install)" "1.5 min" jlpm_install
  run_step "building the JupyterLab extension (TypeScript, webpack)" "1 min" jlpm_build
else
  step_number=$((step_number + 2))
fi

if [ -n "$background" ]; then
  install_finished() {  # what pip printed, only when it failed
    local status=0
    wait "$background" || status=$?
    background=
    [ "$status" -eq 0 ] || cat "$background_log" >&2
    return "$status"
  }
  if kill -0 "$background" 2>/dev/null; then
    log "[$background_number/$steps] waiting for the install of jupyter-tool-terminal[$extras]"
  fi
  ticking "$background_started" install_finished
  rm -f "$background_log"
  echo "$wanted" > "$stamp"
fi

# Linked where JupyterLab looks for it, as a development install does.
if [ "$(readlink "$link" 2>/dev/null)" != "$built" ]; then
  mkdir -p "$(dirname "$link")"
  rm -rf "$link"
  ln -s "$built" "$link"
fi
