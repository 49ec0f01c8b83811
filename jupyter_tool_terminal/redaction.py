"""Redaction: secrets replaced before terminal text leaves the server.

The one place that decides what is a secret, for recordings now and for what AI agents read
later. Two ways in:

- :meth:`Redactor.redact` redacts a whole text at once (an agent's read of a screen, a command's
  output).
- :meth:`Redactor.stream` gives a :class:`StreamRedactor` for one direction of a live terminal
  (its output, or the keys typed into it): text goes in piece by piece as it arrives, and comes
  back redacted, in the same pieces with their own times, as soon as no secret can still be
  forming in it, and never later than :data:`HOLD_SECONDS`.

Secrets are found in what the terminal *shows*, not only in the byte stream: a line the
terminal wrapped (or the line editor wrapped with CR LF at the last column, as busybox ash does)
is one line, a line rewritten in place (bash scrolling a long command line sideways, spaces and
backspaces) is read as it ends up on the screen, escape sequences between a secret's characters
are ignored, and typed keys are read as the line they edit. A secret found there is also hidden
wherever pieces of it (8 characters or more) were drawn on that line before it was rewritten.

Built-in formats, the operator's ``redact_patterns`` (regular expressions; a named group
``keep`` stays readable) and ``redact_literals``; :meth:`Redactor.for_environment` adds the
values of a shell's secret-looking environment variables.
"""

from __future__ import annotations

import bisect
import re
import typing as t

#: What replaces a secret.
REDACTED = "[REDACTED]"
#: What replaces text the terminal conceals from the person (SGR 8), once per run of it.
CONCEALED = "[concealed]"

