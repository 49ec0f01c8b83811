"""The tool instances as the REST API shows them (``GET /tool-terminal/api/instances``), the
tool tiles page and the agents' ``list_instances`` tool alike."""

from __future__ import annotations

import typing as t

from .runtime.base import Instance
from .tooltypes import ToolType


def instance_model(instance: Instance, tool: ToolType) -> dict[str, t.Any]:
    """One tool instance with what a client may know of its tool type."""
    return {
        "id": instance.id,
        "status": instance.status,
        "runtime": instance.runtime,
        **({"engine": instance.engine} if instance.engine else {}),
        **({"node": instance.node} if instance.node else {}),
        **tool.public_model(),
    }


def instance_models(instances: t.Iterable[tuple[Instance, ToolType]]) -> list[dict[str, t.Any]]:
    """:func:`instance_model` of each (instance, tool type) pair."""
    return [instance_model(instance, tool) for instance, tool in instances]
