"""A shell starts at the size its panel asked for, so that what its startup command prints is
laid out for the terminal it appears in (not at 80 columns, before the first resize)."""

from __future__ import annotations

import typing as t

import pytest

from ..conftest import Api, InstanceFactory, both_runtimes


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return {
        "sandbox": {"shell": ["/bin/sh"], "startup_command": "echo SIZE=$(stty size)"},
        "plain": {"shell": ["/bin/sh"]},
    }


@both_runtimes
async def test_the_startup_command_sees_the_size_asked_for(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model = await alice.call(
        "POST", "sessions", body={"instance": container.name, "rows": 37, "cols": 131}
    )
    term = await alice.connect(model["id"])
    await term.expect(r"SIZE=37 131\r\n")


@both_runtimes
async def test_a_shell_without_startup_command_starts_at_that_size(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(tool="plain")
    model = await alice.call(
        "POST", "sessions", body={"instance": container.name, "rows": 41, "cols": 97}
    )
    term = await alice.connect(model["id"])
    assert await term.run("stty size") == "41 97\r\n"


async def test_sizes_are_clamped_and_optional(alice: Api, make_instance: InstanceFactory) -> None:
    container = make_instance()
    model = await alice.call(
        "POST", "sessions", body={"instance": container.name, "rows": 100000, "cols": 1}
    )
    term = await alice.connect(model["id"])
    match = await term.expect(r"SIZE=(\d+) (\d+)\r\n")
    rows, cols = int(match.group(1)), int(match.group(2))
    assert rows < 100000
    assert cols > 1
    # Without a size: the engine's default, as before.
    model = await alice.call("POST", "sessions", body={"instance": container.name})
    assert (await alice.connect(model["id"])) is not None


@pytest.mark.parametrize(
    "extra",
    [{"rows": "40"}, {"cols": None}, {"cols": 80.5, "rows": 24}, {"rows": True, "cols": 80}],
)
async def test_a_bad_size_is_a_400_and_starts_nothing(
    alice: Api, make_instance: InstanceFactory, extra: dict[str, t.Any]
) -> None:
    container = make_instance()
    status, body = await alice.status(
        "POST", "sessions", body={"instance": container.name, **extra}
    )
    assert status == 400
    assert "rows" in body["message"]
    assert await alice.call("GET", "sessions") == []
