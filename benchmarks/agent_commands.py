"""An agent's command latency: ``run_command`` of ``true`` over MCP, against ``docker exec``.

``python benchmarks/agent_commands.py [--count N]`` starts a ``jupyter server`` with this
extension (the Docker runtime) and a busybox tool instance of its own, creates an agent over REST
and grants it control, then measures, side by side in one run:

* ``mcp``: ``run_command`` of ``true`` through the official Python MCP SDK client (one
  connection, its default ``mode="auto"``, which negotiates the per-request 2026-07-28 protocol
  with this server), at the client: typed into the terminal's own shell; ``mcp_legacy``: the
  same client pinned to the ``initialize`` handshake era (2025-11-25), which the SDK's server
  serves through a transport of its own per request;
* ``exec``: a fresh ``docker exec CONTAINER true`` per command (the CLI), how agents run commands
  in containers today;
* ``raw``: the round trip of ``true`` through one long-lived raw exec TTY socket (the Docker
  SDK), no server at all: the floor of a typed command;
* ``post``: the same ``run_command`` and ``list_terminals`` as bare JSON-RPC POSTs on one kept-alive
  HTTP connection (what the SDK client sends, without its machinery): the server's own part of
  an MCP call, which shows whether the SDK client is the bottleneck.

* ``floor``: the same SDK client (both eras) calling a tool that does nothing on the SDK's own
  server (``MCPServer``, stateless, JSON answers, under uvicorn, in a process of its own), and
  bare POSTs to it: what any MCP call through this SDK costs, whatever the server does.
* ``flood``: ``run_command`` of a 10 MB output (1 000 000 numbered lines): how long it took, the
  size of the (bounded) answer, how much the server's RSS grew, and that the terminal answers
  ``echo`` afterwards.

It prints p50/p99 in milliseconds and the ratios; the container and the server are removed at
the end, also on failure.

``--agents N`` measures instead what N agents cost a human in the same server: a person's echo
(keystroke to echo over the terminal's WebSocket, as the main benchmark types) alone, then
while N agents, each in a terminal of its own, run ``true`` back to back over MCP.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t
import urllib.request
from pathlib import Path

import docker
import httpx2
import psutil
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from client import Client as BenchClient
from client import type_keys
from common import Target

REPO = Path(__file__).resolve().parent.parent
IMAGE = "jupyter-tool-terminal-test:latest"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def figures(seconds: list[float]) -> dict[str, float]:
    millis = [value * 1000 for value in seconds]
    return {
        "p50": round(statistics.median(millis), 2),
        "p99": round(percentile(millis, 0.99), 2),
        "n": len(millis),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def request(url: str, token: str, method: str = "GET", body: t.Any = None) -> t.Any:
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


@contextlib.contextmanager
def server(owner: str, **settings: t.Any) -> t.Iterator[tuple[str, str, int]]:
    """A jupyter server with the extension (and ToolTerminalApp ``settings``); yields (base
    URL, token, the server's pid)."""
    token = secrets.token_hex(16)
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        config = {
            "ServerApp": {"jpserver_extensions": {"jupyter_tool_terminal": True}},
            "ToolTerminalApp": {
                "runtime": "docker",
                "owner": owner,
                "agents_file": "",
                "tool_types": {"sandbox": {"display_name": "Sandbox", "shell": ["/bin/sh"]}},
                **settings,
            },
        }
        Path(folder, "jupyter_server_config.json").write_text(json.dumps(config))
        env = {**os.environ, "JUPYTER_CONFIG_DIR": folder, "PYTHONPATH": str(REPO)}
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                f"--port={port}",
                "--ip=127.0.0.1",
                "--no-browser",
                "--allow-root",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={folder}",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}/"
        try:
            for _ in range(600):
                with contextlib.suppress(OSError):
                    request(base + "api/status", token)
                    break
                time.sleep(0.1)
            yield base, token, process.pid
        finally:
            process.terminate()
            process.wait(30)


async def timed_calls(
    client: Client, count: int, name: str, arguments: dict[str, str]
) -> list[float]:
    """``count`` calls of tool ``name`` through ``client`` (after 5 to warm up), each timed."""
    for _ in range(5):
        await client.call_tool(name, arguments)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        result = await client.call_tool(name, arguments)
        times.append(time.perf_counter() - started)
        assert not result.is_error, result
        assert (result.structured_content or {}).get("exit_code", 0) == 0, result
    return times


def rss_mib(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 2**20


async def measure_mcp(
    url: str, agent_token: str, instance: str, count: int, server_pid: int
) -> dict[str, t.Any]:
    """run_command of ``true`` and list_terminals through the SDK client in both eras, the
    same as bare POSTs, then the 10 MB output (see the module docstring)."""
    results: dict[str, t.Any] = {}
    for key, mode in (("mcp", "auto"), ("mcp_legacy", "legacy")):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent_token}"}, timeout=120)
        transport = streamable_http_client(url, http_client=http)
        async with http, Client(transport, mode=t.cast(t.Any, mode)) as client:
            opened = await client.call_tool("open_terminal", {"instance": instance})
            session = opened.structured_content["session"]
            run = {"session": session, "command": "true"}
            results[key] = await timed_calls(client, count, "run_command", run)
            results[key + "_call"] = await timed_calls(client, count, "list_terminals", {})
            if mode == "auto":
                results["post"], results["post_call"] = await measure_post(
                    url, agent_token, session, count
                )
                results["flood"] = await measure_flood(client, session, server_pid)
            await client.call_tool("close_terminal", {"session": session})
    return results


async def measure_flood(client: Client, session: str, server_pid: int) -> dict[str, t.Any]:
    """A command printing 10 MB: the answer's size, the time, the server's RSS growth, and the
    terminal's next command."""
    before = rss_mib(server_pid)
    started = time.perf_counter()
    command = "seq -w 1 1000000 | sed 's/^/line/'"  # 12 bytes a line: 12 MB
    flood = await client.call_tool(
        "run_command", {"session": session, "command": command, "timeout": 120}
    )
    took = time.perf_counter() - started
    grown = rss_mib(server_pid) - before
    answer = flood.structured_content
    assert answer["exit_code"] == 0, answer
    assert answer["truncated"], answer
    after = await client.call_tool(
        "run_command", {"session": session, "command": "echo still-here"}
    )
    return {
        "seconds": round(took, 2),
        "answer_chars": len(answer["output"]),
        "server_rss_growth_mib": round(grown, 1),
        "usable_after": after.structured_content["output"] == "still-here\n",
    }


async def measure_post(
    url: str, agent_token: str, session: str, count: int
) -> tuple[list[float], list[float]]:
    """``run_command`` of ``true`` and ``list_terminals`` as bare JSON-RPC POSTs."""
    headers = {
        "Authorization": f"Bearer {agent_token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    async def timed(http: httpx2.AsyncClient, name: str, arguments: dict[str, str]) -> float:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": name, "arguments": arguments}
        started = time.perf_counter()
        response = await http.post(url, json=body)
        took = time.perf_counter() - started
        answer = response.json()
        assert not answer["result"].get("isError"), answer
        return took

    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        run = {"session": session, "command": "true"}
        for _ in range(5):  # warm-up
            await timed(http, "run_command", run)
        commands = [await timed(http, "run_command", run) for _ in range(count)]
        calls = [await timed(http, "list_terminals", {}) for _ in range(count)]
    return commands, calls


def serve_floor(port: int) -> None:
    """The SDK's own server with one tool that does nothing (run in a process of its own)."""
    floor = MCPServer("floor")

    @floor.tool()
    def nothing() -> str:
        """Does nothing."""
        return ""

    app = floor.streamable_http_app(json_response=True, stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


async def measure_floor(count: int) -> dict[str, list[float]]:
    """The SDK client's calls (both eras) of a tool that does nothing on the SDK's own server,
    then the same as bare POSTs."""
    port = free_port()
    process = multiprocessing.get_context("spawn").Process(target=serve_floor, args=(port,))
    process.start()
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            await asyncio.sleep(0.05)
        results = {}
        for key, mode in (("floor", "auto"), ("floor_legacy", "legacy")):
            async with (
                httpx2.AsyncClient(timeout=60) as http,
                Client(
                    streamable_http_client(url, http_client=http), mode=t.cast(t.Any, mode)
                ) as client,
            ):
                results[key] = await timed_calls(client, count, "nothing", {})
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": "nothing", "arguments": {}}
        posts = []
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            for index in range(count + 5):
                started = time.perf_counter()
                response = await http.post(url, json=body)
                took = time.perf_counter() - started
                assert "result" in response.json(), response.text
                if index >= 5:
                    posts.append(took)
        results["floor_post"] = posts
        return results
    finally:
        process.terminate()
        process.join(10)


class Working:
    """Agents that wait, each after its first command, until all of them ran one."""

    def __init__(self, agents: int) -> None:
        self.waiting = agents
        self.all = asyncio.Event()

    async def started(self) -> None:
        self.waiting -= 1
        if not self.waiting:
            self.all.set()
        await self.all.wait()


async def agent_at_work(
    url: str, agent_token: str, instance: str, working: Working, stop: asyncio.Event
) -> int:
    """An agent running ``true`` in a terminal of its own until ``stop``; how many it ran once
    every agent ran its first."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent_token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as mcp:
        opened = await mcp.call_tool("open_terminal", {"instance": instance})
        session = opened.structured_content["session"]
        ran = -1
        while ran < 0 or not stop.is_set():
            result = await mcp.call_tool("run_command", {"session": session, "command": "true"})
            assert result.structured_content["exit_code"] == 0, result
            ran += 1
            if ran == 0:
                await working.started()
        await mcp.call_tool("close_terminal", {"session": session})
        return ran


def agents_at_work(
    url: str, tokens: list[str], instance: str, ready: t.Any, stop: t.Any, ran: t.Any
) -> None:
    """A process of agents at work (so that the person's client is not slowed by theirs):
    sets ``ready`` once every agent ran a command, works until ``stop``, puts how many
    commands they ran after ``ready`` into ``ran``."""

    async def main() -> None:
        working, stopped = Working(len(tokens)), asyncio.Event()
        workers = [
            asyncio.create_task(agent_at_work(url, key, instance, working, stopped))
            for key in tokens
        ]
        await working.all.wait()
        ready.set()
        while not stop.is_set():  # noqa: ASYNC110 - (another process's flag: nothing to await)
            await asyncio.sleep(0.05)
        stopped.set()
        ran.put(sum(await asyncio.gather(*workers)))

    asyncio.run(main())


async def measure_human_beside_agents(
    base: str, token: str, instance: str, agents: int, keys: int
) -> dict[str, t.Any]:
    """A person's echo alone, then beside ``agents`` agents at work (see the docstring)."""
    target = Target(key="tool", kind="tool", base=base.rstrip("/"), token=token, container=instance)
    client = BenchClient()
    context = multiprocessing.get_context("spawn")
    ready, stop, ran = context.Event(), context.Event(), context.Queue()
    try:
        term, _ = await client.open(target)
        alone: list[float] = []
        await type_keys(term, alone, count=keys)
        tokens = []
        for index in range(agents):
            agent = request(base + "tool-terminal/api/agents", token, "POST", {"name": f"a{index}"})
            request(
                base + f"tool-terminal/api/agents/{agent['id']}/control",
                token,
                "POST",
                {"minutes": 60},
            )
            tokens.append(agent["token"])
        url = base + "tool-terminal/mcp"
        worker = context.Process(
            target=agents_at_work, args=(url, tokens, instance, ready, stop, ran)
        )
        worker.start()
        beside: list[float] = []
        try:
            await asyncio.to_thread(ready.wait, 120)
            started = time.perf_counter()
            await type_keys(term, beside, count=keys)
            took = time.perf_counter() - started
        finally:
            stop.set()
            commands = await asyncio.to_thread(ran.get, True, 120)
            worker.join(30)
        await client.close_term(target, term)
    finally:
        client.close()
    return {
        "echo_alone": figures(alone),
        "echo_beside_agents": figures(beside),
        "agents": agents,
        "agent_commands_per_s": round(commands / took, 1),
    }


def measure_exec(container: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        subprocess.run(["docker", "exec", container, "true"], check=True)
        times.append(time.perf_counter() - started)
    return times


def measure_raw(api: t.Any, container: str, count: int) -> list[float]:
    exec_id = api.exec_create(container, ["/bin/sh"], tty=True, stdin=True)["Id"]
    sock = api.exec_start(exec_id, tty=True, socket=True)._sock
    sock.settimeout(10)

    def round_trip(marker: bytes) -> None:
        sock.sendall(b"true; echo " + marker[:2] + b"''" + marker[2:] + b"$?\n")
        seen = b""
        while marker + b"0" not in seen:
            seen = seen[-200:] + sock.recv(65536)
            # busybox's line editor asks where the cursor is at each prompt and waits 20 ms
            # for the answer a terminal would give: answer it, as a terminal does.
            if b"\x1b[6n" in seen:
                sock.sendall(b"\x1b[1;1R")
                seen = seen.replace(b"\x1b[6n", b"")

    times: list[float] = []
    try:
        for index in range(count + 5):
            marker = f"MK{index}X".encode()
            started = time.perf_counter()
            round_trip(marker)
            if index >= 5:  # the first ones warm up
                times.append(time.perf_counter() - started)
    finally:
        sock.close()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--agents", type=int, default=0, help="agents beside a typing person")
    args = parser.parse_args(argv)
    client = docker.from_env()
    owner = "bench"
    name = f"jtt-bench-agent-{secrets.token_hex(4)}"
    container = client.containers.run(
        IMAGE,
        name=name,
        detach=True,
        init=True,
        network_mode="none",
        labels={"jupyter-tool-terminal.owner": owner, "jupyter-tool-terminal.tool": "sandbox"},
    )
    try:
        if args.agents:
            limits = {"max_agents_per_user": args.agents, "max_sessions_per_user": args.agents + 1}
            with server(owner, **limits) as (base, token, _):
                outcome = asyncio.run(
                    measure_human_beside_agents(base, token, name, args.agents, args.count)
                )
            print(json.dumps(outcome, indent=1))
            return 0
        with server(owner) as (base, token, server_pid):
            agent = request(base + "tool-terminal/api/agents", token, "POST", {"name": "bench"})
            request(
                base + f"tool-terminal/api/agents/{agent['id']}/control",
                token,
                "POST",
                {"minutes": 60},
            )
            measured = asyncio.run(
                measure_mcp(
                    base + "tool-terminal/mcp", agent["token"], name, args.count, server_pid
                )
            )
        measured.update(asyncio.run(measure_floor(args.count)))
        exec_times = measure_exec(name, min(args.count, 100))
        raw = measure_raw(client.api, container.id, args.count)
    finally:
        container.remove(force=True)
        client.close()
    flood = measured.pop("flood")
    measured.update(exec=exec_times, raw=raw)
    results: dict[str, t.Any] = {key: figures(values) for key, values in measured.items()}
    results["flood"] = flood
    print(json.dumps(results, indent=1))
    speedup = results["exec"]["p50"] / results["mcp"]["p50"]
    print(
        f"run_command p50 {results['mcp']['p50']} ms, p99 {results['mcp']['p99']} ms; "
        f"docker exec p50 {results['exec']['p50']} ms ({speedup:.1f}x slower); raw exec round "
        f"trip p50 {results['raw']['p50']} ms; an MCP call alone (list_terminals) p50 "
        f"{results['mcp_call']['p50']} ms; pinned to the initialize era run_command p50 "
        f"{results['mcp_legacy']['p50']} ms, p99 {results['mcp_legacy']['p99']} ms; as bare "
        f"POSTs (the server's part) run_command p50 {results['post']['p50']} ms, "
        f"list_terminals p50 {results['post_call']['p50']} ms; "
        f"the floor (this SDK client, a tool that does nothing on the SDK's own server) p50 "
        f"{results['floor']['p50']} ms (initialize era {results['floor_legacy']['p50']} ms), as "
        f"bare POSTs {results['floor_post']['p50']} ms; 10 MB of output: {flood['seconds']} s, "
        f"answer {flood['answer_chars']} characters, server RSS +{flood['server_rss_growth_mib']} "
        f"MiB, terminal usable after: {flood['usable_after']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
