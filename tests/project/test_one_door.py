"""One door: no client reaches a session except through the manager (read from the source).

Every module of the package other than the manager (``manager.py``, the registry it builds on
in ``registry.py``, the admissions it hands out in ``admission.py``) and the session itself is
read, and each
attribute access that reaches into a session's insides, or past the manager's door to its
registry and listener lists, is listed: a browser's WebSocket and an agent's shell alike are
admitted, attached, fed and detached by ``ToolTerminalManager`` (``admit``/``attach``/
``receive``/``detach``, ``admit_agent``/``attach_reader``/``type_input``/``screen_text``/
``detach_reader``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from ..conftest import REPO

PACKAGE = REPO / "jupyter_tool_terminal"
#: The door itself (the manager, the registry it builds on, the admissions it hands out), and
#: what it guards.
DOOR = {"manager.py", "registry.py", "admission.py", "session.py"}
#: A session's insides: reached through any name.
INSIDES = {"output_listeners", "ended_listeners", "typing_listeners", "_attaching", "_session"}
#: Reached only on something named a session or a manager.
GUARDED = {"sessions", "screen", "write", "clients", "recording", "receive", "attach", "detach"}
#: Reads that other modules still make: none (the hand-over exports and adopts sessions through
#: the manager's hand-over interface, the web edge asks ``owner_of``/``session_count``). Any
#: entry added here must name why; the list may only shrink.
KNOWN: set[tuple[str, str]] = set()


def _receiver(node: ast.expr) -> str:
    """The dotted name of an attribute's receiver (``a.b`` of ``a.b.c``), or ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _receiver(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def reaches_past_the_door(path: Path) -> set[str]:
    """The accesses of ``path`` that reach a session's insides, as ``receiver.attribute``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        receiver = _receiver(node.value)
        last = receiver.rpartition(".")[2]
        named_session_or_manager = last.endswith(("session", "manager")) or last == "terminal"
        if node.attr in INSIDES or (node.attr in GUARDED and named_session_or_manager):
            found.add(f"{receiver}.{node.attr}")
    return found


def test_no_client_reaches_a_session_except_through_the_manager() -> None:
    reached = {
        (path.name, access)
        for path in PACKAGE.rglob("*.py")
        if path.name not in DOOR or path.parent != PACKAGE
        for access in reaches_past_the_door(path)
    }
    assert reached - KNOWN == set()


def test_the_check_sees_the_old_second_door(tmp_path: Path) -> None:
    """The check finds what the agents' modules did before they came through the door."""
    old = (
        "self.session.output_listeners.append(self._output)\n"
        "self.session.write(keys)\n"
        "screen = self.session.screen\n"
        "self.manager.sessions.get(session_id)\n"
        "manager.ended_listeners.append(listener)\n"
        "manager.typing_listeners.append(pacer.person_typed)\n"
    )
    path = tmp_path / "old_agent_shell.py"
    path.write_text(old)
    assert reaches_past_the_door(path) == {
        "self.session.output_listeners",
        "self.session.write",
        "self.session.screen",
        "self.manager.sessions",
        "manager.ended_listeners",
        "manager.typing_listeners",
    }
