"""A jupyter_server extension the benchmark loads into every server it measures: it measures how
late the server's event loop runs a timer (a blocked loop runs it late), so that a stall can be
told apart from a slow machine. ``GET /bench/lag`` returns the lateness since the last call.

It also serves ``/bench/echo``, a terminado-protocol WebSocket without a shell behind it: each
``stdin`` frame comes straight back as ``stdout`` (a carriage return as a new line and the
``prompt`` query argument). Typing into it measures what one WebSocket hop through this very
server costs, the part of every echo that no terminal backend can remove.

With ``BENCH_CPU_MS`` set, every callback the event loop runs is timed in CPU time of the loop's
thread (which the machine's load does not inflate, unlike wall time): those that took more
are counted by what they ran (a task's coroutine, or the callback's name) with their largest
CPU time, and ``GET /bench/stalls`` returns them too (``cpu``).

With ``BENCH_STALL_MS`` set in its environment, a thread also samples what the event loop runs
whenever it is that many milliseconds late (the loop's thread's stack, its innermost frames of
the project, tornado or asyncio); ``GET /bench/stalls`` returns the samples counted by stack
and resets them. A stall spent waiting in ``select`` is the machine's, not the server's, and is
not counted. That is how a close or an open that holds the loop is found (``--stalls``).

Only the benchmark's own servers load it (``PYTHONPATH`` points at this folder).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import math
import os
import sys
import threading
import time
import traceback
import typing as t

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web, websocket
from tornado.ioloop import IOLoop

#: How often the timer is asked to fire.
TICK = 0.01
#: At most this many lateness samples are kept between two reads.
MAX_SAMPLES = 200_000

#: (lateness, seconds of garbage collection during that tick) per tick.
_samples: list[tuple[float, float]] = []
_task: list[asyncio.Task[None]] = []
_gc = {"start": 0.0, "in_tick": 0.0, "max": 0.0, "full": 0}


def _on_gc(phase: str, info: dict[str, int]) -> None:
    now = time.perf_counter()
    if phase == "start":
        _gc["start"] = now
        return
    pause = now - _gc["start"]
    _gc["in_tick"] += pause
    _gc["max"] = max(_gc["max"], pause)
    if info.get("generation") == 2:
        _gc["full"] += 1


async def _probe() -> None:
    while True:
        start = time.perf_counter()
        _gc["in_tick"] = 0.0
        await asyncio.sleep(TICK)
        if len(_samples) < MAX_SAMPLES:
            _samples.append((time.perf_counter() - start - TICK, _gc["in_tick"]))


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


#: Stacks of the event loop's thread seen while it was late, counted (``BENCH_STALL_MS``).
_stalls: collections.Counter[str] = collections.Counter()
_heartbeat = [time.perf_counter()]


async def _beat() -> None:
    while True:
        _heartbeat[0] = time.perf_counter()
        await asyncio.sleep(0.001)


def _watch(thread_id: int, late: float) -> None:
    """Sample the loop thread's stack whenever its heartbeat is ``late`` seconds old."""
    sampled_beat = 0.0
    while True:
        time.sleep(late / 4)
        beat = _heartbeat[0]
        if time.perf_counter() - beat < late or beat == sampled_beat:
            continue
        sampled_beat = beat  # one sample per stall
        frame = sys._current_frames().get(thread_id)
        if frame is None:
            continue
        stack = traceback.extract_stack(frame)
        if stack and stack[-1].name in ("select", "poll", "_run_once"):
            continue  # waiting for events: the loop is idle, the machine was busy
        # The innermost frames of what ran (the library frames below them say little).
        shown = [f"{_file_name(f.filename)}:{f.lineno} {f.name}" for f in stack[-6:]]
        _stalls[" <- ".join(reversed(shown))] += 1


def _file_name(filename: str) -> str:
    parts = filename.split(os.sep)
    return "/".join(parts[-2:])


#: Callbacks that took more than ``BENCH_CPU_MS`` of the loop thread's CPU: (count, max ms).
_heavy: dict[str, list[float]] = {}


