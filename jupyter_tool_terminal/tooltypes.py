"""Tool types: the operator's description of how a terminal starts in each kind of tool instance."""

from __future__ import annotations

import dataclasses
import re
import typing as t

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


class _Setting(t.NamedTuple):
    """One key of a tool type's configuration, and what its value must be."""

    #: What the value must be, as a refusal says it.
    expects: str
    #: Whether a value is one (NUL characters in an optional string are refused before).
    valid: t.Callable[[t.Any], bool]
    #: Whether ``None`` stands for "not set" (the optional settings are strings).
    optional: bool = False
    #: Whether a refused string is quoted back (not an icon's SVG document).
    quoted: bool = True


def _text(value: t.Any) -> bool:
    return isinstance(value, str) and bool(value)


def _arguments(value: t.Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(_text(arg) and "\x00" not in arg for arg in value)
    )


def _shell_paths(value: t.Any) -> bool:
    return _arguments(value) and all(path.startswith("/") for path in value)


def _flag(value: t.Any) -> bool:
    return isinstance(value, bool)


#: The keys an operator may set for a tool type, in the order they are checked.
SETTINGS: dict[str, _Setting] = {
    "display_name": _Setting("a non-empty string", _text, optional=True),
    "shell": _Setting("a non-empty list of strings", _arguments),
    "shells": _Setting(
        "a non-empty list of absolute paths of shells, tried in order", _shell_paths
    ),
    "startup_command": _Setting("a string", _text, optional=True),
    "user": _Setting("a string", _text, optional=True),
    "workdir": _Setting(
        "an absolute path", lambda value: _text(value) and value.startswith("/"), optional=True
    ),
    # (an empty value is no variable at all)
    "env": _Setting(
        "a mapping of variable names to strings",
        lambda value: isinstance(value, t.Mapping) or not value,
    ),
    "icon": _Setting(
        "an SVG document as a string",
        lambda value: _text(value) and "<svg" in value,
        optional=True,
        quoted=False,
    ),
    "cleanup": _Setting('"session" or "instance"', CLEANUP_MODES.__contains__),
    "record": _Setting("true or false", _flag),
    "agent_secrets": _Setting("true or false", _flag),
}


def _fail(name: str, problem: str) -> t.NoReturn:
    msg = f"tool type {name!r}: {problem}"
    raise ToolTypeError(msg)


def _check(name: str, key: str, value: t.Any) -> None:
    """Refuse ``value`` for ``key`` unless it is what the setting expects."""
    setting = SETTINGS[key]
    if value is None and setting.optional:
        return
    if setting.optional and isinstance(value, str) and "\x00" in value:
        _fail(name, f"{key!r} must not contain a NUL character")
    if not setting.valid(value):
        document = isinstance(value, str) and value and not setting.quoted
        shown = "" if document else f", not {value!r}"
        _fail(name, f"{key!r} must be {setting.expects}{shown}")


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
    unknown = sorted(set(spec) - set(SETTINGS))
    if unknown:
        _fail(
            name,
            f"unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(SETTINGS)}",
        )
    for key in SETTINGS:
        if key in spec:
            _check(name, key, spec[key])
    if "shell" in spec and "shells" in spec:
        _fail(name, "set 'shell' (one command) or 'shells' (shells to try in order), not both")
    env: t.Mapping[t.Any, t.Any] = spec.get("env") or {}
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            _fail(name, f"'env' has an invalid variable name {key!r}")
        if not isinstance(value, str) or "\x00" in value:
            _fail(name, f"'env' value of {key!r} must be a string without NUL")

    shells = tuple(spec.get("shells", ()))
    return ToolType(
        name=name,
        display_name=spec.get("display_name") or name,
        # (with ``shells``, the first one stands for them where one command is needed)
        shell=tuple(spec.get("shell", shells[:1] or ("/bin/sh",))),
        shells=shells if len(shells) > 1 else (),
        startup_command=spec.get("startup_command"),
        user=spec.get("user"),
        workdir=spec.get("workdir"),
        env=dict(env),
        icon=spec.get("icon"),
        cleanup=spec.get("cleanup", "session"),
        record=spec.get("record", False),
        agent_secrets=spec.get("agent_secrets", False),
    )


def parse_tool_types(config: t.Mapping[str, t.Any]) -> dict[str, ToolType]:
    """Validate every configured tool type; the first invalid one raises :class:`ToolTypeError`."""
    return {name: parse_tool_type(name, spec) for name, spec in config.items()}
