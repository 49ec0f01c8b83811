"""What stands between a user and their first tool terminal, said where the user looks.

An extension installed into an existing JupyterLab shows nothing until tool types are
configured; a server whose user may not use the Docker socket falls back to local instances it
may not have; a container labelled with a tool type the server does not know is not listed. The
log says each once, at start-up; ``GET /tool-terminal/api/status`` says them to the launcher
and *Open Tool Terminal*, with a link to the README section that explains the fix.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import typing as t

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import ToolTerminalAPIHandler, ToolTerminalExtension
from .runtime import RuntimeUnavailable

if t.TYPE_CHECKING:
    from .manager import ToolTerminalManager

#: README sections the notes link to (GitHub's anchors of their headings).
TOOL_TYPES_SECTION = "tool-instances-and-tool-types"
LOCAL_SECTION = "local-instances-no-docker"
QUICK_START_SECTION = "quick-start"


@dataclasses.dataclass(frozen=True)
class SetupNote:
    """One thing a user must know: what is wrong or missing, and where the fix is explained."""

    #: A stable name: ``disabled``, ``no-tool-types``, ``engine``, ``no-local-instances``,
    #: ``unknown-tool-types``.
    kind: str
    #: One or two sentences for the user.
    message: str
    #: The README section (anchor) that explains it.
    section: str

    def model(self) -> dict[str, str]:
        """The note as the REST API sends it, with the README section as a full URL."""
        return {"kind": self.kind, "message": self.message, "help": readme_url(self.section)}


def readme_url(section: str) -> str:
    """The URL of a README section, from the package's own ``Homepage`` (empty if unknown)."""
    try:
        urls = importlib.metadata.metadata("jupyter-tool-terminal").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return ""
    for entry in urls:
        name, _, url = entry.partition(",")
        if name.strip().lower() == "homepage":
            return f"{url.strip()}#{section}"
    return ""


def no_tool_types() -> SetupNote:
    """The note of a server without ``ToolTerminalApp.tool_types``."""
    return SetupNote(
        "no-tool-types",
        "No tool types are configured on this server, so no tool instance can be shown. An "
        "administrator sets c.ToolTerminalApp.tool_types in jupyter_server_config.py and labels "
        "containers jupyter-tool-terminal.owner and jupyter-tool-terminal.tool.",
        TOOL_TYPES_SECTION,
    )


async def unknown_tool_types(manager: ToolTerminalManager, owner: str) -> SetupNote | None:
    """A note naming the tool types of ``owner``'s instances that are not configured."""
    try:
        instances = await manager.runtime.list_instances(owner)
    except RuntimeUnavailable:
        return None  # the instance list says so itself
    unknown = sorted((i.id, i.tool) for i in instances if i.tool not in manager.tool_types)
    if not unknown:
        return None
    labels = "; ".join(f"{name} has jupyter-tool-terminal.tool={tool}" for name, tool in unknown)
    return SetupNote(
        "unknown-tool-types",
        f"Some of your containers are labelled with tool types this server does not know "
        f"({', '.join(sorted({tool for _, tool in unknown}))}), so they are not shown: "
        f"{labels}. Configured: {', '.join(sorted(manager.tool_types)) or 'none'}. Relabel "
        "the container, or ask whoever runs this server to configure the tool type.",
        TOOL_TYPES_SECTION,
    )


class StatusExtension(ToolTerminalExtension, t.Protocol):
    """What the status route needs of the extension, beside what every handler does."""

    @property
    def setup_notes(self) -> t.Sequence[SetupNote]:
        """What start-up found that keeps users from tool terminals."""


class SetupStatusHandler(ToolTerminalAPIHandler):
    """``GET /tool-terminal/api/status``: the runtime in use and what keeps tiles from showing.

    Answers 200 even while the extension is disabled: that is when the user most needs to know.
    """

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """``{"runtime": "docker" | "local" | null, "tool_types": N, "notes": [...]}``."""
        app = t.cast(StatusExtension, self.tool_app)
        notes = list(app.setup_notes)
        manager = app.session_manager
        runtime = None
        if manager is not None:
            runtime = manager.runtime.name
            owner = self.tool_user()
            unknown = await unknown_tool_types(manager, owner) if owner else None
            if unknown is not None:
                notes.append(unknown)
        self.finish(
            json.dumps(
                {
                    "runtime": runtime,
                    "tool_types": len(manager.tool_types) if manager is not None else 0,
                    "notes": [note.model() for note in notes],
                }
            )
        )
