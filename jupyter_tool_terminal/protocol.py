"""The terminal WebSocket's messages, both ways: terminado's protocol as this server speaks it.

Every frame is a JSON text frame holding a list whose first item is the message type. The
client sends ``["stdin", text]`` and ``["set_size", rows, cols, ...]``; the server sends
``setup``, ``stdout``, ``exit``, ``error`` and ``disconnect``. :func:`parse_client_frame` reads
a client's frame into a typed message (or a :class:`FrameError` to answer with an ``error``
frame); the ``*_frame`` builders make every frame the server sends. The browser's side of the
same protocol is ``labextension/src/connection.ts``.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

#: Terminal size bounds: anything a client sends is clamped into these.
#: (Docker ignores a 1x1 size, so the floor is 2.)
MIN_ROWS = MIN_COLS = 2
MAX_ROWS = 500
MAX_COLS = 1000

#: The WebSocket close code a client sends when its user closed the terminal's tab but not the
#: session (JupyterLab's habit: the terminal goes on, reopened from the Running panel). The
#: session then waits for no grace: it lives until it is deleted, its shell exits, it goes idle
#: (``idle_timeout``) or the server stops. Any other close starts ``disconnect_grace``.
DETACH_CLOSE_CODE = 4000


def clamp_size(rows: int, cols: int) -> tuple[int, int]:
    """Clamp a terminal size into the bounds the engine is ever asked for."""
    return (min(max(rows, MIN_ROWS), MAX_ROWS), min(max(cols, MIN_COLS), MAX_COLS))


def _reject_constant(name: str) -> t.NoReturn:
    msg = f"{name} is not a number here"
    raise ValueError(msg)


def strict_json(text: str) -> t.Any:
    """Parse JSON without NaN/Infinity (Python accepts them by default); ``ValueError`` (or
    ``RecursionError``, for absurd nesting) if it is not JSON."""
    return json.loads(text, parse_constant=_reject_constant)


def is_integer(value: t.Any) -> bool:
    """Whether a JSON value is an integer (JSON Schema's sense: ``2.0`` is one, ``true`` not;
    xterm sends integral floats through some clients)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


# -- from the client ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Stdin:
    """``["stdin", text]``: keystrokes or a paste."""

    text: str


@dataclasses.dataclass(frozen=True)
class SetSize:
    """``["set_size", rows, cols, ...]``: the client's terminal size, clamped."""

    rows: int
    cols: int


@dataclasses.dataclass(frozen=True)
class Unknown:
    """A well-formed frame of a type this server does not know (ignored, as terminado does)."""

    kind: str


ClientMessage = Stdin | SetSize | Unknown


class FrameError(ValueError):
    """A client's frame is malformed; ``message`` is what its ``error`` frame says."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def parse_client_frame(frame: str | bytes) -> ClientMessage:
    """The message of one frame from a client; :class:`FrameError` if it is malformed."""
    if isinstance(frame, bytes):
        msg = "Binary frames are not accepted; send JSON text frames."
        raise FrameError(msg)
    try:
        command = strict_json(frame)
    except (ValueError, RecursionError):
        msg = "Malformed frame: not JSON."
        raise FrameError(msg) from None
    if not isinstance(command, list) or not command or not isinstance(command[0], str):
        msg = 'Malformed frame: expected a JSON list like ["stdin", "text"].'
        raise FrameError(msg)
    kind = command[0]
    if kind == "stdin":
        if len(command) < 2 or not isinstance(command[1], str):
            msg = 'Malformed frame: expected ["stdin", "text"].'
            raise FrameError(msg)
        return Stdin(command[1])
    if kind == "set_size":
        rows, cols = [*command[1:3], None, None][:2]
        if not (is_integer(rows) and is_integer(cols)):
            msg = 'Malformed frame: expected ["set_size", rows, cols] with integers.'
            raise FrameError(msg)
        return SetSize(*clamp_size(int(rows), int(cols)))
    return Unknown(kind)


# -- to the client ------------------------------------------------------------------------


def _frame(*message: t.Any) -> str:
    # Not ASCII-escaped: output is mostly text, and escaping would make it up to 6 times larger.
    return json.dumps(list(message), ensure_ascii=False)


def setup_frame() -> str:
    """``["setup", {}]``: the connection is attached; the first frame a client receives."""
    return _frame("setup", {})


def stdout_frame(text: str) -> str:
    """``["stdout", text]``: terminal output (or the screen a client attaches to)."""
    return _frame("stdout", text)


def exit_frame(code: int) -> str:
    """``["exit", code]``: the shell ended with this exit code (before ``disconnect``)."""
    return _frame("exit", code)


def error_frame(message: str) -> str:
    """``["error", message]``: a refusal or failure for the user to read."""
    return _frame("error", message)


def disconnect_frame() -> str:
    """``["disconnect", 1]``: the session is over."""
    return _frame("disconnect", 1)
