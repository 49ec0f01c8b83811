"""Jupyter AI's agents (ACP personas) in tool terminals.

Importable only where ``jupyter-ai-acp-client`` is installed (``pip install
jupyter-tool-terminal[jupyter-ai]``); nothing else of the package needs it.
"""

from .client import ToolTerminalAcpClient

__all__ = ["ToolTerminalAcpClient"]
