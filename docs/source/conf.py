"""Sphinx configuration of the jupyter-tool-terminal documentation (MyST Markdown).

Built by ``bash scripts/docs.sh`` (warnings are errors) and by Read the Docs
(``.readthedocs.yaml``). The reference pages are generated from the code by
``_ext/jtt_reference.py``.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import sys
import warnings

DOCS = pathlib.Path(__file__).resolve().parent
REPO = DOCS.parents[1]
# The package is imported from the checkout (autodoc reads its traits), built or not.
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(DOCS / "_ext"))

_package = json.loads((REPO / "labextension" / "package.json").read_text())
_repository = _package["homepage"].removeprefix("https://github.com/")

# -- Project information ------------------------------------------------------------------
project = "jupyter-tool-terminal"
author = "jupyter-tool-terminal contributors"
copyright = f"{datetime.date.today().year}, {author}"
release = version = _package["version"]

# -- General configuration ----------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "autodoc_traits",
    "sphinx_copybutton",
    "jtt_reference",
]
root_doc = "index"
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]
# `foo` in a trait's help text is code, as in JupyterHub's docs.
default_role = "literal"
# Broken cross-references fail the build (with -W); what lives outside these docs is listed.
nitpicky = True
nitpick_ignore_regex = [
    # Types of other projects named in signatures and trait types (no intersphinx offline).
    (r"py:.*", r"(traitlets|jupyter_server|tornado|docker|t|typing|collections|abc)\..*"),
    # Named in ToolTerminalManager's docstring; a helper of app.py, not public API.
    ("py:func", "manager_setting"),
]

# -- MyST ---------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline"]
myst_heading_anchors = 3

# -- autodoc ------------------------------------------------------------------------------
# jupyter_server's ExtensionApp has config traits without help; autodoc_traits documents them
# anyway and says so with a FutureWarning each.
warnings.filterwarnings("ignore", category=FutureWarning, module="autodoc_traits")
autodoc_typehints = "none"

# -- HTML ---------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = project
html_static_path: list[str] = []
html_theme_options = {
    "icon_links": [
        {
            "name": "GitHub",
            "url": f"https://github.com/{_repository}",
            "icon": "fa-brands fa-github",
        },
    ],
    "use_edit_page_button": True,
    "navbar_align": "left",
    "navigation_with_keys": False,
}
html_context = {
    "github_user": _repository.split("/")[0],
    "github_repo": _repository.split("/")[1],
    "github_version": "main",
    "doc_path": "docs/source",
}

# -- linkcheck ----------------------------------------------------------------------------
linkcheck_ignore = [r"https?://(localhost|127\.0\.0\.1).*", r"https?://[^/]*example\.(org|com).*"]
