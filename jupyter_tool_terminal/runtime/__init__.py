"""Runtimes: where the shells of tool terminals come from."""

from .base import Instance, RuntimeUnavailable, ShellChannel, ToolRuntime

__all__ = ["Instance", "RuntimeUnavailable", "ShellChannel", "ToolRuntime"]
