"""Output end to end: a short-line flood and a paced coloured log, through every path, in turns.

``python benchmarks/output_paths.py [--stream yes|paced] [--bytes N] [--rounds R]
[--paths C,tool,agent,A,B] [--baseline DIR] [--profile FILE]`` starts the paths of ``run.py``
(``references.py``) and, the paths taking turns round by round, times one stream in each from
the command sent to its end marker:

* ``yes``: ``yes | head -c N``, two-byte lines (the PTY makes each ``y\\n`` three bytes): how
  many pieces a second the path takes;
* ``long``: ``yes`` of ``run.py``'s 63-character line (its throughput phase's flood);
* ``paced``: a coloured build log of about N bytes written a line at a time, with a pause of
  80 ms every 700 lines (``awk``, in the shell of the path): what a megabyte of everyday output
  costs the server.

The paths: ``C`` (the Docker SDK's raw exec TTY socket, no server: the floor), ``tool`` (a
terminal of this project's server over its WebSocket), ``agent`` (an agent's ``run_command`` on
the same server, a bare JSON-RPC POST to its MCP endpoint, until its answer), ``A`` and ``B``
(terminado, local and through ``docker exec -it``). Every WebSocket is read by the same plain
blocking loop (:class:`flood.BlockingFrames`), as C's socket is. ``--baseline DIR`` adds
``base`` and ``base-agent``, this project's server running the package found in ``DIR``
(another checkout: the old code in the same run), whose configuration ``--tool-config`` does
not change. Each round prints the seconds, the server's CPU per MB of output (the server
process and its children, by ``psutil``) and the ratio to C of the same round.
``--profile FILE`` runs this project's server under ``cProfile`` (its event loop's thread).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
import typing as t
import urllib.request

import psutil

from accounting import cpu_seconds, server_processes
from common import BenchError, Plan, Target
from flood import FLOOD_LINE, BlockingFrames
from lab import Lab
from references import start_targets, tool_config

START, END = "F_42", "G_42"
#: The paced log's pause, and how many lines come between two pauses.
PAUSE, BURST_LINES = 0.08, 700


def stream_command(stream: str, nbytes: int) -> str:
    """The shell command that writes the stream (without the markers)."""
    if stream == "yes":
        return f"yes | head -c {nbytes}"
    if stream == "long":
        return f"yes {FLOOD_LINE} | head -c {nbytes}"
    lines = nbytes // 90  # a line is about 90 bytes
    line = (
        r"\033[%sm[%s]\033[0m \033[1mCC\033[0m src/module_%02d/file_%d.c -> "
        r"build/obj/file_%d.o \033[2m(%d ms)\033[0m\n"
    )
    return (
        f"awk 'BEGIN {{ for (i = 0; i < {lines}; i++) {{ "
        f'printf "{line}", (i % 7 ? 32 : 33), (i % 7 ? " OK " : "WARN"), i % 97, i, i, '
        f"i % 1000; fflush(); "
        f'if (i % {BURST_LINES} == {BURST_LINES - 1}) system("sleep {PAUSE}") }} }}\''
    )


def typed_line(stream: str, nbytes: int) -> str:
    """The typed line: markers that the echo of the line itself never contains."""
    return f"echo F_$((6*7)); {stream_command(stream, nbytes)}; echo G_$((6*7))\r"


def check(stream: str, body: str, nbytes: int) -> int:
    """Check what arrived between the markers; its size in bytes."""
    if stream == "yes" and body.count("y") != nbytes // 2:
        raise BenchError(f"{body.count('y')} lines arrived, expected {nbytes // 2}")
    if stream == "long" and body.count(FLOOD_LINE) != nbytes // (len(FLOOD_LINE) + 1):
        expected = nbytes // (len(FLOOD_LINE) + 1)
        raise BenchError(f"{body.count(FLOOD_LINE)} lines arrived, expected {expected}")
    if stream == "paced" and body.count("CC") != nbytes // 90:
        raise BenchError(f"{body.count('CC')} lines arrived, expected {nbytes // 90}")
    return len(body.encode())


def thread_times(pid: int | None) -> dict[int, float]:
    """CPU seconds of each thread of process ``pid`` (none without one)."""
    if pid is None:
        return {}
    with contextlib.suppress(psutil.Error):
        return {
            thread.id: thread.user_time + thread.system_time
            for thread in psutil.Process(pid).threads()
        }
    return {}


def thread_share(pid: int | None, before: dict[int, float]) -> float:
    """The share of the process's CPU since ``before`` spent by its main thread (the event
    loop's; the rest: the screen model's worker, the runtime's thread pool)."""
    after = thread_times(pid)
    spent = {ident: value - before.get(ident, 0.0) for ident, value in after.items()}
    total = sum(spent.values())
    return spent.get(pid or 0, 0.0) / total if total > 0 else 0.0


