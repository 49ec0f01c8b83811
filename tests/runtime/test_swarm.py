"""Tool instances as Docker Swarm services (``c.DockerRuntime.swarm``), on a real swarm.

Three ``dockerd`` in network and UTS namespaces of their own (``swarm.py``): ``n1`` the manager,
``n2`` and ``n3`` workers. The server knows only the manager's engine: the nodes' engines come
from the manager's list of nodes. A service's task containers carry the tool labels, as
SwarmSpawner's do, and a task's host name is ``NODE-SLOT``: ``hostname`` in a terminal says
which node's engine ran it (Swarm has no exec across nodes).
"""

from __future__ import annotations

import asyncio
import logging
import re
import typing as t
import uuid

import docker.errors
import pytest
from traitlets.config import Config

from jupyter_tool_terminal.runtime import swarm as swarms

from ..conftest import Api
from ..support.engines import needs_root_and_tools
from ..support.swarm import Node as SwarmNode
from ..support.swarm import Swarm
from ..support.terminal_client import TerminalClient

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def swarm(docker_client: t.Any) -> t.Iterator[Swarm]:
    """A swarm of three nodes for this module (a 1 s heartbeat: a hung node is marked down in
    seconds); gone after it, namespaces and all."""
    del docker_client  # the machine's engine has the test image now
    needs_root_and_tools()
    cluster = Swarm(3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def jp_server_config(jp_server_config: Config, swarm: Swarm) -> Config:
    config = Config(jp_server_config)
    config.DockerRuntime.engines = {"n1": swarm.manager.config}
    config.DockerRuntime.swarm = {
        "managers": ["n1"],
        "node_engine": {"url": "tcp://{addr}:2376", "tls": swarm.client_tls},
    }
    config.DockerRuntime.engine_timeout = 2.0
    config.DockerRuntime.engine_check_interval = 0.5
    config.DockerRuntime.call_timeout = 10.0
    return config


@pytest.fixture
def services(swarm: Swarm) -> t.Iterator[Swarm]:
    """The swarm, its services removed after the test (and every node active again)."""
    yield swarm
    swarm.remove_services()
    for node in swarm.nodes.values():
        node.thaw()
        for other in swarm.nodes.values():
            node.heal_from(other)
        if swarm.node_state(node) == ("ready", "drain"):
            swarm.activate(node)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


async def instances(api: Api) -> list[dict[str, t.Any]]:
    found = await api.call("GET", "instances")
    assert isinstance(found, list)
    return found


async def until(
    api: Api, check: t.Callable[[list[dict[str, t.Any]]], bool], timeout: float = 60
) -> list[dict[str, t.Any]]:
    """Poll the list until ``check`` holds (Swarm announces nothing a test can await)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await instances(api)
        if check(found):
            return found
        assert asyncio.get_running_loop().time() < deadline, f"not reached; last list: {found}"
        await asyncio.sleep(0.2)


def only(found: list[dict[str, t.Any]], instance_id: str) -> list[dict[str, t.Any]]:
    return [item for item in found if item["id"] == instance_id]


async def hostname(client: TerminalClient) -> str:
    marker = uuid.uuid4().hex[:8]
    client.send("stdin", f"printf '%s=%s\\n' {marker} \"$(hostname)\"\r")
    match = await client.expect(rf"{marker}=(\S+)\r?\n", timeout=20)
    return match.group(1)


async def on_a_worker(swarm: Swarm, api: Api) -> tuple[str, SwarmNode, TerminalClient]:
    """A service free to run on either worker, and a terminal in it: (name, its node, client)."""
    name = unique("alice")
    await asyncio.to_thread(swarm.service, name)
    await asyncio.to_thread(swarm.update, name, constraints=["node.role==worker"])
    await until(api, lambda found: only(found, f"swarm/{name}")[0]["status"] == "running")
    here = await asyncio.to_thread(swarm.task_node, name)
    node = next(n for n in swarm.nodes.values() if n.hostname == here)
    _, client = await api.terminal(f"swarm/{name}")
    assert await hostname(client) == f"{here}-1"
    return name, node, client


# -- configuration (no engine needed) --------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"managers": ["m"]}, "node_engine"),
        ({"managers": [], "node_engine": {"url": "tcp://{addr}:2376"}}, "managers"),
        ({"managers": ["x"], "node_engine": {"url": "tcp://{addr}:2376"}}, "'x'"),
        ({"managers": ["m"], "node_engine": {"url": "http://{addr}"}}, "url"),
        ({"managers": ["m"], "node_engine": {"url": "tcp://{ip}:2376"}}, "{addr}"),
        ({"managers": ["m"], "node": {}}, "unknown keys: node"),
        (
            {"managers": ["m"], "node_engine": {"url": "unix://{hostname}", "tls": {"ca": "c"}}},
            "tcp://",
        ),
    ],
)
def test_a_wrong_swarm_setting_says_what_is_wrong(value: dict[str, t.Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        swarms.parse_swarm(value, {"m"})


def test_an_engine_named_swarm_is_refused_beside_a_swarm() -> None:
    value = {"managers": ["m"], "node_engine": {"url": "tcp://{addr}:2376"}}
    with pytest.raises(ValueError, match="rename it"):
        swarms.parse_swarm(value, {"m", "swarm"})


@pytest.mark.parametrize(
    ("instance_id", "parts"),
    [
        ("swarm/alice-sandbox", ("alice-sandbox", None)),
        ("swarm/alice-sandbox.2", ("alice-sandbox", 2)),
        ("swarm/alice.02", None),
        ("swarm/alice.x", None),
        ("swarm/-alice", None),
        ("n1/alice", None),
        ("swarm/a.b.c", None),
    ],
)
def test_swarm_ids(instance_id: str, parts: tuple[str, int | None] | None) -> None:
    assert swarms.split_id(instance_id) == parts


# -- on the swarm ----------------------------------------------------------------------------


async def test_a_service_is_one_instance_of_its_owner_with_an_id_that_names_it(
    services: Swarm, alice: Api, bob: Api
) -> None:
    n2, n1 = services.nodes["n2"], services.nodes["n1"]
    mine = unique("alice")
    await asyncio.to_thread(services.service, mine, on=n2)
    # Also on the manager: its task container is not an instance of the manager's engine.
    on_manager = unique("alice")
    await asyncio.to_thread(services.service, on_manager, on=n1)
    bobs = unique("bob")
    await asyncio.to_thread(services.service, bobs, owner="bob")
    untyped = unique("alice")
    await asyncio.to_thread(services.service, untyped, tool=None)
    several = unique("alice")
    await asyncio.to_thread(services.service, several, replicas=2)

    found = await instances(alice)
    ids = sorted(item["id"] for item in found)
    assert ids == sorted(
        [f"swarm/{mine}", f"swarm/{on_manager}", f"swarm/{several}.1", f"swarm/{several}.2"]
    ), found
    (item,) = only(found, f"swarm/{mine}")
    assert item["status"] == "running"
    assert item["node"] == n2.hostname
    assert item["runtime"] == "docker"
    assert all(item["node"] for item in found)
    assert [item["id"] for item in await instances(bob)] == [f"swarm/{bobs}"]
    # Another user's service is refused under its id, as another user's container is.
    status, body = await alice.status("POST", "sessions", body={"instance": f"swarm/{bobs}"})
    assert status == 403, body


async def test_a_terminal_opens_on_the_node_that_runs_the_task(services: Swarm, alice: Api) -> None:
    n3 = services.nodes["n3"]
    name = unique("alice")
    await asyncio.to_thread(services.service, name, on=n3)
    _, client = await alice.terminal(f"swarm/{name}")
    assert await hostname(client) == f"{n3.hostname}-1"

    # Only n3's engine has the container: the manager cannot exec there (moby#27552).
    def manager_has_it() -> bool:
        (task,) = services.running_tasks(name)
        client = services.manager.client()
        try:
            client.containers.get(task["Status"]["ContainerStatus"]["ContainerID"])
        except docker.errors.NotFound:
            return False
        finally:
            client.close()
        return True

    assert not await asyncio.to_thread(manager_has_it)
    client.ws.close()


@pytest.mark.parametrize("move", ["constraint", "drain"])
async def test_a_moved_instance_ends_its_terminal_saying_so_and_reopens_under_its_id(
    services: Swarm, alice: Api, move: str, caplog: pytest.LogCaptureFixture
) -> None:
    n2, n3 = services.nodes["n2"], services.nodes["n3"]
    name = unique("alice")
    await asyncio.to_thread(services.service, name, on=None)
    await asyncio.to_thread(services.update, name, constraints=["node.role==worker"])
    await until(alice, lambda found: only(found, f"swarm/{name}")[0]["status"] == "running")
    here = await asyncio.to_thread(services.task_node, name)
    there = n3 if here == n2.hostname else n2
    model, client = await alice.terminal(f"swarm/{name}")
    assert await hostname(client) == f"{here}-1"

    caplog.set_level(logging.INFO)
    if move == "constraint":
        constraint = f"node.hostname=={there.hostname}"
        await asyncio.to_thread(services.update, name, constraints=[constraint])
    else:
        await asyncio.to_thread(services.drain, services.nodes[here.rsplit("-", 1)[1]])
    frame = await client.expect_frame("error", timeout=60)
    assert "moved to node " + there.hostname in frame[1] or "moved to another node" in frame[1]
    assert "open it again" in frame[1]

    # One item all along, and then running on the other node under the same id.
    found = await until(
        alice,
        lambda found: (
            only(found, f"swarm/{name}")[0].get("node") == there.hostname
            and only(found, f"swarm/{name}")[0]["status"] == "running"
        ),
    )
    assert len(only(found, f"swarm/{name}")) == 1
    _, again = await alice.terminal(f"swarm/{name}")
    assert await hostname(again) == f"{there.hostname}-1"
    again.ws.close()
    # The stopped task's kill found nothing to kill, and said nothing of it.
    noise = [
        record.getMessage()
        for record in caplog.records
        if record.levelno >= logging.WARNING
        and re.search(r"kill|is not running", record.getMessage())
    ]
    assert noise == [], noise
    del model


async def test_a_node_that_hangs_leaves_its_instance_listed_not_running_until_it_moves(
    services: Swarm, alice: Api
) -> None:
    name, node, client = await on_a_worker(services, alice)
    here = node.hostname

    node.freeze()
    frame = await client.expect_frame("error", timeout=60)
    # Whichever is seen first: the node's engine not answering, or the managers' move.
    assert "not reachable" in frame[1] or "moved to" in frame[1], frame
    # Listed (not gone, not twice) and not running, until the managers run it elsewhere.
    seen: set[str] = set()

    def moved(found: list[dict[str, t.Any]]) -> bool:
        mine = only(found, f"swarm/{name}")
        assert len(mine) == 1, found
        seen.add(mine[0]["status"])
        return bool(mine[0]["status"] == "running" and mine[0]["node"] != here)

    await until(alice, moved)
    assert seen - {"running"}, seen  # it was not shown running while its node hung
    node.thaw()
    _, again = await alice.terminal(f"swarm/{name}")
    assert (await hostname(again)).rsplit("-", 1)[0] != here
    again.ws.close()
    assert len(only(await instances(alice), f"swarm/{name}")) == 1


async def test_a_node_cut_off_from_the_managers_is_never_a_second_instance(
    services: Swarm, alice: Api
) -> None:
    n1 = services.manager
    name, node, client = await on_a_worker(services, alice)
    here = node.hostname

    # The server still reaches the node; the manager does not.
    node.cut_off_from(n1)

    def moved(found: list[dict[str, t.Any]]) -> bool:
        mine = only(found, f"swarm/{name}")
        assert len(mine) == 1, found
        return bool(mine[0]["status"] == "running" and mine[0]["node"] != here)

    await until(alice, moved, timeout=90)
    # The terminal in the orphan ended once the managers ran the task elsewhere.
    frame = await client.expect_frame("error", timeout=30)
    assert "moved to" in frame[1]
    _, again = await alice.terminal(f"swarm/{name}")
    assert (await hostname(again)).rsplit("-", 1)[0] != here
    again.ws.close()


async def test_a_node_that_joins_later_is_found_without_a_restart(
    services: Swarm, alice: Api
) -> None:
    assert [item for item in await instances(alice) if item["id"].startswith("swarm/")] == []
    if "n4" not in services.nodes:
        await asyncio.to_thread(services.add_node)
    n4 = services.nodes["n4"]
    name = unique("alice")
    await asyncio.to_thread(services.service, name, on=n4)
    (item,) = only(await instances(alice), f"swarm/{name}")
    assert item["node"] == n4.hostname
    assert item["status"] == "running"
    _, client = await alice.terminal(f"swarm/{name}")
    assert await hostname(client) == f"{n4.hostname}-1"
    client.ws.close()


async def test_with_no_manager_answering_lists_answer_and_open_terminals_go_on(
    services: Swarm, alice: Api
) -> None:
    name = unique("alice")
    await asyncio.to_thread(services.service, name, on=services.nodes["n2"])
    _, client = await alice.terminal(f"swarm/{name}")
    assert await hostname(client) == f"{services.nodes['n2'].hostname}-1"
    services.manager.freeze()
    try:
        found = await instances(alice)
        assert only(found, f"swarm/{name}") == []  # left out, and the list answered
        status, body = await alice.status("POST", "sessions", body={"instance": f"swarm/{name}"})
        assert status == 503, body
        assert "manager" in body["message"]
        # The open terminal's node answers: it goes on.
        assert await hostname(client) == f"{services.nodes['n2'].hostname}-1"
    finally:
        services.manager.thaw()
    client.ws.close()
