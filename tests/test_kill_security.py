"""The kill in the container trusts nothing the container's users control (issue 10)."""

from __future__ import annotations

import asyncio
import typing as t

import pytest

from .conftest import BASE_PROCESSES, Api, InstanceFactory, container_processes, wait_until

#: Tools a kill script could call by name; the fakes log the uid they ran as, then do the job.
FAKED_TOOLS = ("grep", "kill", "cat", "sleep", "env", "sed", "awk", "ps", "printf", "echo", "[")


def _plant_fakes(container: t.Any) -> None:
    """As the tool user (uid 1000), put fake tools into the first, user-writable PATH entry."""
    for name in FAKED_TOOLS:
        script = f'#!/bin/sh\n/usr/bin/id -u >> /tmp/fake-ran\nexec /usr/bin/{name} "$@"\n'
        result = container.exec_run(
            [
                "/bin/sh",
                "-c",
                'printf "%s" "$1" > "/opt/tool/bin/$2" && chmod 755 "/opt/tool/bin/$2"',
                "plant",
                script,
                name,
            ],
            user="1000",
        )
        assert result.exit_code == 0, result.output


def _uids_that_ran_fakes(container: t.Any) -> list[str]:
    result = container.exec_run(
        ["/bin/sh", "-c", "[ -e /tmp/fake-ran ] && /usr/bin/cat /tmp/fake-ran"]
    )
    return result.output.decode().split() if result.exit_code == 0 else []


async def _busy(alice: Api, container: t.Any) -> tuple[dict[str, t.Any], t.Any]:
    model, term = await alice.terminal(container.name)
    # A user of the image runs its tools through its PATH: the fakes log uid 1000 for this.
    term.send("stdin", "/usr/bin/sleep 1001 & setsid /usr/bin/sleep 1002 &\r")
    await term.run("true")

    async def started() -> bool:
        processes = await asyncio.to_thread(container_processes, container)
        return any("sleep 1002" in p for p in processes) and any(
            "sleep 1001" in p for p in processes
        )

    await wait_until(started)
    return model, term


class TestUserWritablePath:
    """An image whose PATH starts with a directory the tool user may write (docker-stacks'
    /opt/conda/bin): fake tools there must never run as root."""

    @pytest.fixture(params=["1000:1000", None], ids=["user-1000", "image-user-root"])
    def tool_types(self, request: pytest.FixtureRequest) -> dict[str, t.Any]:
        # dash prints its prompt before a command's output; none keeps `run`'s markers apart.
        spec: dict[str, t.Any] = {"shell": ["/bin/sh"], "env": {"PS1": ""}}
        if request.param is not None:
            spec["user"] = request.param
        return {"debian": spec}

    async def test_no_fake_tool_runs_as_root(
        self, alice: Api, make_instance: InstanceFactory, debian_image: str
    ) -> None:
        container = make_instance(tool="debian", image=debian_image)
        _plant_fakes(container)
        keeper, keeper_term = await _busy(alice, container)
        # Closed beside a live shell: the kill goes through a reaper.
        model, _ = await _busy(alice, container)
        await alice.call("DELETE", "sessions", model["id"])
        # The container's last shell: the kill runs on its own.
        await alice.call("DELETE", "sessions", keeper["id"])
        await keeper_term.expect_frame("disconnect")

        async def only_base() -> bool:
            processes = await asyncio.to_thread(container_processes, container)
            return set(processes) <= BASE_PROCESSES

        await wait_until(only_base)
        assert "0" not in await asyncio.to_thread(_uids_that_ran_fakes, container)
