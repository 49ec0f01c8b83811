"""A shell the tool instance lacks: plain words, a list of shells to try, the operator told once.

And a container labelled with a tool type this server does not know: the operator's log names it.
"""

from __future__ import annotations

import logging
import typing as t
import uuid

import pytest

from jupyter_tool_terminal.runtime.shells import is_start_failure
from jupyter_tool_terminal.tooltypes import ToolTypeError, parse_tool_type

from ..conftest import (
    BASE_PROCESSES,
    LEASE_PROCESS,
    TOOL_TYPES,
    Api,
    InstanceFactory,
    wait_for_processes,
    wait_until,
)

SHELL_TYPES = {
    **TOOL_TYPES,
    # The test image has /bin/sh and /bin/bash, and no zsh.
    "fallback": {"display_name": "Fallback", "shells": ["/bin/zsh", "/bin/sh"]},
    "fallback-startup": {
        "display_name": "Fallback Startup",
        "shells": ["/bin/zsh", "/bin/sh"],
        "startup_command": "echo STARTED",
    },
    "zsh-only": {"display_name": "Zsh Only", "shell": ["/bin/zsh"]},
    "zsh-only-startup": {
        "display_name": "Zsh Startup",
        "shell": ["/bin/zsh"],
        "startup_command": "echo STARTED",
    },
    "no-shell": {"display_name": "No Shell", "shells": ["/bin/zsh", "/bin/fish"]},
}


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return SHELL_TYPES


def test_shells_is_a_list_of_absolute_paths() -> None:
    tool = parse_tool_type("t", {"shells": ["/bin/bash", "/bin/sh"]})
    assert tool.shells == ("/bin/bash", "/bin/sh")
    assert tool.shell == ("/bin/bash",)
    assert tool.shell_names == "/bin/bash or /bin/sh"
    assert parse_tool_type("t", {"shells": ["/bin/sh"]}).shells == ()
    for bad in ([], ["sh"], "/bin/sh", [1]):
        with pytest.raises(ToolTypeError, match="'shells' must be"):
            parse_tool_type("t", {"shells": bad})
    with pytest.raises(ToolTypeError, match="not both"):
        parse_tool_type("t", {"shell": ["/bin/sh"], "shells": ["/bin/sh"]})


@pytest.mark.parametrize("tool", ["fallback", "fallback-startup"])
async def test_the_first_shell_the_instance_has_starts(
    alice: Api, make_container: InstanceFactory, tool: str
) -> None:
    container = make_container(tool=tool)
    for _ in range(2):  # the second time from what the first found
        _, client = await alice.terminal(container.name)
        assert (await client.run("echo $((40+2))")).strip() == "42"
        assert "zsh" not in client.output
        client.ws.close()


async def test_none_of_the_shells_is_said_in_plain_words_and_logged_once(
    alice: Api, make_container: InstanceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    container = make_container(tool="no-shell")
    for _ in range(2):
        status, body = await alice.status("POST", "sessions", body={"instance": container.name})
        assert status == 503
        assert body["message"] == (
            f"The tool instance {container.name} has none of the shells /bin/zsh or /bin/fish "
            '(the shell of tool type "No Shell"), so no terminal can start in it. Ask whoever '
            "runs this server to install it in the image, or to list the shells the image has "
            'in the tool type\'s "shells" (for example ["/bin/bash", "/bin/sh"]).'
        )
    assert "OCI runtime" not in caplog.text
    told = [r for r in caplog.records if "the shell of tool type" in r.getMessage()]
    assert len(told) == 1
    assert container.name in told[0].getMessage()
    assert told[0].levelno == logging.WARNING
    # Nothing was left running in the container.
    expected = BASE_PROCESSES | {LEASE_PROCESS}
    assert set(await wait_for_processes(container, only=expected)) <= expected


async def test_a_missing_shell_is_said_in_the_terminal_and_logged_once(
    alice: Api, make_container: InstanceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    container = make_container(tool="zsh-only")
    for _ in range(2):
        model = await alice.open_session(container.name)

        async def ended(session_id: str = model["id"]) -> bool:
            return (await alice.status("GET", "sessions", session_id))[0] == 403

        await wait_until(ended, timeout=10)
    told = [r for r in caplog.records if "the shell of tool type" in r.getMessage()]
    assert len(told) == 1
    assert f"tool instance {container.name} has no /bin/zsh" in told[0].getMessage()


async def test_a_missing_shell_behind_a_startup_command_is_said_in_the_terminal(
    alice: Api, make_container: InstanceFactory
) -> None:
    container = make_container(tool="zsh-only-startup")
    _, client = await alice.terminal(container.name)
    await client.expect(
        r'This tool instance has no /bin/zsh \(the shell of tool type "Zsh Startup"\)'
    )
    assert (await client.expect_frame("exit"))[1] == 127


def test_the_engines_own_words_are_recognised() -> None:
    # (A shell removed after a container's first session fails at the engine: these words are
    # then replaced in the terminal by the plain ones.)
    docker_words = (
        b"OCI runtime exec failed: exec failed: unable to start container process: exec: "
        b'"/bin/zsh": stat /bin/zsh: no such file or directory: unknown\r\n'
    )
    podman_words = b"crun: executable file `/bin/zsh` not found in $PATH: No such file or directory"
    assert is_start_failure(docker_words)
    assert is_start_failure(podman_words)
    assert not is_start_failure(b"$ ")


async def test_an_unknown_tool_type_label_is_logged_once(
    alice: Api, make_container: InstanceFactory, caplog: pytest.LogCaptureFixture
) -> None:
    tool = f"postgres-{uuid.uuid4().hex[:6]}"
    container = make_container(tool=tool)
    for _ in range(2):
        assert container.name not in [i["id"] for i in await alice.call("GET", "instances")]
    told = [r for r in caplog.records if f"jupyter-tool-terminal.tool={tool}" in r.getMessage()]
    assert len(told) == 1
    assert container.name in told[0].getMessage()
    # The owner is told which container and which label (the launcher shows it).
    body = await alice.call("GET", "status")
    (note,) = [n for n in body["notes"] if n["kind"] == "unknown-tool-types"]
    assert f"{container.name} has jupyter-tool-terminal.tool={tool}" in note["message"]
