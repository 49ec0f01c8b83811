#!/usr/bin/env bash
# Frontend quality gates of the JupyterLab extension (labextension/):
# install node dependencies from the committed lockfile with jlpm, then
# typecheck (tsc --noEmit), lint (stylelint, prettier, eslint) and run the jest
# unit tests. Exits non-zero on the first failure.
# Needs: Node >= 20 and jlpm (installed with the jupyterlab / jupyter-builder
# Python packages).
set -euo pipefail
cd "$(dirname "$0")/../labextension"

step() { printf '\n== %s\n' "$*"; }

step "jlpm install (immutable lockfile)"
jlpm install --immutable

step "typecheck: tsc --noEmit"
jlpm run typecheck

step "lint: stylelint, prettier, eslint"
jlpm run lint:check

step "unit tests: jest"
jlpm run test --ci

echo
echo "frontend checks passed"
