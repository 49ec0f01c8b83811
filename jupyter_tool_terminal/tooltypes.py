"""Tool types: the operator's description of how a terminal starts in each kind of tool instance."""

from __future__ import annotations

import dataclasses
import re
import typing as t

#: The keys an operator may set for a tool type, with a short description used in error messages.
TOOL_TYPE_KEYS: dict[str, str] = {
    "display_name": "a non-empty string",
    "shell": "a non-empty list of strings",
    "shells": "a non-empty list of absolute paths of shells, tried in order",
    "startup_command": "a string",
    "user": "a string",
    "workdir": "an absolute path",
    "env": "a mapping of variable names to strings",
    "icon": "an SVG document as a string",
    "cleanup": '"session" or "instance"',
    "record": "true or false",
    "agent_secrets": "true or false",
}

#: What a session's end kills: its own processes (found by tag, terminal session and parent),
#: or, once the instance's last session ends, every process started since its first one.
CLEANUP_MODES = ("session", "instance")

# Used with ``fullmatch``: ``$`` would also match before a final newline.
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ToolTypeError(ValueError):
    """A tool type in the configuration is not valid; the message names it and the problem."""


@dataclasses.dataclass(frozen=True)
class ToolType:
    """One validated tool type: everything needed to start a terminal in its instances.

    Nothing here ever comes from a client: it is read once from ``ToolTerminalApp.tool_types``.
    """

    name: str
    display_name: str
    shell: tuple[str, ...] = ("/bin/sh",)
    #: The shells to try in order (``shells``): the first one the instance has is started,
    #: without arguments. Empty: ``shell`` is the only one.
    shells: tuple[str, ...] = ()
    startup_command: str | None = None
    user: str | None = None
    workdir: str | None = None
    env: t.Mapping[str, str] = dataclasses.field(default_factory=dict)
    icon: str | None = None
    #: One of :data:`CLEANUP_MODES`.
    cleanup: str = "session"
    #: Whether each session is recorded (asciicast v2, redacted) in the recording directory.
    record: bool = False
    #: Whether an AI agent's terminal gets the values of secret-named variables (the
    #: instance's own and ``env``'s); by default they are emptied in an agent's shell.
    agent_secrets: bool = False

    @property
    def shell_names(self) -> str:
        """The shell(s) this tool type starts, for messages ("/bin/bash or /bin/sh")."""
        return " or ".join(self.shells) if self.shells else self.shell[0]

    def public_model(self) -> dict[str, t.Any]:
        """Return what a client may know of this tool type: its names and icon, and the user
        its shells run as (``None``: the image's own), which the user is shown; never its
        command, environment or working directory."""
        return {
            "tool": self.name,
            "display_name": self.display_name,
            "has_startup_command": self.startup_command is not None,
            "icon": self.icon,
            "user": self.user,
        }


def _fail(name: str, problem: str) -> t.NoReturn:
    msg = f"tool type {name!r}: {problem}"
    raise ToolTypeError(msg)


def _optional_string(name: str, spec: t.Mapping[str, t.Any], key: str) -> str | None:
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        _fail(name, f"{key!r} must be {TOOL_TYPE_KEYS[key]}, not {value!r}")
    if "\x00" in value:
        _fail(name, f"{key!r} must not contain a NUL character")
    return value


def parse_tool_type(name: t.Any, spec: t.Any) -> ToolType:
    """Validate one tool type's configuration and return it as a :class:`ToolType`.

    Raises :class:`ToolTypeError` naming the tool type and the problem: an unknown key, a shell
    that is not a non-empty list of strings, a relative working directory, and so on. Nothing
    is ever silently replaced by a default.
    """
    if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
        _fail(str(name), "the name must be 1-64 letters, digits, '_', '.' or '-'")
    if not isinstance(spec, t.Mapping):
        _fail(name, f"must be a mapping of settings, not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(TOOL_TYPE_KEYS))
    if unknown:
        _fail(
            name,
            f"unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(TOOL_TYPE_KEYS)}",
        )

    shell: t.Any = spec.get("shell", ["/bin/sh"])
    if (
        not isinstance(shell, list | tuple)
        or not shell
        or not all(isinstance(arg, str) and arg and "\x00" not in arg for arg in shell)
    ):
        _fail(name, f"'shell' must be {TOOL_TYPE_KEYS['shell']}, not {shell!r}")

    shells: t.Any = spec.get("shells", ())
    if "shells" in spec:
        if "shell" in spec:
            _fail(name, "set 'shell' (one command) or 'shells' (shells to try in order), not both")
        if (
            not isinstance(shells, list | tuple)
            or not shells
            or not all(
                isinstance(path, str) and path.startswith("/") and "\x00" not in path
                for path in shells
            )
        ):
            _fail(name, f"'shells' must be {TOOL_TYPE_KEYS['shells']}, not {shells!r}")
        shell = [shells[0]]

    env: t.Any = spec.get("env") or {}
    if not isinstance(env, t.Mapping):
        _fail(name, f"'env' must be {TOOL_TYPE_KEYS['env']}, not {env!r}")
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            _fail(name, f"'env' has an invalid variable name {key!r}")
        if not isinstance(value, str) or "\x00" in value:
            _fail(name, f"'env' value of {key!r} must be a string without NUL")

    workdir = _optional_string(name, spec, "workdir")
    if workdir is not None and not workdir.startswith("/"):
        _fail(name, f"'workdir' must be {TOOL_TYPE_KEYS['workdir']}, not {workdir!r}")

    icon = _optional_string(name, spec, "icon")
    if icon is not None and "<svg" not in icon:
        _fail(name, f"'icon' must be {TOOL_TYPE_KEYS['icon']}")

    cleanup = spec.get("cleanup", "session")
    if cleanup not in CLEANUP_MODES:
        _fail(name, f"'cleanup' must be {TOOL_TYPE_KEYS['cleanup']}, not {cleanup!r}")
    record = spec.get("record", False)
    if not isinstance(record, bool):
        _fail(name, f"'record' must be {TOOL_TYPE_KEYS['record']}, not {record!r}")
    agent_secrets = spec.get("agent_secrets", False)
    if not isinstance(agent_secrets, bool):
        _fail(
            name,
            f"'agent_secrets' must be {TOOL_TYPE_KEYS['agent_secrets']}, not {agent_secrets!r}",
        )

    return ToolType(
        name=name,
        record=record,
        agent_secrets=agent_secrets,
        display_name=_optional_string(name, spec, "display_name") or name,
        shell=tuple(shell),
        shells=tuple(shells) if len(shells) > 1 else (),
        startup_command=_optional_string(name, spec, "startup_command"),
        user=_optional_string(name, spec, "user"),
        workdir=workdir,
        env=dict(env),
        icon=icon,
        cleanup=cleanup,
    )


def parse_tool_types(config: t.Mapping[str, t.Any]) -> dict[str, ToolType]:
    """Validate every configured tool type; the first invalid one raises :class:`ToolTypeError`."""
    return {name: parse_tool_type(name, spec) for name, spec in config.items()}
