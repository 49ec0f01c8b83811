"""Several Docker engines against one: the same sessions spread over three engines, and one
engine killed in the middle of the run.

    sudo python3 benchmarks/engines.py [--n 300] [--seconds 20] [--out FILE.json]

Starts three ``dockerd`` of its own (``tests/support/engines.py``: two on sockets, one in a network
namespace over TCP with TLS), one labelled container on each, and two servers in turn:

* **one**: the ``n`` sessions on one engine, the server configured as today (``DOCKER_HOST``);
* **three**: ``n`` sessions spread over the three engines (``c.DockerRuntime.engines``).

For each: open p50 (ms), echo p50/p99 (ms) while every session types (a key every 0.1-0.3 s, as
``scale.py``'s scenario), server RSS per session (MiB), teardown (s). Then, in *three*, engine
``b`` is SIGKILLed while the sessions type: the other engines' echo p99 before and after, how
many of b's sessions were still open (they end with the error frame naming it), and how long a
list took.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import random
import sys
import time
import typing as t
from pathlib import Path

import docker

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

# The benchmark's own helpers, beside this script.
from accounting import tree_memory  # noqa: E402
from client import Client, Term, type_keys, wait_no_sessions  # noqa: E402
from common import MIB, OWNER, TOOL, Target, ms, percentile  # noqa: E402
from lab import Lab, Server  # noqa: E402
from tests.support.engines import Dockerd, Namespace  # noqa: E402

ENGINES = ("a", "b", "tls")
GATE = 16


def server_config(n: int, engines: dict[str, Dockerd] | None) -> str:
    lines = [
        f"c.ToolTerminalApp.tool_types = {{{TOOL!r}: {{'shell': ['/bin/sh']}}}}",
        f"c.ToolTerminalApp.owner = {OWNER!r}",
        f"c.ToolTerminalApp.max_sessions = {n + 50}",
        f"c.ToolTerminalApp.max_sessions_per_user = {n + 50}",
        f"c.ToolTerminalApp.max_clients_per_user = {n + 50}",
        "c.DockerRuntime.threads = 64",
    ]
    if engines is not None:
        lines.append(
            "c.DockerRuntime.engines = "
            + repr({name: host.config for name, host in engines.items()})
        )
    return "\n".join(lines) + "\n"


class EngineHost(t.Protocol):
    """A Docker engine of this machine the benchmark starts (``tests/engines.py``'s ``Dockerd``
    or ``tests/swarm.py``'s swarm ``Node``)."""

    def client(self) -> docker.DockerClient: ...


def labelled_container(host: EngineHost, name: str) -> str:
    """Start a tool instance on ``host``: a container named ``name`` with the benchmark's owner
    and tool labels; its name."""
    client = host.client()
    try:
        container = client.containers.run(
            "jupyter-tool-terminal-test:latest",
            name=name,
            detach=True,
            init=True,
            network_mode="none",
            labels={"jupyter-tool-terminal.owner": OWNER, "jupyter-tool-terminal.tool": TOOL},
        )
        return str(container.name)
    finally:
        client.close()


async def open_all(
    client: Client, targets: list[Target], n: int
) -> tuple[list[tuple[Target, Term]], list[float], list[str]]:
    gate = asyncio.Semaphore(GATE)
    times: list[float] = []
    failures: list[str] = []

    async def one(target: Target) -> tuple[Target, Term] | None:
        async with gate:
            try:
                term, took = await client.open(target, timeout=60, resend_after=5)
            except Exception as error:  # noqa: BLE001 - counted
                failures.append(f"open: {error}")
                return None
            times.append(took)
            return target, term

    opened = await asyncio.gather(*(one(targets[i % len(targets)]) for i in range(n)))
    return [pair for pair in opened if pair is not None], times, failures


async def type_for(
    terms: list[tuple[Target, Term]], seconds: float, failures: list[str]
) -> dict[str, list[float]]:
    """Every session types for ``seconds``; echo samples by target (engine)."""
    samples: dict[str, list[float]] = {target.container: [] for target, _ in terms}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds

    async def typist(target: Target, term: Term) -> None:
        await asyncio.sleep(random.uniform(0, 0.3))
        try:
            await type_keys(
                term,
                samples[target.container],
                count=int(seconds / 0.1) + 1,
                deadline=deadline,
                pause=(0.1, 0.3),
                timeout=10,
            )
        except Exception as error:  # noqa: BLE001 - recorded
            failures.append(f"typing on {target.container}: {type(error).__name__}")

    await asyncio.gather(*(typist(target, term) for target, term in terms))
    return samples


def figures(samples: list[float]) -> dict[str, float]:
    return {
        "echo_p50_ms": ms(percentile(samples, 0.5)),
        "echo_p99_ms": ms(percentile(samples, 0.99)),
        "keystrokes": len(samples),
    }


async def close_all(client: Client, terms: list[tuple[Target, Term]], target: Target) -> float:
    gate = asyncio.Semaphore(GATE)
    loop = asyncio.get_running_loop()

    async def one(target: Target, term: Term) -> None:
        async with gate:
            with contextlib.suppress(Exception):
                await client.close_term(target, term)

    started = loop.time()
    await asyncio.gather(*(one(target, term) for target, term in terms))
    await wait_no_sessions(client, target, 180)
    return round(loop.time() - started, 1)


async def phase(
    lab: Lab,
    client: Client,
    server: Server,
    instances: list[str],
    n: int,
    seconds: float,
    kill: Dockerd | None = None,
) -> dict[str, t.Any]:
    await lab.wait_ready(server)
    base = server.target
    targets = [
        Target(base.key, "tool", base.base, base.token, instance, server_pid=base.server_pid)
        for instance in instances
    ]
    assert base.server_pid is not None
    before = await asyncio.to_thread(tree_memory, base.server_pid)
    terms, open_times, failures = await open_all(client, targets, n)
    after = await asyncio.to_thread(tree_memory, base.server_pid)
    result: dict[str, t.Any] = {
        "sessions": n,
        "opened": len(terms),
        "open_p50_ms": ms(percentile(open_times, 0.5)),
        "rss_mib_per_session": round((after["rss"] - before["rss"]) / max(len(terms), 1) / MIB, 3),
    }
    samples = await type_for(terms, seconds, failures)
    every = [value for values in samples.values() for value in values]
    result.update(figures(every))
    result["by_instance"] = {name: figures(values) for name, values in samples.items()}
    if kill is not None:
        victim = next(name for name in instances if name.startswith(f"{kill.name}/"))
        others = [(target, term) for target, term in terms if target.container != victim]
        ended = [term for target, term in terms if target.container == victim]
        killed_at = time.monotonic()
        kill.kill()
        after_samples = await type_for(others, seconds, failures)
        listed = time.monotonic()
        listing = await client.request(base, "GET", "/tool-terminal/api/instances")
        result["after_kill"] = {
            "list_s": round(time.monotonic() - listed, 2),
            "listed": sorted(item["id"] for item in listing),
            "by_instance": {name: figures(values) for name, values in after_samples.items()},
            "seconds_typed_after_kill": round(time.monotonic() - killed_at, 1),
        }
        # The error frame itself is tests/runtime/test_engines.py's; here: they all ended.
        sessions = await client.request(base, "GET", "/tool-terminal/api/sessions")
        left = [item for item in sessions if item["instance"] == victim]
        result["after_kill"]["victim_sessions"] = len(ended)
        result["after_kill"]["victim_sessions_still_open"] = len(left)
        await asyncio.to_thread(kill.start)
    result["failures"] = len(failures)
    result["failure_examples"] = sorted(set(failures))[:5]
    result["teardown_s"] = await close_all(client, terms, base)
    return result


async def main(arguments: argparse.Namespace) -> dict[str, t.Any]:
    lab = Lab()
    namespace = Namespace()
    hosts = {"a": Dockerd("a"), "b": Dockerd("b"), "tls": Dockerd("tls", namespace)}
    client = Client()
    results: dict[str, t.Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
        "n": arguments.n,
        "seconds": arguments.seconds,
        "load_average_at_start": os.getloadavg(),
    }
    try:
        for host in hosts.values():
            await asyncio.to_thread(host.start)
            await asyncio.to_thread(host.load_image)
        names = {
            name: await asyncio.to_thread(
                labelled_container, host, f"jtt-bench-{lab.run_id}-{host.name}"
            )
            for name, host in hosts.items()
        }
        # One engine, configured as today: DOCKER_HOST.
        os.environ["DOCKER_HOST"] = hosts["a"].socket
        one = lab.start_server("one", "tool", server_config(arguments.n, None))
        del os.environ["DOCKER_HOST"]
        results["one"] = await phase(lab, client, one, [names["a"]], arguments.n, arguments.seconds)
        lab._stop(one)  # the next server measures alone
        three = lab.start_server("three", "tool", server_config(arguments.n, hosts))
        results["three"] = await phase(
            lab,
            client,
            three,
            [f"{name}/{container}" for name, container in names.items()],
            arguments.n,
            arguments.seconds,
            kill=hosts["b"],
        )
        results["load_average_at_end"] = os.getloadavg()
    finally:
        client.close()
        lab.cleanup()
        for host in hosts.values():
            with contextlib.suppress(docker.errors.DockerException, OSError):
                host.remove()
        namespace.close()
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path)
    found = asyncio.run(main(parser.parse_args()))
    text = json.dumps(found, indent=1)
    print(text)
    out = parser.parse_args().out
    if out is not None:
        out.write_text(text + "\n")