#: Built-in secret formats: (keywords, pattern). A pattern is matched only on the lines where
#: one of its keywords occurs (in any case): each of its matches contains one, and plain string
#: search finds them 100 times faster than the pattern (a flood has none of them). A pattern's
#: group ``keep`` (an assignment's name) stays readable. None crosses a line end.
BUILTIN_FORMATS: tuple[tuple[tuple[str, ...], str], ...] = (
    # AWS access key ids (long-term and temporary).
    (
        ("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
        r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
    ),
    # GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
    (("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
    # GitLab personal access tokens.
    (("glpat-",), r"\bglpat-[A-Za-z0-9_-]{20,}"),
    # OpenAI: project, service-account and admin keys; legacy keys (sk- and 48 characters);
    # any key carrying OpenAI's marker (base64 of "openai").
    (("sk-",), r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    (("sk-",), r"\bsk-[A-Za-z0-9]{48}\b"),
    (("t3blbkfj",), r"\bsk-[A-Za-z0-9_-]*T3BlbkFJ[A-Za-z0-9_-]*"),
    # Anthropic (sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-...).
    (("sk-ant-",), r"\bsk-ant-[a-z]+[0-9]*-[A-Za-z0-9_-]{20,}"),
    # Hugging Face user access tokens.
    (("hf_",), r"\bhf_[A-Za-z0-9]{34,}\b"),
    # Google API keys and OAuth access tokens.
    (("aiza",), r"\bAIza[0-9A-Za-z_-]{35}"),
    (("ya29.",), r"\bya29\.[0-9A-Za-z_-]{20,}"),
    # Slack tokens (bot, user, app-level) and incoming webhooks.
    (("xox",), r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    (("xapp-",), r"\bxapp-[0-9]-[A-Za-z0-9-]{10,}"),
    (("hooks.slack.com",), r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    # Stripe secret and restricted keys, webhook signing secrets.
    (("k_live_", "k_test_"), r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    (("whsec_",), r"\bwhsec_[A-Za-z0-9]{24,}\b"),
    # npm, PyPI and Docker Hub tokens.
    (("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    (("pypi-",), r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{16,}"),
    (("dckr_pat_",), r"\bdckr_pat_[A-Za-z0-9_-]{20,}"),
    # JSON Web Tokens (header.payload.signature, each base64url; the first two are JSON).
    (("eyj",), r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}"),
    # Private key headers (the lines after them, up to the END line, are hidden as well).
    (("private key",), r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    # Credentials in URLs (scheme://user:password@host): the password.
    (("://",), r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:)[^\s/?#@]+(?=@)"),
    # "Authorization: Bearer ...", tokens in URLs.
    (("bearer",), r"(?i)(?P<keep>\bbearer[ \t]+)[A-Za-z0-9._~+/=-]{8,}"),
    (
        ("?", "&"),
        r"(?i)(?P<keep>[?&](?:token|access_token|api_key|apikey|key|secret|password)=)"
        r"[^&\s\"'<>]+",
    ),
    # password=..., API_KEY: ..., "secret": "..." and similar assignments.
    (
        ("pass", "pwd", "secret", "token", "key", "credential"),
        r"(?i)(?P<keep>\b[\w.-]*(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key"
        r"|access[_-]?key|private[_-]?key|credentials?)[\w.-]*[\"']?[ \t]*[:=][ \t]*)"
        r"(?:\"[^\"\r\n]*\"|'[^'\r\n]*'|[^\s\"',;]+)",
    ),
)
BUILTIN_PATTERNS: tuple[str, ...] = tuple(pattern for _, pattern in BUILTIN_FORMATS)

#: Parts of the names of environment variables whose values are secrets
#: (see :meth:`Redactor.for_environment`).
SECRET_NAME_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")
#: Shorter values are too common to hide everywhere they appear (and shorter pieces of a secret
#: drawn before it was rewritten are not hidden either).
MIN_SECRET_LENGTH = 8
#: The longest a piece of a terminal's text waits before it is given out: long enough for a
#: secret pasted or printed in several pieces (they come within milliseconds), short enough that
#: a recording is never far behind. Pieces keep their own arrival times however long they wait.
HOLD_SECONDS = 2.0
#: Characters of one line kept for matching; beyond this only the last ``LOOKBACK`` are kept,
#: so a secret of up to ``LOOKBACK`` characters is still seen whole.
MAX_LINE = 16 * 1024
LOOKBACK = 1024
#: Characters held at most; beyond this what is older than the current line's text goes out.
MAX_HELD = 256 * 1024
#: Secrets found recently: pieces of them are hidden in what follows for this long.
REMEMBER_SECONDS = 10.0
REMEMBER_COUNT = 16

#: Escape sequences that show nothing themselves: CSI (colours, cursor moves), OSC (titles,
#: hyperlinks), DCS and other strings, character set designations, other two-character escapes.
ESCAPE_SEQUENCE = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[P_^X][^\x1b]*\x1b\\"
    r"|[ -/]+[0-~]|[0-~])"
)
#: An escape sequence cut off at the end of a piece (the rest comes with the next one).
_UNFINISHED_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[P_^X][^\x1b]*|[ -/]*)?\Z")
_PENDING_LIMIT = 4096
#: One unit of a terminal's text: printable characters, an escape sequence, or a control.
_TOKEN = re.compile(
    r"(?P<text>[^\x00-\x1f\x7f]+)|(?P<escape>" + ESCAPE_SEQUENCE.pattern + r")|(?P<control>[\s\S])"
)
_CSI = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])")
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")
#: Lines of a private key's body hidden at most (a key without its END line ends there).
_PEM_MAX_LINES = 200
_PEM_MARK = "PRIVATE KEY-----"
_SPACE = re.compile(r"\s")


def secret_environment_values(environment: t.Mapping[str, str]) -> list[str]:
    """The values (8 characters or more) of the variables in ``environment`` whose names
    contain TOKEN, SECRET, PASSWORD, PASSWD, KEY or CREDENTIAL (in any case)."""
    return sorted(
        {
            value
            for name, value in environment.items()
            if len(value) >= MIN_SECRET_LENGTH
            and any(part in name.upper() for part in SECRET_NAME_PARTS)
        }
    )


def secret_variable_names(environment: t.Mapping[str, str]) -> list[str]:
    """The names in ``environment`` that contain TOKEN, SECRET, PASSWORD, PASSWD, KEY or
    CREDENTIAL (in any case), whatever their values."""
    return sorted(name for name in environment if any(p in name.upper() for p in SECRET_NAME_PARTS))


_SGR = re.compile(r"\x1b\[([0-9;:]*)m")
#: An SGR with an 8 among its parameters: the only kind that may start concealed text.
_SGR_WITH_8 = re.compile(r"\x1b\[[0-9;:]*8[0-9;:]*m")
#: SGR parameters that take more parameters after them (extended colours): 38;5;N, 38;2;R;G;B.
_EXTENDED_COLOUR = frozenset({"38", "48", "58"})


class Concealer:
    """Gives terminal output as the person sees it in one respect: text drawn concealed (SGR 8,
    "hidden") is not passed on but replaced by :data:`CONCEALED`, once per run (and line).
    Fed piece by piece; escape sequences pass through unchanged."""

    def __init__(self) -> None:
        self.concealed = False
        self._marked = False

    def copy(self) -> Concealer:
        copied = Concealer()
        copied.concealed, copied._marked = self.concealed, self._marked
        return copied

    def feed(self, text: str) -> str:
        """``text`` with what is concealed replaced."""
        if not self.concealed and ("\x1b[" not in text or not _SGR_WITH_8.search(text)):
            # Nothing is concealed and nothing here starts concealing (only SGR 8 does): a
            # coloured build log passes at the speed of one search.
            return text
        out: list[str] = []
        position = 0
        for match in _SGR.finditer(text):
            out.append(self._plain(text[position : match.start()]))
            out.append(match.group(0))
            self._apply(match.group(1))
            position = match.end()
        out.append(self._plain(text[position:]))
        return "".join(out)

    def _plain(self, text: str) -> str:
        if not self.concealed or not text:
            return text
        out: list[str] = []
        for line in re.split(r"(\n)", text):
            if line == "\n":
                out.append(line)
                self._marked = False
            elif line and not self._marked:
                out.append(CONCEALED)
                self._marked = True
        return "".join(out)

    def _apply(self, parameters: str) -> None:
        values = parameters.split(";") if parameters else ["0"]
        index = 0
        while index < len(values):
            value = values[index] or "0"
            if value in _EXTENDED_COLOUR and index + 1 < len(values):
                index += 3 if values[index + 1] == "5" else 5 if values[index + 1] == "2" else 1
                continue
            if value == "8":
                if not self.concealed:
                    self.concealed, self._marked = True, False
            elif value in ("0", "28"):
                self.concealed = False
            index += 1


class Redactor:
    """What is a secret: built-in formats, operator regexes and literal strings."""

    def __init__(self, patterns: t.Iterable[str] = (), literals: t.Iterable[str] = ()) -> None:
        self._operator_patterns = list(patterns)
        self._literals = sorted({literal for literal in literals if literal}, key=len, reverse=True)
        compiled: list[tuple[tuple[str, ...], re.Pattern[str]]] = [
            (keywords, re.compile(pattern)) for keywords, pattern in BUILTIN_FORMATS
        ]
        for pattern in self._operator_patterns:
            try:
                compiled.append(((), re.compile(pattern)))
            except re.error as error:
                msg = f"redact_patterns: {pattern!r} is not a valid regular expression: {error}"
                raise ValueError(msg) from error
        if self._literals:
            compiled.append(((), re.compile("|".join(map(re.escape, self._literals)))))
        self._patterns = compiled

    def for_environment(self, environment: t.Mapping[str, str]) -> Redactor:
        """A redactor that also hides the values of ``environment``'s secret variables
        (see :func:`secret_environment_values`); this one is unchanged."""
        values = secret_environment_values(environment)
        return Redactor(self._operator_patterns, [*self._literals, *values])

    def spans(self, text: str) -> t.Iterator[tuple[int, int]]:
        """Where secrets are in ``text`` (start, end), the readable ``keep`` part left out."""
        lowered = text.lower()
        # (Lower case is longer for a few characters, İ: positions would then differ.)
        by_keyword = len(lowered) == len(text)
        for keywords, pattern in self._patterns:
            if keywords and by_keyword:
                matches: t.Iterable[re.Match[str]] = _on_lines_with(
                    keywords, pattern, text, lowered
                )
            else:
                matches = pattern.finditer(text)
            for match in matches:
                start = match.end("keep") if "keep" in pattern.groupindex else -1
                if start < 0:
                    start = match.start()
                if match.end() > start:
                    yield start, match.end()

    def redact(self, text: str, *, width: int | None = None) -> str:
        """``text`` with every secret replaced, read as a terminal shows it.

        ``width``: the columns of the screen ``text`` comes from, if it does; a line of exactly
        that many characters then continues on the next (a soft wrap, as a screen's rows are
        written out).
        """
        stream = StreamRedactor(self, width=width or 1 << 30, line_feed_returns=True)
        pieces = [*stream.feed(text, 0.0), *stream.flush()]
        return "".join(piece.text for piece in pieces)

    def stream(self, *, width: int = 80, keystrokes: bool = False) -> StreamRedactor:
        """A :class:`StreamRedactor` for a terminal ``width`` columns wide (``keystrokes``:
        for what is typed into it)."""
        return StreamRedactor(self, width=width, keystrokes=keystrokes)


class Released(t.NamedTuple):
    """Redacted text of one piece given to :meth:`StreamRedactor.feed`."""

    #: The piece's number (0, 1, ... in the order fed).
    piece: int
    #: When the piece arrived (as given to :meth:`StreamRedactor.feed`).
    when: float
    #: Its redacted text, or the next part of it (a piece may come out in several parts).
    text: str
    #: Whether this is the piece's last part.
    complete: bool


class RememberedSecrets:
    """Secrets found recently in a terminal (in its output or its keys), to hide pieces of them."""

    def __init__(self) -> None:
        self._found: dict[str, float] = {}

    def add(self, value: str, when: float) -> None:
        self._found.pop(value, None)
        self._found[value] = when
        while len(self._found) > REMEMBER_COUNT:
            del self._found[next(iter(self._found))]

    def recent(self, now: float) -> list[str]:
        return [value for value, when in self._found.items() if now - when <= REMEMBER_SECONDS]


class StreamRedactor:
    """Redacts one direction of a live terminal, piece by piece, as the terminal shows it.

    :meth:`feed` takes each piece with its arrival time and returns what may be given out now;
    the current line is held until it ends (a hard line end, a cursor jump) or its oldest piece
    is :data:`HOLD_SECONDS` old (:meth:`expire`). Everything comes out in order, each piece with
    its own time. Not thread-safe: one thread feeds it.
    """

    def __init__(
        self,
        redactor: Redactor,
        *,
        width: int = 80,
        keystrokes: bool = False,
        line_feed_returns: bool = False,
        remembered: RememberedSecrets | None = None,
    ) -> None:
        """``keystrokes``: the text is what is typed (Enter ends a line, DEL goes back);
        ``line_feed_returns``: a line feed also returns to the first column (plain text, not a
        terminal's output, where the tty turns LF into CR LF); ``remembered``: secrets found
        (shared with the other direction of the same terminal)."""
        self._redactor = redactor
        self._keystrokes = keystrokes
        self._line_feed_returns = line_feed_returns
        self._width = max(1, width)
        self.remembered = remembered if remembered is not None else RememberedSecrets()
        # Held text: ``_raw`` starts at stream offset ``_base``; pieces [number, start, when].
        self._raw = ""
        self._base = 0
        self._pieces: list[list[t.Any]] = []
        self._count = 0
        #: Stream offsets (start, end) of characters to hide.
        self._hide: list[tuple[int, int]] = []
        self._after_hidden = -1  # stream offset just after the last hidden run given out
        self._now = 0.0
        # The current line as shown: cells (row * width + column), the stream offset of the
        # character that drew each (-1: blank), the cursor, where the line began.
        self._cells: list[str] = []
        self._drawn: list[int] = []
        self._row = self._col = 0
        self._line_start = 0
        self._rewritten = False  # drawn other than left to right (matched as shown at its end)
        self._scanned = 0  # stream offset up to which the text was read into the line
        #: Lines of a private key's body still to hide (0: not in a private key).
        self._private_key_lines = 0
        self._plain_lines: re.Pattern[str] | None = None

    @property
    def holding(self) -> bool:
        """Whether text is held (:meth:`expire` will give it out)."""
        return bool(self._pieces)

    def resize(self, width: int) -> None:
        """The terminal is ``width`` columns wide from now on."""
        self._width = max(1, width)
        self._plain_lines = None

    def feed(self, text: str, when: float) -> list[Released]:
        """Take the next piece; return what may be given out now (redacted)."""
        self._now = max(self._now, when)
        self._pieces.append([self._count, self._base + len(self._raw), when])
        self._count += 1
        self._raw += text
        self._read_into_line()
        released = self.expire(when)
        if self._pieces:
            upto = self._line_start
            if len(self._raw) > MAX_HELD:
                self._find_secrets(final=False)
                base = self._base
                upto = max(upto, min((d for d in self._drawn if d >= base), default=self._end))
            released += self._release(upto)
        return released

    def expire(self, now: float) -> list[Released]:
        """Give out everything held if its oldest piece arrived :data:`HOLD_SECONDS` before
        ``now``: secrets complete by then are hidden, a line still being typed goes out as it is."""
        self._now = max(self._now, now)
        if not self._pieces or now - self._pieces[0][2] < HOLD_SECONDS:
            return []
        self._find_secrets(final=False)
        return self._release(self._end)

    def flush(self) -> list[Released]:
        """Give out everything held (the terminal ended)."""
        self._read_into_line(everything=True)
        self._find_secrets(final=False)
        return self._release(self._end)

    # -- reading the text into the line it draws ------------------------------------------------

    @property
    def _end(self) -> int:
        return self._base + len(self._raw)

    def _read_into_line(self, *, everything: bool = False) -> None:
        raw, base = self._raw, self._base
        # (Text given out by expire() before it was read is read from where it was cut.)
        position, end = max(0, self._scanned - base), len(raw)
        if not everything:
            unfinished = _UNFINISHED_ESCAPE.search(raw, max(position, end - _PENDING_LIMIT))
            if unfinished:
                end = unfinished.start()
        plain = self._plain_line_pattern()
        while position < end:
            if not self._cells and not self._col and not self._private_key_lines:
                # Lines shorter than the screen, without controls: shown as they are written,
                # so the stream is all there is to read (most of a flood goes this way).
                lines = plain.match(raw, position, end)
                if lines and _PEM_MARK not in lines.group():
                    position = lines.end()
                    self._line_start = base + position
                    continue
            token = _TOKEN.match(raw, position, end)
            assert token is not None  # every character is one of the three kinds
            kind, value = token.lastgroup, token.group()
            if kind == "text":
                self._draw(value, base + position)
            elif kind == "escape":
                self._escape(value, base + token.end())
            else:
                self._control(value, base + token.end())
            position = token.end()
        self._scanned = base + position

    def _plain_line_pattern(self) -> re.Pattern[str]:
        if self._plain_lines is None:
            longest = min(self._width - 1, MAX_LINE)
            ending = r"\r?\n" if self._line_feed_returns else r"\r\n"
            if self._keystrokes:
                ending = r"[\r\n]"
            # (A colour counts as a character: such a line is at most shorter than it looks.)
            unit = r"(?:[^\x00-\x1f\x7f]|\x1b\[[0-9;:]*m)"
            self._plain_lines = re.compile(f"(?:{unit}{{0,{longest}}}{ending})+")
        return self._plain_lines

    def _draw(self, text: str, offset: int) -> None:
        width = self._width
        if self._col >= width:  # the cursor waits past the last column: the line wraps
            self._row, self._col = self._row + 1, 0
        at = self._row * width + self._col
        cells, drawn = self._cells, self._drawn
        if at > len(cells):
            cells.extend(" " * (at - len(cells)))
            drawn.extend([-1] * (at - len(drawn)))
        if at < len(cells) or _PEM_MARK in text:
            self._rewritten = True  # read it as shown when it ends
        cells[at : at + len(text)] = text
        drawn[at : at + len(text)] = range(offset, offset + len(text))
        row, col = divmod(at + len(text), width)
        self._row, self._col = (row - 1, width) if col == 0 else (row, col)
        if len(cells) > MAX_LINE:
            self._cut_line()

    def _cut_line(self) -> None:
        """Keep the end of an endless line (a flood without line ends)."""
        self._find_secrets(final=False)
        width = self._width
        dropped = len(self._cells) - LOOKBACK
        if width <= MAX_LINE:
            dropped = dropped // width * width  # whole rows
            self._row = max(0, self._row - dropped // width)
        else:
            self._col = max(0, self._col - dropped)
        del self._cells[:dropped], self._drawn[:dropped]
        kept_from = min((offset for offset in self._drawn if offset >= 0), default=0)
        self._line_start = max(self._line_start, kept_from)

    def _control(self, char: str, after: int) -> None:
        width = self._width
        if char in "\r\n\x0b\x0c" and self._keystrokes:
            self._end_line(after)
        elif char == "\r":
            self._col = 0
        elif char == "\n" and self._line_feed_returns:
            self._col = 0
            if len(self._cells) >= (self._row + 1) * width:
                self._row += 1
                self._rewritten = True
            else:
                self._end_line(after)
        elif char in "\n\x0b\x0c":
            row_full = self._col >= width or len(self._cells) >= (self._row + 1) * width
            if row_full:  # a wrap the line editor wrote itself (busybox ash: CR CR LF)
                self._row += 1
                self._col = min(self._col, width - 1)
                self._rewritten = True
            else:
                self._end_line(after)
        elif char == "\b" or (char == "\x7f" and self._keystrokes):
            self._col = max(0, min(self._col, width - 1) - 1)
            self._rewritten = True
        elif char == "\t" and not self._keystrokes:
            self._col = min(width - 1, (self._col // 8 + 1) * 8)

    def _escape(self, sequence: str, after: int) -> None:
        if sequence[-1] == "m":
            return  # a colour, the most common by far
        csi = _CSI.fullmatch(sequence)
        if csi is None:
            # ESC 7/8 (cursor saved/restored), ESC M/D/E (index), ESC c (reset) move the cursor
            # elsewhere; charsets, keypad modes and strings (titles) draw nothing.
            if sequence[1:] in ("7", "8", "M", "D", "E", "c") and not self._keystrokes:
                self._end_line(after)
            return
        parameters, final = csi.groups()
        numbers = [int(n) if n.isdigit() else 0 for n in parameters.split(";")]
        count = max(1, numbers[0])
        width = self._width
        if final in "CDGKXP@AB":
            self._rewritten = True
        if final == "C":
            self._col = min(width - 1, self._col + count)
        elif final == "D":
            self._col = max(0, min(self._col, width - 1) - count)
        elif final == "G":
            self._col = min(width - 1, count - 1)
        elif final == "A":
            self._row = max(0, self._row - count)
        elif final == "B":
            self._row += count
        elif final in "KXP@":
            self._erase(final, numbers[0], count)
        elif not self._keystrokes and (
            final in "HfdJrSTLM" or (final in "hl" and parameters.startswith("?"))
        ):
            # The cursor jumps (or the screen scrolls, or switches): this line is done.
            self._end_line(after)
            if final in "Hf" and len(numbers) > 1:
                self._col = min(width - 1, max(1, numbers[1]) - 1)

    def _erase(self, final: str, mode: int, count: int) -> None:
        width = self._width
        at = self._row * width + min(self._col, width - 1)
        row_start, row_end = self._row * width, (self._row + 1) * width
        if final == "K":
            start, end = {1: (row_start, at + 1), 2: (row_start, row_end)}.get(mode, (at, row_end))
        elif final == "X":
            start, end = at, min(at + count, row_end)
        elif final == "P":
            del (
                self._cells[at : min(at + count, row_end)],
                self._drawn[at : min(at + count, row_end)],
            )
            return
        else:  # "@": blanks inserted, the rest of the row moves right
            self._cells[at:at] = " " * count
            self._drawn[at:at] = [-1] * count
            return
        end = min(end, len(self._cells))
        if start < end:
            self._cells[start:end] = " " * (end - start)
            self._drawn[start:end] = [-1] * (end - start)

    def _end_line(self, after: int) -> None:
        if self._rewritten or self._private_key_lines:
            self._find_secrets(final=True)
        self._cells, self._drawn = [], []
        self._row = 0
        if not self._keystrokes:
            self._col = 0 if self._col >= self._width else self._col
            if self._col:  # a line feed without a carriage return keeps the column
                self._cells.extend(" " * self._col)
                self._drawn.extend([-1] * self._col)
        else:
            self._col = 0
        self._line_start = after
        self._rewritten = False

    # -- finding secrets and giving text out ----------------------------------------------------

    def _find_secrets(self, *, final: bool) -> None:
        """Hide the secrets of the current line as shown (``final``: the line ended)."""
        shown = "".join(self._cells)
        found = list(self._redactor.spans(shown))
        if self._private_key_lines:
            # A private key's body: base64 lines no pattern can tell from others.
            key_end = _PEM_END.search(shown)
            found.append((0, key_end.start() if key_end else len(shown)))
            if final:
                self._private_key_lines = 0 if key_end else self._private_key_lines - 1
        elif final and _PEM_BEGIN.search(shown) and not _PEM_END.search(shown):
            self._private_key_lines = _PEM_MAX_LINES
        drawn = self._drawn
        for start, end in found:
            self._hide_offsets(offset for offset in drawn[start:end] if offset >= 0)
            self._remember(shown[start:end])

    def _remember(self, value: str) -> None:
        # Tokens, whose pieces may have been drawn before: no spaces (not a key's header).
        value = value.strip()
        if len(value) >= MIN_SECRET_LENGTH and not _SPACE.search(value):
            self.remembered.add(value, self._now)

    def _hide_offsets(self, offsets: t.Iterable[int]) -> None:
        run_start = run_end = -1
        for offset in sorted(offsets):
            if offset == run_end:
                run_end += 1
                continue
            if run_start >= 0:
                self._hide.append((run_start, run_end))
            run_start, run_end = offset, offset + 1
        if run_start >= 0:
            self._hide.append((run_start, run_end))

    def _hide_in_stream(self, end: int) -> None:
        """Hide secrets in the held text up to ``end`` read as a stream (escape sequences
        left out), and pieces of secrets found recently."""
        raw = self._raw[: end - self._base]
        shown, position = _without_escapes(raw)
        for start, stop in self._redactor.spans(shown):
            self._hide.append((self._base + position(start), self._base + position(stop - 1) + 1))
            self._remember(shown[start:stop])
        for value in self.remembered.recent(self._now):
            for start, stop in _pieces_of(value, shown):
                self._hide.append(
                    (self._base + position(start), self._base + position(stop - 1) + 1)
                )

    def _release(self, upto: int) -> list[Released]:
        """Give out the held text before stream offset ``upto``, redacted, piece by piece."""
        upto = max(self._base, min(upto, self._end))
        if upto > self._base:
            self._hide_in_stream(upto)
        hide = _merged(self._hide)
        released = []
        while self._pieces:
            number, start, when = self._pieces[0]
            following = self._pieces[1][1] if len(self._pieces) > 1 else self._end
            if start >= upto and following > start:
                break  # (an empty piece goes out with those before it)
            stop = min(following, upto)
            text = self._render(start, stop, hide)
            complete = stop == following
            if complete:
                self._pieces.pop(0)
            else:
                self._pieces[0][1] = stop
            released.append(Released(number, when, text, complete))
        self._raw = self._raw[upto - self._base :]
        self._base = upto
        self._hide = [(max(a, upto), b) for a, b in hide if b > upto]
        return released

    def _render(self, start: int, stop: int, hide: list[tuple[int, int]]) -> str:
        raw, base = self._raw, self._base
        out = []
        done = start
        for hidden_start, hidden_end in hide:
            first, last = max(hidden_start, start), min(hidden_end, stop)
            if first >= last:
                continue
            out.append(raw[done - base : first - base])
            # One marker per secret: none where it goes on from the run hidden last (in an
            # earlier piece, or past escape sequences only).
            follows = self._after_hidden == first or (
                base <= self._after_hidden < first
                and _only_escapes(raw[self._after_hidden - base : first - base])
            )
            if not follows:
                out.append(REDACTED)
            # What the terminal was told among the secret's characters (a colour) stays.
            out.extend(ESCAPE_SEQUENCE.findall(raw, first - base, last - base))
            done = self._after_hidden = last
        out.append(raw[done - base : stop - base])
        return "".join(out)


def _on_lines_with(
    keywords: tuple[str, ...], pattern: re.Pattern[str], text: str, lowered: str
) -> t.Iterator[re.Match[str]]:
    """``pattern``'s matches on the lines of ``text`` holding one of ``keywords``."""
    lines: list[tuple[int, int]] = []
    for keyword in keywords:
        found = lowered.find(keyword)
        while found >= 0:
            start = text.rfind("\n", 0, found) + 1
            end = text.find("\n", found)
            end = len(text) if end < 0 else end
            lines.append((start, end))
            found = lowered.find(keyword, end)
    for start, end in _merged(lines):
        yield from pattern.finditer(text, start, end)


def _only_escapes(text: str) -> bool:
    return not ESCAPE_SEQUENCE.sub("", text)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _without_escapes(text: str) -> tuple[str, t.Callable[[int], int]]:
    """``text`` without its escape sequences, and a map from its positions back to ``text``'s."""
    if "\x1b" not in text:
        return text, lambda index: index
    runs: list[tuple[int, int]] = []  # (position in the result, position in text)
    pieces: list[str] = []
    length = last = 0
    for escape in ESCAPE_SEQUENCE.finditer(text):
        if escape.start() > last:
            runs.append((length, last))
            pieces.append(text[last : escape.start()])
            length += escape.start() - last
        last = escape.end()
    runs.append((length, last))
    pieces.append(text[last:])
    starts = [start for start, _ in runs]

    def position(index: int) -> int:
        run = bisect.bisect_right(starts, index) - 1
        return runs[run][1] + index - runs[run][0]

    return "".join(pieces), position


def _pieces_of(secret: str, text: str) -> t.Iterator[tuple[int, int]]:
    """Where ``text`` holds pieces of ``secret`` of :data:`MIN_SECRET_LENGTH` characters or more."""
    size = MIN_SECRET_LENGTH
    grams = {secret[i : i + size] for i in range(len(secret) - size + 1)}
    alphabet = re.compile(f"[{re.escape(''.join(set(secret)))}]{{{size},}}")
    for run in alphabet.finditer(text):
        word, index = run.group(), 0
        while index + size <= len(word):
            if word[index : index + size] not in grams:
                index += 1
                continue
            stop = index + size
            while stop < len(word) and word[index : stop + 1] in secret:
                stop += 1
            yield run.start() + index, run.start() + stop
            index = stop
