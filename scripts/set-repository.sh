#!/usr/bin/env bash
# Names the public GitHub repository this project is published as, everywhere it is named:
# labextension/package.json (homepage, issues, repository; the Python package's project URLs
# and the launcher's "How to set it up" links come from there) and the README's Binder badge.
# Usage: scripts/set-repository.sh OWNER/NAME   (e.g. scripts/set-repository.sh alice/jupyter-tool-terminal)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
target=${1:-}
if ! [[ "$target" =~ ^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$ ]]; then
  echo "usage: $0 OWNER/NAME (the GitHub repository, e.g. alice/jupyter-tool-terminal)" >&2
  exit 2
fi
current=$(sed -n 's|^ *"homepage": "https://github.com/\([^"]*\)",$|\1|p' "$repo/labextension/package.json")
[ -n "$current" ] || { echo "labextension/package.json has no GitHub homepage to replace" >&2; exit 1; }
sed -i "s|https://github.com/$current|https://github.com/$target|g" "$repo/labextension/package.json"
sed -i "s|https://mybinder.org/v2/gh/[^/]*/[^/]*/HEAD|https://mybinder.org/v2/gh/$target/HEAD|" "$repo/README.md"
echo "The repository is now $target (was $current): labextension/package.json and the README's badge."