def raw_stream(api: t.Any, container: str, stream: str, nbytes: int) -> tuple[float, int]:
    """Seconds of the stream on the raw exec TTY socket, and the bytes between its markers."""
    created = api.exec_create(container, ["/bin/sh"], stdin=True, tty=True)
    hijacked = api.exec_start(created["Id"], tty=True, socket=True)
    sock = hijacked._sock.dup()
    hijacked._sock.close()
    hijacked.close()
    sock.settimeout(600)
    try:
        sock.sendall(b"echo READY_$((6*7))\r")
        seen = b""
        while b"READY_42" not in seen:
            seen += sock.recv(1 << 20)
        pieces: list[bytes] = []
        tail = b""
        started = time.perf_counter()
        sock.sendall(typed_line(stream, nbytes).encode())
        while END.encode() not in tail:
            piece = sock.recv(1 << 20)
            if not piece:
                raise BenchError("the raw socket closed during the stream")
            pieces.append(piece)
            tail = (tail + piece)[-64:]
        took = time.perf_counter() - started
        text = b"".join(pieces).decode(errors="replace")
        size = check(stream, text[text.rindex(START + "\r\n") + 6 : text.rindex(END)], nbytes)
        sock.sendall(b"exit\r")
    finally:
        sock.close()
    return took, size


