"""Typing and output in a tool terminal count as the server's activity (idle culling)."""

from __future__ import annotations

import datetime
import json
import typing as t

from jupyter_tool_terminal import session as session_module

from ..conftest import ALICE, Api, InstanceFactory, wait_until

SETTING = "tool_terminal_last_activity"


async def _last_activity(jp_fetch: t.Any) -> datetime.datetime:
    response = await jp_fetch("api", "status", headers=ALICE)
    return datetime.datetime.fromisoformat(json.loads(response.body)["last_activity"])


async def test_typing_moves_the_servers_last_activity(
    alice: Api, jp_fetch: t.Any, jp_serverapp: t.Any, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    # REST calls count as activity themselves: only the terminal's frames follow.
    before = await _last_activity(jp_fetch)
    commands = 0

    async def advanced() -> bool:
        nonlocal commands
        commands += 1
        assert (await term.run(f"echo $(({commands}*7))")).strip() == str(commands * 7)
        return await _last_activity(jp_fetch) > before

    # Reports are throttled (at most one per session per interval): type until one lands.
    await wait_until(advanced, timeout=5 * session_module.ACTIVITY_REPORT_INTERVAL)
    assert jp_serverapp.web_app.settings[SETTING] > before


async def test_an_output_flood_reports_activity_at_most_once_per_interval(
    alice: Api, jp_serverapp: t.Any, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    settings = jp_serverapp.web_app.settings
    reports: list[datetime.datetime] = []

    class Recording(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: str, value: t.Any) -> None:
            if key == SETTING:
                reports.append(value)
            super().__setitem__(key, value)

    recording = Recording(settings)
    jp_serverapp.web_app.settings = recording
    try:
        started = datetime.datetime.now(datetime.timezone.utc)
        # About 8 MB of output in many frames.
        await term.run(
            "i=0; while [ $i -lt 40 ]; do head -c 200000 /dev/zero | tr '\\0' x; i=$((i+1)); "
            "done; echo",
            timeout=60,
        )
        lasted = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
    finally:
        jp_serverapp.web_app.settings = settings
    assert len(term.frames) > 50
    assert len(reports) <= lasted / session_module.ACTIVITY_REPORT_INTERVAL + 2, (
        len(reports),
        lasted,
    )
