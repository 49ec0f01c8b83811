"""Output that costs a terminal emulator most, for the screen model's tests and benchmarks."""

from __future__ import annotations


def colour_line(index: int, columns: int) -> str:
    """A line whose foreground and background colours change at every cell (what costs an
    emulator most per byte, and makes every rendered scrollback line as long as it gets)."""
    cells = []
    for x in range(columns):
        value = (index * 7919 + x * 104729) % (1 << 24)
        red, green, blue = value >> 16, (value >> 8) & 255, value & 255
        cells.append(
            f"\x1b[38;2;{red};{green};{blue};48;2;{blue};{red};{green}m{chr(0x41 + x % 26)}"
        )
    return "".join(cells) + "\x1b[0m\r\n"