def _callback_name(handle: asyncio.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    task = getattr(callback, "__self__", None)
    if isinstance(task, asyncio.Task):
        coro = task.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = ""
        if frame is not None:
            owner = frame.f_locals.get("self")
            request = getattr(owner, "request", None)
            of = f" of {type(owner).__name__}" if owner is not None else ""
            if request is not None:
                of += f" {request.method}"
            where = f"{of} at line {frame.f_lineno}"
        return f"task {getattr(coro, '__qualname__', coro)}{where}"
    return getattr(callback, "__qualname__", repr(callback))


def _time_callbacks(limit: float) -> None:
    """Count the loop's callbacks that take more than ``limit`` seconds of its thread's CPU."""
    run = asyncio.events.Handle._run

    def timed(handle: asyncio.Handle) -> None:
        began = time.thread_time()
        try:
            run(handle)
        finally:
            spent = time.thread_time() - began
            if spent > limit:
                # Named after the run: a task's frame then shows where it stopped.
                entry = _heavy.setdefault(_callback_name(handle), [0, 0.0])
                entry[0] += 1
                entry[1] = max(entry[1], round(spent * 1000, 3))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]


class StallsHandler(APIHandler):
    """The loop's stacks sampled while it was late, and its heavy callbacks, since the last
    read (and reset)."""

    @web.authenticated
    async def get(self) -> None:
        found = {
            "stalls": dict(_stalls.most_common(20)),
            "cpu": dict(sorted(_heavy.items(), key=lambda item: -item[1][1])[:20]),
        }
        _stalls.clear()
        _heavy.clear()
        self.finish(json.dumps(found))


class LagHandler(APIHandler):
    """The timer lateness since the last read (and reset)."""

    @web.authenticated
    async def get(self) -> None:
        ticks = list(_samples)
        _samples.clear()
        lags = [lag for lag, _ in ticks]
        worst = max(ticks, default=(math.nan, math.nan))
        gc_max, full = _gc["max"], _gc["full"]
        _gc.update(max=0.0, full=0)
        self.finish(
            json.dumps(
                {
                    "ticks": len(ticks),
                    "p50_ms": round(_percentile(lags, 0.5) * 1000, 3),
                    "p99_ms": round(_percentile(lags, 0.99) * 1000, 3),
                    "max_ms": round(worst[0] * 1000, 3),
                    "over_20ms": sum(1 for lag in lags if lag > 0.02),
                    # How much of the worst tick was garbage collection, the longest collection
                    # and how many full (generation 2) collections ran.
                    "max_tick_gc_ms": round(worst[1] * 1000, 3),
                    "gc_max_ms": round(gc_max * 1000, 3),
                    "gc_full": full,
                }
            )
        )


class EchoSocket(websocket.WebSocketHandler):
    """``stdin`` in, the same text out as ``stdout``: a terminal with nothing behind it."""

    def initialize(self, token: str) -> None:
        self._token = token
        self._prompt = ""

    async def get(self, *args: t.Any, **kwargs: t.Any) -> None:
        if self.request.headers.get("Authorization") != f"token {self._token}":
            raise web.HTTPError(403)
        self._prompt = self.get_argument("prompt", "", strip=False)
        await super().get(*args, **kwargs)

    def open(self, *args: str, **kwargs: str) -> None:
        # As the terminal handlers do: a keystroke must not wait for Nagle.
        self.set_nodelay(True)

    def on_message(self, message: str | bytes) -> None:
        frame = json.loads(message)
        if frame[0] == "stdin":
            text = frame[1]
            if "\r" in text:
                text = text.replace("\r", "\r\n") + self._prompt
            self.write_message(json.dumps(["stdout", text]))


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "lagprobe"}]


def _load_jupyter_server_extension(serverapp: t.Any) -> None:
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "/bench/lag"), LagHandler),
            (url_path_join(base, "/bench/stalls"), StallsHandler),
            (
                url_path_join(base, "/bench/echo"),
                EchoSocket,
                {"token": serverapp.identity_provider.token},
            ),
        ],
    )

    def start() -> None:
        _task.append(asyncio.create_task(_probe()))
        cpu_ms = float(os.environ.get("BENCH_CPU_MS") or 0)
        if cpu_ms > 0:
            _time_callbacks(cpu_ms / 1000)
        stall_ms = float(os.environ.get("BENCH_STALL_MS") or 0)
        if stall_ms > 0:
            _task.append(asyncio.create_task(_beat()))
            threading.Thread(
                target=_watch,
                args=(threading.get_ident(), stall_ms / 1000),
                name="lagprobe-stalls",
                daemon=True,
            ).start()

    gc.callbacks.append(_on_gc)
    IOLoop.current().add_callback(start)
