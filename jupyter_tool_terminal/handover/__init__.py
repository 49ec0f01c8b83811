"""Handing a running server's terminals over to its successor: an upgrade or a configuration
change that ends no session (docs: howto/upgrade-without-downtime).

One component, :class:`Handover`, does it for the app. It speaks to the sessions through the
manager's hand-over interface only (``suspend_all``, ``resume_all``, ``hand_off_all``,
``adopt_session``), to the runtime through ``handover_state``/``take_over``/``adopt_shell``,
and to the HTTP server through :mod:`.listening`, the one module that reaches past tornado's
and jupyter_server's public API (and names the upstream changes it waits for). The protocol
and its two ends are in :mod:`.protocol`.
"""

from __future__ import annotations

import os
import sys
import typing as t

from traitlets.config import LoggingConfigurable

from .listening import serve_only_on_inherited
from .protocol import (
    FAILED,
    HandoverError,
    Inheritance,
    Predecessor,
    Successor,
    adopt,
    default_socket_path,
)

if t.TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp

    from ..manager import ToolTerminalManager
    from ..runtime import ToolRuntime

__all__ = [
    "FAILED",
    "Handover",
    "HandoverError",
    "Inheritance",
    "Predecessor",
    "Successor",
    "default_socket_path",
]


class Handover(LoggingConfigurable):
    """A server's two roles in a hand-over: the successor of a running server (``take_over``),
    once, at start-up; then the predecessor its own successor finds at :attr:`path`."""

    def __init__(
        self,
        *,
        serverapp: ServerApp,
        manager: ToolTerminalManager,
        runtime: ToolRuntime,
        socket_path: str,
        take_over: bool,
        **kwargs: t.Any,
    ) -> None:
        super().__init__(**kwargs)
        self.serverapp = serverapp
        self.manager = manager
        self.runtime = runtime
        #: The Unix socket where this server listens for a successor (and, with ``take_over``,
        #: where it looks for its predecessor).
        self.path = socket_path or default_socket_path(
            serverapp.runtime_dir, serverapp.port, serverapp.sock
        )
        self.take_over = take_over
        #: Where this server listens for its successor (``None``: it does not).
        self.predecessor: Predecessor | None = None

    def prepare(self) -> None:
        """Before the server binds its port: take the running server's sessions (with
        ``take_over``; the process exits with :data:`FAILED` if it cannot), and schedule
        :meth:`start` on the event loop."""
        try:
            successor = Successor.connect(self.path) if self.take_over else None
        except (OSError, HandoverError) as error:
            self.log.critical("jupyter_tool_terminal: not taking over: %s", error)
            sys.exit(FAILED)
        if self.take_over and successor is None:
            self.log.info(
                "jupyter_tool_terminal: no running server to take over from at %s; starting "
                "as usual",
                self.path,
            )
        inheritance = None if successor is None else self._inherit(successor)
        self.serverapp.io_loop.add_callback(self.start, successor, inheritance)

    def _inherit(self, successor: Successor) -> Inheritance:
        """Receive the running server's sessions (suspended there from now on); exit if they
        cannot be served here (the running server then goes on)."""
        try:
            inheritance = successor.receive()
        except (OSError, ValueError, KeyError, HandoverError) as error:
            self.log.critical("jupyter_tool_terminal: cannot take over: %s", error)
            sys.exit(FAILED)
        reason = inheritance.refusal(self.runtime, self.manager.tool_types)
        if reason is not None:
            successor.refuse(reason)
            self.log.critical(
                "jupyter_tool_terminal: not taking over (the running server goes on): %s", reason
            )
            sys.exit(FAILED)
        self.runtime.take_over(inheritance.message["server"])
        # This server serves on the predecessor's listening sockets once it let go of them,
        # never on a port of its own (the configured one is the predecessor's).
        if inheritance.listening:
            serve_only_on_inherited(self.serverapp, inheritance.listening)
        return inheritance

    async def start(self, successor: Successor | None, inheritance: Inheritance | None) -> None:
        """Adopt what was inherited (if anything) and serve on the inherited sockets, then
        listen for a successor of this server."""
        serverapp = self.serverapp
        if successor is not None and inheritance is not None:
            try:
                await adopt(inheritance, self.manager, self.runtime, self.log)
                await successor.finish()
            except Exception:
                self.log.critical(
                    "jupyter_tool_terminal: the take-over failed; the running server goes on",
                    exc_info=True,
                )
                # At once and without clean-up: what this server holds is the predecessor's.
                os._exit(FAILED)
            serverapp.http_server.add_sockets(inheritance.listening)
            self.log.info(
                "jupyter_tool_terminal: took over %d tool terminal(s)", self.manager.session_count()
            )
        predecessor = Predecessor(
            self.path,
            manager=self.manager,
            runtime=self.runtime,
            http_server=lambda: getattr(serverapp, "http_server", None),
            on_handed_over=serverapp.stop,
            log=self.log,
        )
        try:
            predecessor.start()
        except (OSError, HandoverError) as error:
            self.log.warning(
                "jupyter_tool_terminal: no successor can take over from this server (%s): %s",
                predecessor.path,
                error,
            )
        else:
            self.predecessor = predecessor

    def close(self) -> None:
        """Stop listening for a successor."""
        if self.predecessor is not None:
            self.predecessor.close()
