"""A jupyter_server extension the benchmark loads into every server it measures: it measures how
late the server's event loop runs a timer (a blocked loop runs it late), so that a stall can be
told apart from a slow machine. ``GET /bench/lag`` returns the lateness since the last call.

It also serves ``/bench/echo``, a terminado-protocol WebSocket without a shell behind it: each
``stdin`` frame comes straight back as ``stdout`` (a carriage return as a new line and the
``prompt`` query argument). Typing into it measures what one WebSocket hop through this very
server costs, the part of every echo that no terminal backend can remove.

Only the benchmark's own servers load it (``PYTHONPATH`` points at this folder).
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import time
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
            (
                url_path_join(base, "/bench/echo"),
                EchoSocket,
                {"token": serverapp.identity_provider.token},
            ),
        ],
    )

    def start() -> None:
        _task.append(asyncio.create_task(_probe()))

    gc.callbacks.append(_on_gc)
    IOLoop.current().add_callback(start)
