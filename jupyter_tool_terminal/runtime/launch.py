"""What a tool terminal runs and with which environment, whatever runtime runs it.

This is policy shared by every runtime: the startup-command wrapper and the curated
environment. A runtime decides only *where* the command runs and how it is ended.
"""

from __future__ import annotations

import shlex

from ..tooltypes import ToolType
from .shells import missing_shell_text

#: Environment variable carrying a shell's kill tag; every process the shell starts inherits it,
#: which is one of the ways a runtime finds (and kills) them all again.
SESSION_TAG_VARIABLE = "JUPYTER_TOOL_TERMINAL_SESSION"
#: Environment variable carrying the id of the server that started the shell (when that server
#: can be seen to be alive, see the runtimes): a server that finds processes carrying the id of
#: a server that is gone kills them, since nothing else ever will.
SERVER_VARIABLE = "JUPYTER_TOOL_TERMINAL_SERVER"

#: The terminal type every tool terminal announces (JupyterLab's xterm.js).
TERM = "xterm-256color"
#: The locale a terminal gets when its instance sets none, so that UTF-8 works out of the box.
DEFAULT_LANG = "C.UTF-8"

# Runs the startup command inside the PTY, in this very shell process, so that `cd` and
# `export` carry over into the interactive shell that replaces it with `exec`. The command is
# evaluated inside a function so that `set --` or `shift` in it cannot disturb the shell's argv.
# A failure is reported in the terminal and the shell starts all the same. (The shell is started
# by the tail that follows, `shell_tail`.)
STARTUP_WRAPPER = r"""
jupyter_tool_terminal_startup() { eval "$1"; }
jupyter_tool_terminal_startup "$1"
status=$?
if [ "$status" -ne 0 ]; then
  printf '\r\n[jupyter-tool-terminal] the startup command failed with exit code %s\r\n' \
    "$status" >&2
fi
unset status
shift
"""


def shell_command(tool: ToolType, size: tuple[int, int] | None = None) -> list[str]:
    """The command line of a tool type's terminal: its shell, behind its startup command.

    ``size`` (rows, cols) is the terminal's size when its panel is already known to have
    one: the wrapper sets it first, so that what the startup command prints is laid out for
    the panel, not for the 80 columns a terminal has until its first resize.
    """
    if tool.startup_command is None:
        return list(tool.shell)
    wrapper = STARTUP_WRAPPER + shell_tail(tool)
    if size is not None:
        rows, cols = (int(value) for value in size)
        wrapper = f"stty rows {rows} cols {cols} 2>/dev/null\n{wrapper}"
    return [
        "/bin/sh",
        "-c",
        wrapper,
        "jupyter-tool-terminal",
        tool.startup_command,
        *(tool.shells or tool.shell),
    ]


#: What a pre-started shell (``standby.py``) prints once its terminal opened, before anything of
#: the shell: everything it printed until then (the echo of the line that let it go) is not the
#: terminal's and is dropped up to and including this.
STANDBY_READY = b"\x1b]6973;jupyter-tool-terminal-standby\x07"

# The gate in front of a pre-started shell: it waits, reading nothing but one line, until a
# terminal is opened with it; then the startup command and the shell start as in a fresh exec.
# `ps` in the container shows its first words. End of input (the server closed it) ends it.
STANDBY_GATE = (
    ": jupyter-tool-terminal pre-started shell, waiting for the next terminal to open;\n"
    "IFS= read -r jupyter_tool_terminal_go || exit 0\n"
    "unset jupyter_tool_terminal_go\n"
    "printf '\\033]6973;jupyter-tool-terminal-standby\\007'\n"  # STANDBY_READY
)


def standby_command(tool: ToolType) -> list[str]:
    """The command line of a pre-started shell of ``tool``: the gate, then what
    :func:`shell_command` runs (the startup command, then the first shell the instance has),
    sized by the terminal's own size set before the gate opens."""
    shells = list(tool.shells or tool.shell)
    if tool.startup_command is None:
        script, arguments = shell_tail(tool), shells
    else:
        script = STARTUP_WRAPPER + shell_tail(tool)
        arguments = [tool.startup_command, *shells]
    return ["/bin/sh", "-c", STANDBY_GATE + script, "jupyter-tool-terminal", *arguments]


def shell_tail(tool: ToolType) -> str:
    """The startup wrapper's end: start the shell (its arguments are the wrapper's), the first
    of ``shells`` the instance has; if there is none, say so in plain words."""
    missing = shlex.quote(f"\r\n[jupyter-tool-terminal] {missing_shell_text(tool, '')}\r\n")
    if tool.shells:
        start = (
            'for shell in "$@"; do\n  command -v "$shell" >/dev/null 2>&1 && exec "$shell"\ndone\n'
        )
    else:
        start = 'command -v "$1" >/dev/null 2>&1 && exec "$@"\n'
    return f"{start}printf '%s' {missing} >&2\nexit 127\n"


def shell_environment(
    tool: ToolType, *, tag: str, has_lang: bool, server: str | None = None
) -> dict[str, str]:
    """The variables a terminal gets on top of its instance's own environment.

    ``has_lang`` says whether the instance already sets ``LANG``; ``server`` is the server's
    id, for a runtime that reclaims the shells of servers that died. Nothing of the Jupyter
    server's own environment is ever part of it; ``SHELL`` names the tool type's shell;
    ``LINES``/``COLUMNS`` are left out on purpose
    (shells that see them ignore the real, resized terminal size).
    """
    # SHELL names the shell the terminal runs, as login(1) sets it (programs that start a
    # shell, `script` or an editor's `:shell`, read it); the tool type's `env` may say otherwise.
    environment = {"TERM": TERM, "SHELL": tool.shell[0]}
    if not has_lang:
        environment["LANG"] = DEFAULT_LANG
    environment.update(tool.env)
    environment[SESSION_TAG_VARIABLE] = tag
    if server is not None:
        environment[SERVER_VARIABLE] = server
    return environment