def http(target: Target, method: str, path: str, body: t.Any = None) -> t.Any:
    """A REST request to the target's server; its JSON answer."""
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(
        target.base + path, data=data, method=method, headers=target.headers()
    )
    with urllib.request.urlopen(req, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def ws_stream(target: Target, stream: str, nbytes: int) -> tuple[float, int]:
    """Seconds of the stream through a new terminal of a server, read over its WebSocket."""
    if target.kind == "tool":
        ident = http(target, "POST", "/tool-terminal/api/sessions", {"instance": target.container})[
            "id"
        ]
        path, close = f"/tool-terminal/websocket/{ident}", f"/tool-terminal/api/sessions/{ident}"
    else:
        ident = http(target, "POST", "/api/terminals")["name"]
        path, close = f"/terminals/websocket/{ident}", f"/api/terminals/{ident}"
    frames = BlockingFrames(target, path)
    try:
        frames.send(["set_size", 24, 80, 0, 0])
        frames.send(["stdin", "echo READY_$((6*7))\r"])
        seen = b""
        while b"READY_42" not in seen:
            seen += frames.stdout()
        pieces: list[bytes] = []
        tail = b""
        started = time.perf_counter()
        frames.send(["stdin", typed_line(stream, nbytes)])
        while END.encode() not in tail:
            piece = frames.stdout()
            pieces.append(piece)
            tail = (tail + piece)[-64:]
        took = time.perf_counter() - started
        text = json.loads(b'"' + b"".join(pieces) + b'"')
        size = check(stream, text[text.rindex(START + "\r\n") + 6 : text.rindex(END)], nbytes)
    finally:
        frames.close()
        with contextlib.suppress(Exception):
            http(target, "DELETE", close)
    return took, size


def mcp_call(target: Target, token: str, name: str, arguments: dict[str, t.Any]) -> t.Any:
    """One MCP ``tools/call`` as a bare JSON-RPC POST; its structured answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    body["params"] = {"name": name, "arguments": arguments}
    req = urllib.request.Request(
        target.base + "/tool-terminal/mcp",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-11-25",
        },
    )
    with urllib.request.urlopen(req, timeout=600) as response:
        result = json.loads(response.read())["result"]
    if result.get("isError"):
        raise BenchError(f"{name}: {result}")
    return result["structuredContent"]


class Agent:
    """An agent with control of the owner's terminals, and its terminal on ``target``."""

    def __init__(self, target: Target) -> None:
        self.target = target
        agent = http(target, "POST", "/tool-terminal/api/agents", {"name": "bench"})
        http(target, "POST", f"/tool-terminal/api/agents/{agent['id']}/control", {"minutes": 60})
        self.token = agent["token"]
        opened = mcp_call(target, self.token, "open_terminal", {"instance": target.container})
        self.session = opened["session"]

    def stream(self, stream: str, nbytes: int) -> tuple[float, int]:
        """Seconds of ``run_command`` of the stream (to its answer), and the bytes it printed
        (as the answer counts them: characters, without CR)."""
        started = time.perf_counter()
        answer = mcp_call(
            self.target,
            self.token,
            "run_command",
            {"session": self.session, "command": stream_command(stream, nbytes), "timeout": 600},
        )
        took = time.perf_counter() - started
        if answer["exit_code"] != 0 or not answer["truncated"]:
            raise BenchError(f"run_command: {str(answer)[:300]}")
        return took, nbytes * 3 // 2 if stream == "yes" else nbytes


async def run(args: argparse.Namespace) -> int:
    paths = args.paths.split(",")
    plan = Plan.make(quick=True)
    # The agents this creates are kept in memory only, not in the user's Jupyter data dir.
    plan.tool_config = "c.AgentStore.path = ''\n"
    baseline = tool_config(plan)
    plan.tool_config += args.tool_config
    lab = Lab()
    loads = [os.getloadavg()[0]]
    times: dict[str, list[float]] = {path: [] for path in paths}
    cpu: dict[str, list[float]] = {path: [] for path in paths}
    try:
        servers = {"tool"} if {"tool", "agent"} & set(paths) else set()
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        container, _, targets = await start_targets(
            lab, plan, {"C", *servers, *({"A", "B"} & set(paths))}, profile
        )
        if args.baseline:
            base = lab.start_server("base", "tool", baseline, container, (), args.baseline)
            await lab.wait_ready(base)
            targets["base"] = base.target
        agents = {
            path: Agent(targets["base" if path == "base-agent" else "tool"])
            for path in paths
            if path in ("agent", "base-agent")
        }
        for round_ in range(args.rounds):
            for path in paths:
                target = agents[path].target if path in agents else targets[path]
                processes = server_processes(target.server_pid)
                before = cpu_seconds(processes)
                threads_before = thread_times(target.server_pid)
                if path == "C":
                    took, size = await asyncio.to_thread(
                        raw_stream, lab.docker.api, container, args.stream, args.bytes
                    )
                elif path in agents:
                    took, size = await asyncio.to_thread(
                        agents[path].stream, args.stream, args.bytes
                    )
                else:
                    took, size = await asyncio.to_thread(ws_stream, target, args.stream, args.bytes)
                per_mb = (cpu_seconds(processes) - before) * 1e3 / (size / 1e6)
                loop_share = thread_share(target.server_pid, threads_before)
                times[path].append(took)
                cpu[path].append(per_mb)
                loads.append(os.getloadavg()[0])
                ratio = f", {took / times['C'][-1]:.2f}x C" if "C" in times and path != "C" else ""
                print(
                    f"round {round_ + 1} {path}: {took:.2f} s{ratio}, server CPU "
                    f"{per_mb:.0f} ms/MB ({loop_share:.0%} in its main thread), "
                    f"{size / 1e6:.2f} MB, load {loads[-1]:.1f}",
                    flush=True,
                )
    finally:
        await asyncio.to_thread(lab.cleanup)
    print(f"{args.stream}, {args.bytes} bytes, load (1 min) {min(loads):.1f}-{max(loads):.1f}")
    for path in paths:
        ratios = ""
        if "C" in times and path != "C":
            per_round = [a / b for a, b in zip(times[path], times["C"], strict=True)]
            ratios = "; per round over C " + ", ".join(f"{ratio:.2f}x" for ratio in per_round)
        print(
            f"{path}: median {statistics.median(times[path]):.2f} s{ratios}; server CPU "
            f"{', '.join(f'{value:.0f}' for value in cpu[path])} ms/MB"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", choices=("yes", "long", "paced"), default="yes")
    parser.add_argument("--bytes", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--paths", default="C,tool,agent")
    parser.add_argument("--baseline", default="", help="a directory with another checkout")
    parser.add_argument("--profile", default="", help="cProfile this project's server")
    parser.add_argument(
        "--tool-config", default="", help="configuration lines added to this project's server"
    )
    args = parser.parse_args(argv)
    args.profile = os.path.abspath(args.profile) if args.profile else ""
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
