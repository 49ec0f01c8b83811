"""Which tool instances a user may open terminals in, and with which tool type.

An instance counts only if its runtime finds it, its owner label names the user and its tool
type is configured here. The session registry opens terminals in such instances, and the
file routes move files into and out of them; the REST models of instances are the web edge's
(``models.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import typing as t

from .errors import EngineUnavailable, NotPermitted
from .redaction import secret_variable_names
from .runtime import RuntimeUnavailable, ToolRuntime
from .runtime.base import Instance, valid_instance_id
from .tooltypes import ToolType

#: What a request for an instance that is not the caller's (or does not exist) is told.
NO_SUCH_INSTANCE = "No such tool instance for this user."


class ToolInstances:
    """The tool instances of a runtime whose tool type is configured (``tool_types``)."""

    def __init__(
        self, runtime: ToolRuntime, tool_types: t.Mapping[str, ToolType], log: logging.Logger
    ) -> None:
        self.runtime = runtime
        self.tool_types = dict(tool_types)
        self.log = log
        #: (instance, tool type) pairs whose unknown tool type was logged.
        self._unknown_tools_told: set[tuple[str, str]] = set()

    async def list(self, owner: str) -> list[tuple[Instance, ToolType]]:
        """``owner``'s instances whose tool type is configured, each with its tool type;
        :class:`EngineUnavailable` if the runtime cannot be asked."""
        try:
            instances = await self.runtime.list_instances(owner)
        except RuntimeUnavailable as error:
            raise EngineUnavailable(str(error)) from error
        found = []
        for instance in instances:
            tool = self.tool_types.get(instance.tool)
            if tool is None:
                self._tell_unknown_tool(instance)
            else:
                found.append((instance, tool))
        return found

    async def find(self, owner: str, instance_id: t.Any) -> tuple[Instance, ToolType]:
        """``owner``'s instance ``instance_id`` (running or not) and its tool type:
        :class:`NotPermitted` for anything else, :class:`EngineUnavailable` if the runtime
        cannot be asked."""
        if not valid_instance_id(instance_id):
            raise NotPermitted(NO_SUCH_INSTANCE)
        try:
            instance = await self.runtime.get_instance(instance_id)
        except RuntimeUnavailable as error:
            raise EngineUnavailable(str(error)) from error
        tool = self.tool_types.get(instance.tool) if instance is not None else None
        if instance is None or tool is None or instance.owner != owner:
            raise NotPermitted(NO_SUCH_INSTANCE)
        return instance, tool

    def without_secrets(
        self, instance: Instance, tool: ToolType
    ) -> tuple[ToolType, dict[str, str]]:
        """``tool`` with the secret-named variables of its shell emptied (an agent's terminal:
        what is not in its shell cannot be printed however it is transformed), and the values
        withheld."""
        environment = self.runtime.shell_variables(instance, tool)
        withheld = {name: environment[name] for name in secret_variable_names(environment)}
        if not withheld:
            return tool, {}
        emptied = {**tool.env, **dict.fromkeys(withheld, "")}
        return dataclasses.replace(tool, env=emptied), withheld

    def _tell_unknown_tool(self, instance: Instance) -> None:
        """Log once per instance that its label names a tool type this server lacks (its
        owner is told by ``GET /tool-terminal/api/status``)."""
        if (instance.id, instance.tool) in self._unknown_tools_told:
            return
        self._unknown_tools_told.add((instance.id, instance.tool))
        self.log.warning(
            "jupyter_tool_terminal: tool instance %s of %s is labelled "
            "jupyter-tool-terminal.tool=%s, a tool type this server does not configure "
            "(configured: %s): it is not shown",
            instance.id,
            instance.owner,
            instance.tool,
            ", ".join(sorted(self.tool_types)) or "none",
        )
