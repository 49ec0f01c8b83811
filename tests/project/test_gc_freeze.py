"""The server keeps what its start-up made out of the garbage collector's full passes
(``gcfreeze.py``): with hundreds of sessions, each full pass over them held the event loop
for a quarter of a second, and every user's echo with it (``benchmarks/RESULTS.md``)."""

from __future__ import annotations

import gc
import typing as t

from jupyter_tool_terminal.app import ToolTerminalApp


async def test_the_start_up_s_objects_are_frozen_once_the_server_runs(
    tool_app: ToolTerminalApp, jp_serverapp: t.Any
) -> None:
    # What jupyter_server calls once its event loop runs (pytest-jupyter's server does not).
    await tool_app._start_jupyter_server_extension(jp_serverapp)
    # (The server under test shares this process: everything alive then is frozen.)
    assert gc.get_freeze_count() > 50_000
