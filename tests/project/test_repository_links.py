"""The repository is named in one place (labextension/package.json); the README's Binder badge
must name the same one (scripts/set-repository.sh changes both)."""

from __future__ import annotations

import json
import re

from ..conftest import REPO


def test_the_binder_badge_names_the_repository_of_package_json() -> None:
    homepage = json.loads((REPO / "labextension" / "package.json").read_text())["homepage"]
    repository = homepage.removeprefix("https://github.com/")
    assert re.fullmatch(r"[A-Za-z0-9-]+/[A-Za-z0-9._-]+", repository), homepage
    badge = re.search(
        r"https://mybinder\.org/v2/gh/([^/]+/[^/]+)/HEAD", (REPO / "README.md").read_text()
    )
    assert badge is not None
    assert badge.group(1) == repository
