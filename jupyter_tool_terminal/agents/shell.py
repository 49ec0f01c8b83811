"""An AI agent's commands, typed into a tool terminal's own shell, with their end and exit code.

``run_command`` runs nothing beside the terminal (no exec per command): it types the command into
the shell the owner watches, as a person would, wrapped so that the shell itself reports where
the command's output starts and where it ended, with its exit status. A short one-line command
is typed as one line::

    printf '\\033]6973;S;NONCE\\007'; command eval 'COMMAND'; printf '...E;NONCE;%s...' "$?"

a longer one, or one of several lines, as a here-document the shell reads on file descriptor 3::

    printf ...S...; command . /dev/fd/3 3<<__JTT_NONCE; printf ...E... "$?"
    <the command, line by line, long lines split with backslash-newline>
    __JTT_NONCE

POSIX shells (bash, dash, busybox ash) all run it the same way, with builtins only:

- the command runs in the shell itself (``eval``, ``.``), so ``cd``, variables, functions and
  background jobs carry over to the next command exactly as if it was typed; its standard input
  is still the terminal, so a command that reads input gets what :meth:`AgentShell.send_keys`
  types (once the shell has read the command: keys typed before may go to the line editor);
- ``command`` in front keeps a syntax error in the command from aborting the line: the shell
  reports it and the end marker still follows, with status 2;
- the markers are a private OSC sequence (terminals ignore it; the owner sees nothing of it)
  carrying a fresh random nonce per command, written by the shell's ``printf`` from an escaped
  format: the typed line and its echo never contain the marker itself, and a command's output
  cannot end the command early without knowing the nonce;
- the command's text is quoted (single quotes; in the here-document ``\\``, ``$`` and
  backquotes are escaped), and typed in lines that every line editor and the terminal's own
  line discipline (4095 characters, for dash) take whole. A tab would make a line editor
  complete: the here-document takes tabs from a variable set by ``$(printf '\\t')`` (the only
  fork, for commands with tabs); other control characters are refused (send them with
  ``send_keys``).

While a person watches the terminal (or it records), the typed line first asks where its echo
lies and reads the server's answer, which replaces the echo with the command (``echo.py``).

The output of the command is exactly what the terminal received between the two markers (so
not the echo of the typed lines, not the prompt), with CR LF turned into LF, redacted, and
bounded: beyond ``output_limit`` characters only the head and the tail are kept (while a flood
streams as well: memory stays bounded whatever the command prints).

What breaks it, and what the agent then sees:

- a program other than the shell in the foreground (an editor the owner left open, a nested
  shell): the runtime tells which process group holds the terminal (the local runtime from the
  PTY, Docker from ``/proc`` in the container, ``runtime/foreground.py``), nothing is typed and
  ``run_command`` is refused naming the program, because a program there would read the
  command and its nonce and could answer with forged markers; with a program the shell runs
  without job control (an interactive startup command), or a shell waiting for the rest of a
  line the owner left unfinished, the typed lines go there, no marker comes, and
  ``run_command`` answers ``timed_out`` with a note saying so
  (``read_screen`` shows what is there; ``send_keys`` with Ctrl-C or the program's own quit
  key frees the shell);
- a command that timed out keeps running: the next ``run_command`` waits a moment for it and
  is then refused (nothing is typed into it) until its end marker comes or an interrupt is
  typed with ``send_keys``;
- a shell that is not POSIX (fish, csh, a Python prompt): the same, ``timed_out``;
- a command that ends the shell (``exit``, ``exec``): the terminal ends; the result says so;
- a command interrupted by Ctrl-C: the shell drops the rest of the line, so that command's end
  marker never comes; the next ``run_command`` works as usual (each has its own nonce);
- whatever the owner half-typed at the prompt is cleared first (Ctrl-E, Ctrl-U), and the typed
  lines land in the shell's history, where the owner sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import secrets
import typing as t

from ..redaction import Concealer, Redactor
from ..runtime.base import RuntimeUnavailable
from . import echo

if t.TYPE_CHECKING:
    from ..manager import Admission, ScreenText, ToolTerminalManager

#: The private OSC number of the markers (unassigned in the terminals' registries).
MARKER_OSC = "6973"
#: The longest line typed into the shell: a line editor's buffer (busybox: about 1000) and the
#: terminal's canonical line (4095) take it whole.
TYPED_LINE = 200
#: The longest command (quoted) typed as one line, with the markers around it: busybox's line
#: editor takes 1023 characters at most.
ONE_LINE = 640
#: A line editor's question for the cursor position, an answer it ignores (column 1), and how far
#: after a command's end marker the question is looked for (the prompt).
CURSOR_QUERY = "\x1b[6n"
CURSOR_AT_START = "\x1b[1;1R"
PROMPT_WATCH = 4096
#: Keys that interrupt, quit or suspend a foreground program (Ctrl-C, Ctrl-\\, Ctrl-Z).
INTERRUPTS = frozenset("\x03\x1c\x1a")
#: How long a command waits for the previous one, which timed out, to end (seconds).
PREVIOUS_COMMAND_GRACE = 2.0
#: How long the prompt after a command is waited for before a watched command is typed.
PROMPT_WAIT = 0.5
#: How long a shell that closed after typing a watched command stays attached for the command's
#: question where its echo lies, to answer it (seconds): the question comes as soon as the
#: shell has read the typed lines, unless something other than the shell got them.
QUESTION_WAIT = 10.0
#: The shortest pause between two looks at which program holds the terminal (seconds).
FOREGROUND_RECHECK = 0.05
#: Characters kept beyond the limit on each side of a cut, so that a secret of up to this length
#: that the cut goes through is still seen whole by the redactor before it is cut.
REDACTION_MARGIN = 1024
#: Room kept in the limit for the line saying how much was left out.
_TRUNCATION_RESERVE = 64
#: Characters a command may not contain (they would edit the typed line); tab and newline may.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Clears whatever is typed at the prompt (end of line, then kill to its start).
_CLEAR_LINE = "\x05\x15"
#: What the here-document's escaping puts a backslash before, and the variable holding a tab.
_HEREDOC_SPECIAL = frozenset("\\$`")
_TAB_VARIABLE = "__jtt_tab"


class AgentShellError(Exception):
    """A refused call; the message is for the agent: why, and what to do instead."""


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """How a command ended and what it printed."""

    #: Its exit status; ``None`` if it did not end (``timed_out``) or the terminal ended.
    exit_code: int | None
    #: What it printed: redacted, LF line ends, no escape sequences of ours, bounded.
    output: str
    #: Whether ``output`` is only the head and the tail of what it printed.
    truncated: bool
    #: Whether it was still running at the timeout (it keeps running).
    timed_out: bool
    #: A sentence for the agent when the result needs explaining (empty otherwise).
    note: str = ""


def typed_command(command: str, nonce: str, *, shown: bool = False) -> str:
    """The keystrokes that run ``command`` in a POSIX shell between markers with ``nonce``;
    ``shown``: after asking where their echo lies, so that a person watching is shown the
    command instead (``echo.py``; a round trip more)."""
    if not shown:
        return _framed(command, nonce, "", "", "")
    ask = echo.ask_position(MARKER_OSC, nonce) + "; "
    answer = echo.ANSWER_VARIABLE
    return _framed(command, nonce, ask, f'printf "${answer}" ', f"; unset {answer}")


def _framed(command: str, nonce: str, ask: str, show: str, tidy: str) -> str:
    """:func:`typed_command`'s lines: ``ask`` first, ``show`` followed by the command as
    shown, ``tidy`` last."""
    start = f"printf '\\033]{MARKER_OSC};S;{nonce}\\007'"
    end = f"printf '\\033]{MARKER_OSC};E;{nonce};%s\\007' \"$?\""
    quoted = "'" + command.replace("'", "'\\''") + "'"
    if len(quoted) <= ONE_LINE and "\n" not in command and "\t" not in command:
        # One typed line: a line editor's per-line work (terminal modes, redraws) once.
        if not show:
            return f"{_CLEAR_LINE}{start}; command eval {quoted}; {end}\r"
        held = echo.COMMAND_VARIABLE
        return (
            f'{_CLEAR_LINE}{ask}{held}={quoted}; {show}"${held}"; {start}; '
            f'command eval "${held}"; {end}{tidy} {held}\r'
        )
    delimiter = f"__JTT_{nonce}"
    # A tab typed into a line editor completes: the here-document gets it from a variable.
    tab = f"{_TAB_VARIABLE}=$(printf '\\t'); " if "\t" in command else ""
    shown = f"{show}{echo.shown(command)}; " if show else ""
    lines = [
        f"{_CLEAR_LINE}{ask}{tab}{shown}{start}; command . /dev/fd/3 3<<{delimiter}; {end}{tidy}"
    ]
    lines.extend(_heredoc_line(line) for line in command.split("\n"))
    lines.append(delimiter)
    return "".join(line + "\r" for line in lines)


def _heredoc_line(line: str) -> str:
    """One line of the command, escaped for an unquoted here-document and split into typed
    lines joined by backslash-newline (which the here-document removes again)."""
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for char in line:
        if char in _HEREDOC_SPECIAL:
            token = "\\" + char
        elif char == "\t":
            token = "${" + _TAB_VARIABLE + "}"
        else:
            token = char
        if size + len(token) > TYPED_LINE:
            pieces.append("".join(current))
            current, size = [], 0
        current.append(token)
        size += len(token)
    pieces.append("".join(current))
    return "\\\r".join(pieces)


class _BoundedText:
    """Text that may grow without bound, kept as its first and last ``keep`` characters."""

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._head: list[str] = []
        self._head_size = 0
        self._tail: list[str] = []
        self._tail_size = 0
        #: Characters added in all.
        self.total = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self.total += len(text)
        if self._head_size < self._keep:
            taken = text[: self._keep - self._head_size]
            self._head.append(taken)
            self._head_size += len(taken)
        self._tail.append(text)
        self._tail_size += len(text)
        if self._tail_size > 2 * self._keep:
            # Amortised: the tail is cut back to ``keep`` once it holds twice that.
            kept = "".join(self._tail)[-self._keep :]
            self._tail, self._tail_size = [kept], len(kept)

    @property
    def complete(self) -> bool:
        """Whether the head holds all of it."""
        return self.total <= self._keep

    def head(self) -> str:
        return "".join(self._head)

    def copy(self) -> _BoundedText:
        copied = _BoundedText(self._keep)
        copied._head, copied._head_size = list(self._head), self._head_size
        copied._tail, copied._tail_size = list(self._tail), self._tail_size
        copied.total = self.total
        return copied

    def tail(self) -> str:
        return "".join(self._tail)[-self._keep :]


class _Run:
    """One command in flight: finds its markers in the terminal's output and keeps what lies
    between them."""

    def __init__(self, nonce: str, limit: int) -> None:
        self._start = f"\x1b]{MARKER_OSC};S;{nonce}\x07"
        self._ask = f"\x1b]{MARKER_OSC};P;{nonce}\x07"
        #: Done once the shell asked where the echo of the typed lines lies (``echo.py``).
        self.asked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Whether the typed lines ask that question (or did) and its answer is still to be
        #: typed: the shell then waits in ``read`` for exactly one line.
        self.owes_answer = False
        self._end = f"\x1b]{MARKER_OSC};E;{nonce};"
        #: The end of what :meth:`watch_for_question` saw (the question may come in pieces).
        self._watched = ""
        self._limit = limit
        self.started = False
        #: Whether the terminal ended before the command did.
        self.terminal_ended = False
        #: Whether an interrupt was typed while it ran.
        self.interrupted = False
        #: Output held back: it may be the beginning of a marker, or a CR before its LF.
        self._carry = ""
        self.output = _BoundedText(limit + REDACTION_MARGIN)
        #: Text the terminal conceals from the person is not given as plain text.
        self._concealer = Concealer()
        self.done: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    def feed(self, text: str) -> str:
        """Take the terminal's next output; what came after the end marker, once it came."""
        if self.done.done():
            return ""
        text, self._carry = self._carry + text, ""
        if not self.started:
            if not self.asked.done():
                # (the question comes first: it is looked for in what precedes the start)
                found = text.find(self._ask)
                if found >= 0:
                    self.asked.set_result(None)
            found = text.find(self._start)
            if found < 0:
                self._carry = text[-(len(self._start) - 1) :]
                return ""
            self.started = True
            text = text[found + len(self._start) :]
        searched = 0
        while True:
            found = text.find(self._end, searched)
            if found < 0:
                break
            status_at = found + len(self._end)
            bell = text.find("\x07", status_at, status_at + 4)
            if bell >= 0 and text[status_at:bell].isdigit():
                self._add(text[:found])
                self.done.set_result(int(text[status_at:bell]))
                return text[bell + 1 :]
            if bell < 0 and len(text) < status_at + 4:
                self._add(text[:found])
                self._carry = text[found:]  # the marker's status is still coming
                return ""
            searched = found + 1  # not our marker after all: output
        # Hold back what may be the start of a marker (from an escape near the end) and a CR
        # whose LF may come next.
        escape = text.rfind("\x1b", max(len(text) - len(self._end) - 4, 0))
        cut = escape if escape >= 0 else len(text)
        if cut and text[cut - 1] == "\r":
            cut -= 1
        self._carry = text[cut:]
        self._add(text[:cut])
        return ""

    def watch_for_question(self, text: str) -> None:
        """Once the run is given up (the agent's shell closed): only whether the shell asked
        where the echo lies (its answer is still owed)."""
        if self.asked.done():
            return
        seen = self._watched + text
        if self._ask in seen:
            self.asked.set_result(None)
        else:
            self._watched = seen[-(len(self._ask) - 1) :]

    def _add(self, text: str) -> None:
        self.output.add(self._concealer.feed(text.replace("\r\n", "\n")))

    def terminal_gone(self) -> None:
        if not self.done.done():
            self.terminal_ended = True
            self.done.set_result(None)

    def result(self, redactor: Redactor) -> tuple[str, bool]:
        """The output so far (redacted, bounded) and whether it was truncated."""
        output = self.output
        if self._carry and not (self.done.done() and self.done.result() is not None):
            # The command did not end (yet): what is held back is part of its output so far.
            # (Added to a copy: a command that goes on running is still fed.)
            output = output.copy()
            output.add(self._concealer.copy().feed(self._carry.replace("\r\n", "\n")))
        limit = self._limit
        if output.complete:
            text = redactor.redact(output.head())
            if len(text) <= limit:
                return text, False
            head, tail = text, text
            left_out = len(text)
        else:
            head, tail = redactor.redact(output.head()), redactor.redact(output.tail())
            left_out = output.total
        half = max((limit - _TRUNCATION_RESERVE) // 2, 0)
        left_out -= 2 * half
        marker = f"\n[... {left_out} characters left out ...]\n"
        return head[:half] + marker + (tail[-half:] if half else ""), True


class AgentShell:
    """One agent's hold on one session's shell: a client of the session, admitted and attached
    by the manager (:meth:`ToolTerminalManager.admit_agent`) like a browser's WebSocket."""

    def __init__(
        self,
        manager: ToolTerminalManager,
        admission: Admission,
        *,
        redactor: Redactor,
        output_limit: int = 32768,
        log: logging.Logger,
    ) -> None:
        self._manager = manager
        self.admission = admission
        self._redactor = redactor
        self._limit = output_limit
        self._log = log
        #: The command in flight, or the last one, which may still be running (it timed out).
        self._run: _Run | None = None
        self._in_flight = False
        #: Whether a run_command call is under way (waiting, checking, or in flight).
        self._busy = False
        #: Characters of output after a command's end still looked at for the prompt's
        #: cursor position query.
        self._prompt_watch = 0
        #: Set by every piece of output (what a program leaving the terminal is seen by).
        self._output_came = asyncio.Event()
        #: The answers being given to shells asking where their echo lies.
        self._answers: set[asyncio.Task[None]] = set()
        #: Whether the last output was a command's end, and the prompt after it is to come.
        self._prompt_due = False
        #: Once closed, the run whose question is still to come, if any: the shell stays
        #: attached until it answered it (``QUESTION_WAIT`` at most).
        self._leaving: _Run | None = None
        self._closed = False

    @property
    def session_id(self) -> str:
        """The id of the session it holds."""
        return self.admission.session_id

    @property
    def _listening(self) -> bool:
        return self.admission.attached and not self._closed

    async def start(self) -> None:
        """Attach to the session's output. Nothing is typed until the first command: each
        command carries everything it needs, so a reset shell or one the owner replaced (a
        new ``bash``) works as well."""
        self._refuse_if_ended()
        if not self._manager.attach_reader(self.admission, self):
            self._refuse_if_ended()

    def close(self) -> None:
        """Detach (the session goes on); a command being waited for is given up.

        A shell whose typed line asks where its echo lies waits in ``read`` for the answer
        (``echo.py``): it gets it all the same, or it would wait for a person's Enter. Asked
        already, it gets an empty line now (which shows nothing and lets the command run).
        Not asked yet, the agent's shell stays attached until the question comes and answers
        it then: typed before the shell has read the typed lines, the answer could be taken by
        its line editor (readline reads ahead) instead of by ``read``."""
        if self._closed:
            return
        self._closed = True
        run, self._run = self._run, None
        if run is None:
            self._manager.detach_reader(self.admission, self)
            return
        run.terminal_gone()
        if not run.owes_answer or run.asked.done() or self.admission.ended:
            self._answer(run, "")
            self._manager.detach_reader(self.admission, self)
            return
        self._leaving = run
        asyncio.get_running_loop().call_later(QUESTION_WAIT, self._left, run)

    def _left(self, run: _Run) -> None:
        """Detach after :meth:`close`, once ``run``'s question was answered or not asked in
        time (nothing is typed then: something other than the shell got the typed lines)."""
        if self._leaving is run:
            self._leaving = None
            self._manager.detach_reader(self.admission, self)

    def output(self, text: str | None) -> None:
        """The session's output as it arrives (``None``: the session ended)."""
        self._output_came.set()
        leaving = self._leaving
        if leaving is not None:
            if text is None:
                self._left(leaving)
            else:  # (its answer, once asked, detaches: _answer)
                leaving.watch_for_question(text)
            return
        run = self._run
        if text is None:
            if run is not None:
                run.terminal_gone()
            return
        if run is not None and not run.done.done():
            rest = run.feed(text)
            if self._prompt_watch > 0:
                # The prompt after the last command may come while the next one is typed:
                # it is answered all the same, or the line editor waits for it.
                self._answer_cursor_query(text[: len(text) - len(rest)])
            if not run.done.done():
                return
            self._prompt_watch = PROMPT_WATCH
            text = rest
        # (a command's end with nothing after it yet: its prompt is still to come)
        self._prompt_due = run is not None and run.done.done() and not text
        if self._prompt_watch > 0:
            self._answer_cursor_query(text)

    def _answer_cursor_query(self, text: str) -> None:
        """Answer the line editor's question for the cursor position in the prompt after a
        command, when no terminal of the owner's is there to answer it.

        busybox's line editor asks at each prompt (``ESC [ 6 n``) and, when a line is entered,
        waits 20 ms for an answer that never comes without a terminal: two thirds of a short
        command's time. Column 1 is an answer it ignores (the prompt is longer).
        """
        if CURSOR_QUERY in text:
            self._prompt_watch = 0
            if not self.admission.owner_attached:
                self._write(CURSOR_AT_START)
        else:
            self._prompt_watch -= len(text)

    def _write(self, text: str) -> bool:
        return self._manager.type_input(self.admission, text)

    def _refuse_if_ended(self) -> None:
        if self.admission.ended:
            msg = "This terminal has ended; open a new one with open_terminal."
            raise AgentShellError(msg)

    def _redacted_error(self, message: str) -> AgentShellError:
        return AgentShellError(self._redactor.redact(message))

    async def run_command(
        self, command: str, timeout: float, may_type: t.Callable[[], bool] | None = None
    ) -> CommandResult:
        """Type ``command`` into the shell and wait (at most ``timeout`` seconds) until the
        shell is back at its prompt; its exit code and what it printed. ``may_type`` is asked
        right before typing (after any wait): false, nothing is typed (:class:`AgentShellError`)."""
        self._refuse_if_ended()
        if not self._listening:
            msg = "This terminal is not attached for commands (AgentShell.start was not called)."
            raise AgentShellError(msg)
        if self._busy:
            msg = (
                "Another command is still running in this terminal; wait for its result, or "
                "stop it with send_keys and Ctrl-C (\\u0003)."
            )
            raise AgentShellError(msg)
        command = command.replace("\r\n", "\n").replace("\r", "\n")
        if _CONTROL.search(command):
            msg = (
                "The command contains control characters (other than tab and newline); type "
                "them with send_keys instead."
            )
            raise AgentShellError(msg)
        self._busy = True
        try:
            return await self._checked_run(command, timeout, may_type)
        finally:
            self._busy = False

    async def _checked_run(
        self, command: str, timeout: float, may_type: t.Callable[[], bool] | None
    ) -> CommandResult:
        """:meth:`run_command` once the command is checked: wait for the previous one, make
        sure the shell holds the terminal, type, and wait for the end."""
        await self._wait_for_previous(timeout)
        holder = await self._foreground_holder(timeout)
        if holder is not None:
            # A program there would read the typed command, markers and all, and could answer
            # with markers of its own: a result the shell never produced.
            msg = (
                f"The terminal is held by the program {holder!r}, not by its shell, so nothing "
                "was typed (the program would read the command). read_screen shows it; stop it "
                "with send_keys (its quit key, or Ctrl-C \\u0003), or close_terminal."
            )
            raise self._redacted_error(msg)
        # (a person watching is shown the command, in front of which the prompt is)
        shown = self.admission.watched
        prompt = await self._prompt_text() if shown else ""
        if may_type is not None and not may_type():
            msg = "Your control ended before the command was typed; nothing was typed."
            raise AgentShellError(msg)
        nonce = secrets.token_hex(8)
        run = self._run = _Run(nonce, self._limit)
        typed = typed_command(command, nonce, shown=shown)
        if shown:
            run.owes_answer = True
            run.asked.add_done_callback(
                lambda _: self._show_command(run, typed.count("\r"), typed, prompt)
            )
        self._in_flight = True
        try:
            if not self._write(typed):
                self._run = None
                raise self._backlog_error()
            done, _ = await asyncio.wait({run.done}, timeout=timeout)
        finally:
            self._in_flight = False
        output, truncated = run.result(self._redactor)
        if done and run.done.result() is not None:
            return CommandResult(run.done.result(), output, truncated, timed_out=False)
        if run.terminal_ended:
            note = "The terminal ended (its shell exited) while the command ran."
            return CommandResult(None, output, truncated, timed_out=False, note=note)
        # Still running (or still waiting to be read by the shell): the next command waits
        # for its end, or for an interrupt typed with send_keys, instead of being typed into
        # it and run whenever the shell gets to it.
        if run.interrupted:
            self._run = None
        if run.started:
            note = (
                f"The command did not finish within {timeout:g} s and keeps running in the "
                "terminal. read_screen shows it; send_keys types into it (Ctrl-C, \\u0003, "
                "stops it)."
            )
        else:
            note = (
                f"The shell did not start the command within {timeout:g} s: it is not at its "
                "prompt (a program is in the foreground and got the typed command, or the "
                "shell waits for the rest of an unfinished line). read_screen shows it; "
                "send_keys with Ctrl-C (\\u0003) or the program's quit key frees the shell."
            )
        return CommandResult(None, output, truncated, timed_out=True, note=note)

    async def _prompt_text(self) -> str:
        """The text in front of the cursor on its row (the prompt, as the screen has it),
        once the prompt after the last command came (for a moment at most)."""
        if self._prompt_due:
            self._output_came.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._output_came.wait(), PROMPT_WAIT)
        with contextlib.suppress(Exception):
            screen = await self._manager.screen_caught_up(self.admission)
            row, column = screen.cursor
            # (rows may come without their trailing blanks)
            return screen.lines[row].ljust(column)[:column] if row < len(screen.lines) else ""
        return ""

    def _show_command(self, run: _Run, typed_lines: int, typed: str, prompt: str) -> None:
        """The shell asked where the echo of the typed lines lies: answer, once the screen
        model has seen it (``echo.py``). It always gets an answer, or the shell waits."""

        async def answer() -> None:
            text = ""
            first_line = typed[len(_CLEAR_LINE) :].split("\r", 1)[0]
            try:
                if not run.owes_answer:
                    return  # (answered already: the agent detached, or it was interrupted)
                screen = await self._manager.screen_caught_up(self.admission)
                text = echo.answer(
                    screen.lines,
                    screen.cols,
                    screen.cursor[0],
                    typed_start=first_line[:40],
                    typed_end=first_line[-12:],
                    typed_lines=typed_lines,
                    prompt=prompt,
                )
            except Exception:  # noqa: BLE001 - the shell waits for an answer, whatever failed
                self._log.exception("Could not show an agent's command to the owner")
            finally:  # (cancelled too: the shell waits all the same)
                self._answer(run, text)

        task = asyncio.ensure_future(answer())
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    def _answer(self, run: _Run, text: str) -> None:
        """Type the answer to ``run``'s question where its echo lies (``echo.py``), if it is
        still owed: the shell reads one line, so it is typed once, whoever answers first."""
        if run.owes_answer:
            run.owes_answer = False
            self._write(text + "\r")
        self._left(run)  # (when closed meanwhile: the answer was all it stayed for)

    async def _foreground_holder(self, timeout: float) -> str | None:
        """The program holding the terminal instead of the shell, if one still does after a
        moment: one that was just interrupted (Ctrl-C typed with ``send_keys`` is on its way)
        is given up to :data:`PREVIOUS_COMMAND_GRACE` to leave, looked at again after each
        output (the shell's prompt says it left)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, PREVIOUS_COMMAND_GRACE)
        while True:
            self._output_came.clear()
            try:
                holder = await self._manager.foreground_program(self.admission)
            except RuntimeUnavailable as error:
                msg = (
                    "Could not check that the shell holds its terminal, so nothing was typed "
                    f"({error}). Try again, or read_screen."
                )
                raise self._redacted_error(msg) from error
            left = deadline - loop.time()
            if holder is None or left <= 0:
                return holder
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._output_came.wait(), left)
            # (a program that floods the terminal is not asked about at every piece)
            await asyncio.sleep(FOREGROUND_RECHECK)

    async def _wait_for_previous(self, timeout: float) -> None:
        """Wait a moment for a command that timed out earlier to end (keys sent to it may be
        finishing it just now); refuse if it does not."""
        previous = self._run
        if previous is None or previous.done.done():
            return
        await asyncio.wait({previous.done}, timeout=min(timeout, PREVIOUS_COMMAND_GRACE))
        if previous.done.done():
            return
        msg = (
            "The previous command (it timed out) is still running in this terminal, and what "
            "is typed now would go to it. Wait for it (read_screen shows it), or stop it with "
            "send_keys and Ctrl-C (\\u0003); then run_command again."
        )
        raise AgentShellError(msg)

    def output_so_far(self) -> tuple[str, bool] | None:
        """What the command being waited for printed so far (redacted and bounded as
        :meth:`run_command`'s result), and whether it was truncated; ``None`` when no
        ``run_command`` waits."""
        run = self._run
        if run is None or not self._in_flight:
            return None
        return run.result(self._redactor)

    def send_keys(self, keys: str) -> None:
        """Type ``keys`` (text, control characters allowed) into the terminal as they are."""
        self._refuse_if_ended()
        if not self._write(keys):
            raise self._backlog_error()
        run = self._run
        if run is not None and not run.done.done() and INTERRUPTS.intersection(keys):
            # The shell drops the rest of an interrupted line: no end marker will come, and
            # no question's answer is read (typed later, it would be a command line).
            run.interrupted = True
            run.owes_answer = False
            if not self._in_flight:
                self._run = None

    def _backlog_error(self) -> AgentShellError:
        return self._redacted_error(
            f"The terminal is not taking input: {self.admission.input_backlog} bytes typed "
            "earlier still wait for the program in it. Wait, or stop it with send_keys and "
            "Ctrl-C (\\u0003)."
        )

    async def read_screen(self) -> dict[str, t.Any]:
        """The visible screen (no scrollback) as the session's screen model has it, once it
        has worked off the output it got so far: ``{"text", "rows", "cols", "cursor": [row,
        col]}``, redacted, cursor 0-based. (The model works behind the output, and emulates a
        large burst only after a pause, ``BUSY_QUIET_TIME``: a read catches it up at once, so
        that an agent never reads a screen from before its command's output.)"""
        return self._screen_model(await self._manager.screen_caught_up(self.admission))

    #: (The former name of :meth:`read_screen`, when that one read the model as it was.)
    read_screen_current = read_screen

    def _screen_model(self, screen: ScreenText) -> dict[str, t.Any]:
        rows, cols = screen.rows, screen.cols
        row, column = screen.cursor
        text = "\n".join(line.rstrip() for line in screen.lines).rstrip("\n")
        return {
            "text": self._redactor.redact(text, width=cols),
            "rows": rows,
            "cols": cols,
            # The model's column is the width while a wrap is pending; a cursor is on a cell.
            "cursor": [row, min(column, cols - 1)],
        }
