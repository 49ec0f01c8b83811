"""Docker Swarm against a plain engine: opening a terminal on a worker node, and many sessions
spread over three nodes against the same number on one.

    sudo python3 benchmarks/swarm.py [--n 300] [--opens 20] [--seconds 20] [--out FILE.json]

Starts a real swarm of three ``dockerd`` in namespaces of their own
(``tests/support/swarm.py``) and two servers side by side:

* **plain**: the server reaches node n2's engine directly (``DOCKER_HOST``), with a labelled
  container on it, as a one-host deployment does;
* **swarm**: the server knows only the manager (``c.DockerRuntime.swarm``); a service's task runs
  on n2 (for opens), and one service per node (for the spread).

Opens alternate between the two servers (the machine's drift hits both alike): open p50/p95 and
their ratio. Then ``n`` sessions on the plain container, and ``n`` spread over the three services:
open p50, echo p50/p99 while every session types (a key every 0.1-0.3 s), failures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import sys
import typing as t
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

# The benchmark's own helpers, beside this script.
from client import Client  # noqa: E402
from common import OWNER, TOOL, Target, ms, percentile  # noqa: E402
from engines import close_all, figures, labelled_container, open_all, type_for  # noqa: E402
from lab import Lab, Server  # noqa: E402
from tests.support.swarm import Swarm  # noqa: E402


def server_config(n: int, swarm: Swarm | None) -> str:
    lines = [
        f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}",
        f"c.ToolTerminalApp.owner = {OWNER!r}",
        f"c.ToolTerminalApp.max_sessions = {n + 50}",
        f"c.ToolTerminalApp.max_sessions_per_user = {n + 50}",
        f"c.ToolTerminalApp.max_clients_per_user = {n + 50}",
        "c.DockerRuntime.threads = 64",
    ]
    if swarm is not None:
        node_engine = {"url": "tcp://{addr}:2376", "tls": swarm.client_tls}
        lines += [
            f"c.DockerRuntime.engines = {{'n1': {swarm.manager.config!r}}}",
            f"c.DockerRuntime.swarm = {{'managers': ['n1'], 'node_engine': {node_engine!r}}}",
        ]
    return "\n".join(lines) + "\n"


def targets(server: Server, instances: list[str]) -> list[Target]:
    base = server.target
    return [
        Target(base.key, "tool", base.base, base.token, instance, server_pid=base.server_pid)
        for instance in instances
    ]


async def opens(client: Client, plain: Target, swarmed: Target, count: int) -> dict[str, t.Any]:
    """Alternating opens (and closes) of the two servers' instance on n2."""
    times: dict[str, list[float]] = {"plain": [], "swarm": []}
    for _ in range(count):
        for key, target in (("plain", plain), ("swarm", swarmed)):
            term, took = await client.open(target, timeout=60)
            times[key].append(took)
            await client.close_term(target, term)
            await asyncio.sleep(0.1)
    found: dict[str, t.Any] = {
        key: {"p50_ms": ms(percentile(values, 0.5)), "p95_ms": ms(percentile(values, 0.95))}
        for key, values in times.items()
    }
    found["ratio_p50"] = round(found["swarm"]["p50_ms"] / found["plain"]["p50_ms"], 2)
    return found


async def spread(
    client: Client, server: Server, instances: list[str], n: int, seconds: float
) -> dict[str, t.Any]:
    chosen = targets(server, instances)
    terms, open_times, failures = await open_all(client, chosen, n)
    result: dict[str, t.Any] = {
        "sessions": n,
        "opened": len(terms),
        "open_p50_ms": ms(percentile(open_times, 0.5)),
    }
    samples = await type_for(terms, seconds, failures)
    result.update(figures([value for values in samples.values() for value in values]))
    result["failures"] = len(failures)
    result["failure_examples"] = sorted(set(failures))[:5]
    result["teardown_s"] = await close_all(client, terms, chosen[0])
    return result


async def main(arguments: argparse.Namespace) -> dict[str, t.Any]:
    lab = Lab()
    swarm = await asyncio.to_thread(Swarm, 3)
    client = Client()
    results: dict[str, t.Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "n": arguments.n,
        "load_average_at_start": os.getloadavg(),
    }
    try:
        await asyncio.to_thread(swarm.start)
        nodes = swarm.nodes
        container = await asyncio.to_thread(
            labelled_container, nodes["n2"], f"jtt-bench-{lab.run_id}"
        )
        services = [
            await asyncio.to_thread(swarm.service, f"bench-{name}", owner=OWNER, tool=TOOL, on=node)
            for name, node in nodes.items()
        ]
        os.environ["DOCKER_HOST"] = nodes["n2"].socket
        plain = lab.start_server("plain", "tool", server_config(arguments.n, None))
        del os.environ["DOCKER_HOST"]
        swarmed = lab.start_server("swarm", "tool", server_config(arguments.n, swarm))
        await lab.wait_ready(plain)
        await lab.wait_ready(swarmed)
        (plain_target,) = targets(plain, [container])
        (swarm_target,) = targets(swarmed, ["swarm/bench-n2"])
        results["open"] = await opens(client, plain_target, swarm_target, arguments.opens)
        results["one_node"] = await spread(
            client, plain, [container], arguments.n, arguments.seconds
        )
        results["three_nodes"] = await spread(
            client, swarmed, [f"swarm/{name}" for name in services], arguments.n, arguments.seconds
        )
        results["load_average_at_end"] = os.getloadavg()
    finally:
        client.close()
        lab.cleanup()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(swarm.remove)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--opens", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    found = asyncio.run(main(arguments))
    text = json.dumps(found, indent=1)
    print(text)
    if arguments.out is not None:
        arguments.out.write_text(text + "\n")
