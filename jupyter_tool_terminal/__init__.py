"""Browser terminals inside each Jupyter user's own Docker tool instances."""

from __future__ import annotations

import typing as t

try:
    from ._version import __version__
except ImportError:  # running from a source tree that was never built
    __version__ = "0.0.0"


def _jupyter_server_extension_points() -> list[dict[str, t.Any]]:
    from .app import ToolTerminalApp  # noqa: PLC0415 - imported only when the server loads it

    return [{"module": "jupyter_tool_terminal.app", "app": ToolTerminalApp}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-tool-terminal"}]
