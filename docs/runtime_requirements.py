"""Print the package's runtime dependencies from pyproject.toml, one a line, with its ``hub`` extra.

The docs import every module of the package from the checkout (autodoc reads the traits of each
configurable class, the JupyterHub service's included) without building its JupyterLab extension,
so they install what the package needs to import, read from the one place that names it:
``pip install -r <(python docs/runtime_requirements.py)``.
"""

from __future__ import annotations

import pathlib

import tomllib

#: The extras whose modules the docs import too.
EXTRAS = ("hub",)


def runtime_requirements(pyproject: pathlib.Path) -> list[str]:
    """The ``[project] dependencies`` of a pyproject.toml and those of :data:`EXTRAS`."""
    with pyproject.open("rb") as file:
        project = tomllib.load(file)["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(dep for extra in EXTRAS for dep in extras.get(extra, []))]


if __name__ == "__main__":
    for requirement in runtime_requirements(pathlib.Path(__file__).parents[1] / "pyproject.toml"):
        print(requirement)
