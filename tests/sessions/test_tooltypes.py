"""Tool-type configuration is validated at start-up, with errors naming the tool type."""

from __future__ import annotations

import typing as t

import pytest

from jupyter_tool_terminal.tooltypes import ToolTypeError, parse_tool_type, parse_tool_types

from ..conftest import Api


def test_defaults() -> None:
    tool = parse_tool_type("db", {})
    assert tool.shell == ("/bin/sh",)
    assert tool.display_name == "db"
    assert tool.startup_command is None
    assert tool.public_model() == {
        "tool": "db",
        "display_name": "db",
        "has_startup_command": False,
        "icon": None,
        "user": None,
    }


def test_full_tool_type() -> None:
    tool = parse_tool_type(
        "postgres",
        {
            "display_name": "PostgreSQL",
            "shell": ["/bin/bash", "-l"],
            "startup_command": "psql -U postgres",
            "user": "postgres",
            "workdir": "/data",
            "env": {"PGDATABASE": "app"},
            "icon": "<svg xmlns='http://www.w3.org/2000/svg'/>",
        },
    )
    assert tool.shell == ("/bin/bash", "-l")
    assert tool.env == {"PGDATABASE": "app"}
    assert tool.public_model()["has_startup_command"] is True
    # The user the shell runs as, for the status bar (none: the image's own).
    assert tool.public_model()["user"] == "postgres"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ({"shel": ["/bin/sh"]}, "unknown key(s) 'shel'"),
        ({"shell": "/bin/sh"}, "'shell' must be a non-empty list of strings"),
        ({"shell": []}, "'shell' must be a non-empty list of strings"),
        ({"shell": ["/bin/sh", 3]}, "'shell' must be a non-empty list of strings"),
        ({"shell": [""]}, "'shell' must be a non-empty list of strings"),
        ({"workdir": "data"}, "'workdir' must be an absolute path"),
        ({"env": ["A=1"]}, "'env' must be a mapping"),
        ({"env": {"A B": "1"}}, "invalid variable name"),
        ({"env": {"A": 1}}, "'env' value of 'A' must be a string"),
        ({"user": 0}, "'user' must be a string"),
        ({"display_name": ""}, "'display_name' must be a non-empty string"),
        ({"icon": "not svg"}, "'icon' must be an SVG document"),
        ("bash", "must be a mapping of settings"),
    ],
)
def test_invalid_tool_types_name_the_tool_and_the_problem(spec: t.Any, problem: str) -> None:
    with pytest.raises(ToolTypeError) as raised:
        parse_tool_types({"postgres": spec})
    assert str(raised.value).startswith("tool type 'postgres': ")
    assert problem in str(raised.value)


def test_invalid_tool_type_name() -> None:
    with pytest.raises(ToolTypeError, match="the name must be"):
        parse_tool_types({"../x": {}})


class TestMisconfiguredServer:
    """A misconfigured tool type disables the extension: no terminal is served."""

    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {"good": {}, "bad": {"shell": "/bin/sh"}}

    async def test_serves_no_terminal_and_logs_the_problem(
        self, capfd: pytest.CaptureFixture[str], alice: Api
    ) -> None:
        status, body = await alice.status("GET", "instances")
        assert status == 503
        assert "not available" in body["message"]
        status, _ = await alice.status("POST", "sessions", body={"instance": "anything"})
        assert status == 503
        # Logged at start-up, on the server's error stream.
        logged = capfd.readouterr().err
        assert "jupyter_tool_terminal is disabled: tool type 'bad': 'shell' must be" in logged


def test_cleanup_is_session_or_instance() -> None:
    assert parse_tool_type("a", {}).cleanup == "session"
    assert parse_tool_type("a", {"cleanup": "instance"}).cleanup == "instance"
    with pytest.raises(ToolTypeError, match="cleanup"):
        parse_tool_type("a", {"cleanup": "everything"})


@pytest.mark.parametrize("name", ["db\n", "db\r\n", "\ndb"])
def test_a_tool_name_with_a_newline_is_refused(name: str) -> None:
    with pytest.raises(ToolTypeError, match="the name must be"):
        parse_tool_type(name, {})


@pytest.mark.parametrize("variable", ["PGDATABASE\n", "A\r\n", "\nA"])
def test_an_env_name_with_a_newline_is_refused(variable: str) -> None:
    with pytest.raises(ToolTypeError, match="invalid variable name"):
        parse_tool_type("db", {"env": {variable: "x"}})
