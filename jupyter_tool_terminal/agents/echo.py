"""What the owner sees of an agent's command: the command, as a person's typed one looks.

``run_command`` types its command with the framing that lets the shell report where the output
starts and ends (``shell.py``). The terminal echoes all of that, nonce and ``printf`` included.
So the typed line starts by asking (an escape sequence of its own, ``OSC 6973 ; P``) where its
echo lies, and then reads one line from the terminal: the server answers with a ``printf``
format that moves the cursor back to where the echo began, erases from there down, and writes
the command instead. The echo's place is found on the screen model, which has seen the echo by
then: the shell asks only once it read every typed line.

The echo's geometry depends on the line editor (busybox and readline wrap long lines; readline
without a terminal description scrolls them horizontally, on one row; dash leaves the echo to
the terminal driver), so it is not computed but looked for: the rows above the cursor, joined,
are searched for the start of the typed line. Where it is not found whole (a line scrolled
horizontally), the first typed line's row ends with what was typed last on it; the rows of the
typed lines are then taken whole, and the prompt (read from the screen before typing) is
written again in front of the command. When neither holds, the answer is empty and nothing is
erased.
"""

from __future__ import annotations

import typing as t

#: The variable the shell reads the answer into, and the one that holds a one-line command.
ANSWER_VARIABLE = "__jtt_at"
COMMAND_VARIABLE = "__jtt_c"
#: The longest first line of a multi-line command shown to the owner.
SHOWN_LINE = 120


def ask_position(marker_osc: str, nonce: str) -> str:
    """What the typed line starts with: the question, then the read of its answer."""
    return f"printf '\\033]{marker_osc};P;{nonce}\\007'; IFS= read -r {ANSWER_VARIABLE}"


def shown(command: str) -> str:
    """The command as the owner is shown it (quoted for the shell): one line, or the first
    line of several followed by ``...``; tabs as spaces."""
    lines = command.split("\n")
    first = lines[0].replace("\t", "    ")
    if len(lines) > 1 or len(first) > SHOWN_LINE:
        first = first[:SHOWN_LINE] + " ..."
    return "'" + first.replace("'", "'\\''") + "'"


def _format_text(text: str) -> str:
    """``text`` as literal text in a ``printf`` format."""
    return text.replace("\\", "\\\\").replace("%", "%%")


def answer(
    lines: t.Sequence[str],
    cols: int,
    cursor_row: int,
    *,
    typed_start: str,
    typed_end: str,
    typed_lines: int,
    prompt: str,
) -> str:
    """The ``printf`` format that replaces the echo with the command (its ``%s``), from the
    screen as it is when the shell asks: the echo ends on the row above ``cursor_row``.
    ``typed_start`` and ``typed_end`` are how the first typed line begins and ends on the
    screen; ``typed_lines`` how many lines were typed; ``prompt`` the text in front of the
    cursor before typing. Empty when the echo cannot be found."""
    padded = [line.ljust(cols)[:cols] for line in lines]
    origin: tuple[int, int, str] | None = None
    for first in range(cursor_row - 1, -1, -1):
        joined = "".join(padded[first:cursor_row])
        found = joined.find(typed_start)
        if found >= 0:
            origin = (first + found // cols, found % cols, "")
            break
    if origin is None:
        first = cursor_row - typed_lines
        if first >= 0 and padded[first].rstrip().endswith(typed_end):
            origin = (first, 0, prompt)
    if origin is None:
        return ""
    row, column, again = origin
    # The answer's own echo (the terminal driver's, on the row where the cursor is) is below.
    up = cursor_row - row
    text = "\\r\\033[{up}A" + (f"\\033[{column}C" if column else "") + "\\033[J"
    text += _format_text(again) + "%s\\r\\n"
    up += 1 + (len(text) + 4) // max(cols, 1)
    return text.replace("{up}", str(up))
