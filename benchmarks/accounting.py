"""Where a measurement's CPU and memory go: the server's process tree, the Docker Engine's
processes, this client, and the whole machine.

Flood figures are CPU milliseconds per megabyte by process group (:class:`CpuMeter`); scale
figures are cores used while sessions type and memory per session (:func:`tree_memory`); churn
figures are the machine's CPU per open/close cycle (:func:`machine_busy_seconds`).
"""

from __future__ import annotations

import contextlib
import time
import typing as t

import psutil


def tree_memory(pid: int) -> dict[str, float]:
    """RSS and PSS (bytes) of a process and every process it started."""
    root = psutil.Process(pid)
    processes = [root, *root.children(recursive=True)]
    rss = pss = 0.0
    count = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            info = process.memory_full_info()
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
            count += 1
    return {"rss": rss, "pss": pss, "processes": count}


def cpu_seconds(processes: t.Iterable[t.Any]) -> float:
    """User + system CPU seconds of some processes (vanished ones count 0)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core, every process) since boot:
    what a runc exec costs shows up in short-lived processes no process list catches."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def engine_processes() -> list[t.Any]:
    """The Docker Engine's processes: dockerd, containerd and the containers' shims."""
    found = []
    for process in psutil.process_iter(["name"]):
        name = process.info.get("name") or ""
        if name in ("dockerd", "containerd") or name.startswith("containerd-shim"):
            found.append(process)
    return found


def server_processes(pid: int | None) -> list[t.Any]:
    """A server's process and every process it started (none without a ``pid``)."""
    if pid is None:
        return []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


#: Where a flood's CPU is counted: the server, the engine, this client, and the whole machine
#: (which also holds the shell's own pipeline and the kernel's terminal work: a flood whose
#: machine figure is far below ``cores x 1000 / MB/s`` is bound by latency, not CPU).
CPU_PARTS = ("server", "engine", "client", "machine")


class CpuMeter:
    """CPU seconds spent while a flood runs, by the server, the engine and this client (this
    process): where a megabyte's CPU goes, and whether the client could be the bottleneck."""

    def __init__(self, server_pid: int | None) -> None:
        self.servers = server_processes(server_pid)
        self.engine = engine_processes()
        self.before = self._now()

    def _now(self) -> list[float]:
        return [
            cpu_seconds(self.servers),
            cpu_seconds(self.engine),
            time.process_time(),
            machine_busy_seconds(),
        ]

    def ms_per_mb(self, nbytes: int) -> dict[str, float]:
        """Milliseconds of CPU per megabyte of output since this meter was made."""
        spent = [b - a for a, b in zip(self.before, self._now(), strict=True)]
        per_mb = [round(seconds * 1e3 / (nbytes / 1e6), 2) for seconds in spent]
        return dict(zip(CPU_PARTS, per_mb, strict=True))
