"""What one MB of a shell's output costs the server, part by part, without Docker.

The output path of a session (``ToolTerminal._pump`` and ``_output``) does, for every read:
decode the UTF-8, queue the text for the screen model, (if it records) write the recording,
build the ``["stdout", text]`` frame and encode it once for every client. The screen model then
works its queue off in the background (its scheduler; libghostty-vt in a worker thread). This
measures each part's CPU time per MB on the same output, paced as a build log is (read a line at
a time, in bursts, then a pause longer than the model's quiet time, so that the model emulates
all of it) or as a flood (4 KiB reads, no pause: the model keeps only the end).

    python benchmarks/output_cost.py [--megabytes 2] [--backend pyghostty] [--runs 3]

Prints a table per stream: CPU ms per MB of each part, and the total.
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import resource
import statistics
import time

from jupyter_tool_terminal.protocol import stdout_frame
from jupyter_tool_terminal.screen import BACKENDS, model_class

#: Bytes of one read of a flood, and of a paced log's burst.
CHUNK = 4096
BURST = 64 * 1024


def build_log(megabytes: float) -> str:
    """A coloured build log: compiler lines with a green or yellow tag, paths, and warnings."""
    lines = []
    size, index = 0, 0
    while size < megabytes * 1e6:
        tag = "\x1b[32m[ OK ]\x1b[0m" if index % 7 else "\x1b[33m[WARN]\x1b[0m"
        line = (
            f"{tag} \x1b[1mCC\x1b[0m src/module_{index % 97:02d}/file_{index}.c -> "
            f"build/obj/file_{index}.o \x1b[2m({index % 1000} ms)\x1b[0m\r\n"
        )
        lines.append(line)
        size += len(line)
        index += 1
    return "".join(lines)


def short_lines(megabytes: float) -> str:
    """``yes | head -c``: two-byte lines (``y`` and a line feed, CRLF on a TTY)."""
    return "y\r\n" * int(megabytes * 1e6 / 3)


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def measure(backend: str, text: str, *, paced: bool) -> dict[str, float]:
    """CPU seconds per MB of each part of the output path for ``text``."""
    data = text.encode()
    model = model_class(backend)(24, 80, scrollback_lines=1000, replay_buffer_size=256 * 1024)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    parts = dict.fromkeys(("decode", "screen feed (queue)", "frame", "encode"), 0.0)
    clock = time.thread_time
    started_process = _process_cpu()
    started_loop = clock()
    if paced:  # (a line per read)
        chunks = data.splitlines(keepends=True)
    else:
        chunks = [data[offset : offset + CHUNK] for offset in range(0, len(data), CHUNK)]
    read = 0
    for index, chunk in enumerate(chunks):
        t0 = clock()
        piece = decoder.decode(chunk)
        t1 = clock()
        model.feed(piece)
        t2 = clock()
        frame = stdout_frame(piece)
        t3 = clock()
        frame.encode("utf-8")
        t4 = clock()
        parts["decode"] += t1 - t0
        parts["screen feed (queue)"] += t2 - t1
        parts["frame"] += t3 - t2
        parts["encode"] += t4 - t3
        read += len(chunk)
        if paced and read >= BURST:
            read = 0
            await asyncio.sleep(0.08)  # (a pause: the model works its queue off)
        elif index % 16 == 0:
            await asyncio.sleep(0)
    await asyncio.sleep(0.08)
    # (until whatever is queued is emulated; no event tells, and a snapshot would add a render)
    while model.queued:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    loop_total = clock() - started_loop
    total = _process_cpu() - started_process
    model.close()
    megabytes = len(data) / 1e6
    hot = sum(parts.values())
    result = {name: value / megabytes for name, value in parts.items()}
    # The rest of the event loop's thread: the scheduler and the model's own steps.
    result["screen model (loop thread)"] = (loop_total - hot) / megabytes
    result["screen model (worker thread)"] = max(total - loop_total, 0.0) / megabytes
    result["total"] = total / megabytes
    return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=2.0)
    parser.add_argument("--backend", choices=BACKENDS, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    args = parser.parse_args()
    backends = [args.backend] if args.backend else list(BACKENDS)
    streams: dict[str, tuple[str, bool]] = {
        "build log, paced": (build_log(args.megabytes), True),
        "two-byte lines, flood": (short_lines(args.megabytes), False),
    }
    out: dict[str, dict[str, float]] = {}
    for backend in backends:
        for name, (text, paced) in streams.items():
            runs = [await measure(backend, text, paced=paced) for _ in range(args.runs)]
            medians = {part: statistics.median(run[part] for run in runs) for part in runs[0]}
            out[f"{backend}: {name}"] = medians
    if args.json:
        print(json.dumps(out, indent=1))
        return
    for title, medians in out.items():
        print(f"\n{title} (CPU ms per MB, median of {args.runs})")
        for part, value in medians.items():
            print(f"  {part:32s} {value * 1000:8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
