"""The Binder demo of jupyter-tool-terminal: three local tool instances, no Docker.

Binder has no Docker Engine, so the tool instances are local ones: working directories in
the Binder user's home, whose terminals are shells of that user (not an isolation boundary).
postBuild copies this file to Jupyter's configuration directory.
"""

c = get_config()  # noqa: F821

# Binder has no container engine: say so instead of looking for one at every start.
c.ToolTerminalApp.runtime = "local"
# Terminals survive a page reload for a minute.
c.ToolTerminalApp.disconnect_grace = 60


def _icon(color: str, glyph: str) -> str:
    return (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
        f'<rect x="2" y="3" width="20" height="18" rx="3" fill="{color}"/>'
        f'<path d="{glyph}" stroke="#fff" stroke-width="2" fill="none" stroke-linecap="round"/>'
        "</svg>"
    )


c.ToolTerminalApp.tool_types = {
    "welcome": {
        "display_name": "Welcome tour",
        "shell": ["/bin/bash", "-i"],
        # Runs in the terminal before the shell; its exports carry into it.
        "startup_command": (
            "printf '\\033[1;32m%s\\033[0m\\n' 'Welcome to jupyter-tool-terminal!'; "
            "echo 'This terminal belongs to the tool instance \"welcome\": a working directory,'; "
            'echo "$PWD, with its own tool type (shell, startup command, variables, icon)."; '
            "echo 'Try: echo $TOOL_TERMINAL_DEMO, or Reset from the tab menu to run this again.'; "
            "export STARTED_AT=$(date +%H:%M:%S)"
        ),
        "env": {
            "TOOL_TERMINAL_DEMO": "welcome",
            "PS1": "\\[\\e[1;32m\\]welcome\\[\\e[0m\\]:\\w\\$ ",
        },
        "icon": _icon("#2e7d32", "M6 9l3 3-3 3M11 15h6"),
    },
    "notes": {
        "display_name": "Course notes",
        "shell": ["/bin/bash", "-i"],
        # Relative to the instance's root: ~/tool-instances/notes/lesson-1.
        "workdir": "/lesson-1",
        "startup_command": (
            "echo 'Lesson 1: your files are in' \"$PWD\"; "
            "[ -e README ] || echo 'Write your answers here.' > README; ls -l"
        ),
        "env": {"TOOL_TERMINAL_DEMO": "notes", "EDITOR": "nano", "PS1": "notes:\\w\\$ "},
        "icon": _icon("#1565c0", "M7 8h10M7 12h10M7 16h6"),
    },
    "python": {
        "display_name": "Python scratchpad",
        # A "shell" is any program: here the Python REPL, after a startup line in /bin/sh.
        "shell": ["python3", "-q"],
        "startup_command": "echo 'Python in its own folder; exit() ends the terminal.'",
        "env": {"TOOL_TERMINAL_DEMO": "python"},
        "icon": _icon("#f9a825", "M8 8l4 4-4 4M13 16h3"),
    },
}

c.ToolTerminalApp.local_instances = {
    name: {"tool": name, "root": f"~/tool-instances/{name}"}
    for name in ("welcome", "notes", "python")
}
