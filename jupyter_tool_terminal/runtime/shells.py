"""A shell the tool instance does not have: plain words for the user, one line for the operator.

An engine that cannot start a terminal's command answers in its own words (Docker: ``OCI runtime
exec failed: ... stat /bin/sh: no such file or directory``; Podman: ``crun: executable file ...
not found``). The terminal shows, instead, which shell is missing for which tool type and what
the operator can do; the server's log says it once per instance and tool type. A tool type may
name several ``shells``: the first one the instance has is started (remembered per container).
"""

from __future__ import annotations

import logging

from ..tooltypes import ToolType

#: What engines' refusals to start an exec's command contain (Docker's and Podman's).
ENGINE_START_FAILURE = (b"OCI runtime", b"executable file not found", b"crun: executable file")


def is_start_failure(data: bytes) -> bool:
    """Whether a terminal's first output is its engine's refusal to start the command."""
    return any(marker in data for marker in ENGINE_START_FAILURE)


def missing_shell_text(tool: ToolType, instance_id: str) -> str:
    """What the user reads: which shell is missing, for which tool type, and what to do."""
    which = "none of the shells" if tool.shells else "no"
    instance = f"The tool instance {instance_id}" if instance_id else "This tool instance"
    return (
        f"{instance} has {which} {tool.shell_names} (the shell of tool type "
        f'"{tool.display_name}"), so no terminal can start in it. Ask whoever runs this server '
        f"to install it in the image, or to list the shells the image has in the tool type's "
        f'"shells" (for example ["/bin/bash", "/bin/sh"]).'
    )


class MissingShells:
    """Which (instance, tool type) pairs lack their shell, each logged once."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._told: set[tuple[str, str]] = set()
        #: The shell (command) found to start, by (container id, tool type name).
        self.chosen: dict[tuple[str, str], tuple[str, ...]] = {}

    def tell(self, tool: ToolType, instance_id: str) -> str:
        """Log the missing shell once for this pair; what the user is told."""
        if (instance_id, tool.name) not in self._told:
            self._told.add((instance_id, tool.name))
            self._log.warning(
                "jupyter_tool_terminal: tool instance %s has %s %s, the shell of tool type %r: "
                "its terminals cannot start (set the tool type's 'shells' to shells it has)",
                instance_id,
                "none of the shells" if tool.shells else "no",
                tool.shell_names,
                tool.name,
            )
        return missing_shell_text(tool, instance_id)

    def report(self, tool: ToolType, instance_id: str) -> bytes:
        """:meth:`tell`, as a terminal shows it (the shell was there when the session started
        and is gone now: the engine's refusal is replaced by it)."""
        return f"\r\n[jupyter-tool-terminal] {self.tell(tool, instance_id)}\r\n".encode()
