"""The shell's environment is curated: nothing of the Jupyter server's leaks into it."""

from __future__ import annotations

import os
import pwd
import typing as t

import pytest

from ..conftest import Api, InstanceFactory, both_runtimes

SECRETS = {
    "JUPYTER_TOKEN": "server-token-must-not-leak",
    "JUPYTERHUB_API_TOKEN": "hub-token-must-not-leak",
    "JPY_API_TOKEN": "jpy-token-must-not-leak",
    "AWS_SECRET_ACCESS_KEY": "cloud-key-must-not-leak",
}


@pytest.fixture
def jp_environ(jp_environ: t.Any, monkeypatch: pytest.MonkeyPatch) -> t.Any:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return jp_environ


@both_runtimes
async def test_env_shows_no_server_variables(
    alice: Api, make_instance: InstanceFactory, runtime_name: str
) -> None:
    container = make_instance()
    _, term = await alice.terminal(container.name)
    env = await term.run("env")
    for name, value in SECRETS.items():
        assert name not in env
        assert value not in env
    variables = dict(line.split("=", 1) for line in env.split("\r\n") if "=" in line)
    assert variables["TERM"] == "xterm-256color"
    assert variables["TOOL_GREETING"] == "hi"
    assert variables["LANG"] == "C.UTF-8"
    assert "LINES" not in variables
    assert "COLUMNS" not in variables
    # The shell it runs (the sandbox tool type's), as login(1) would set it.
    assert variables["SHELL"] == "/bin/sh"
    if runtime_name == "docker":
        # The container's own environment is kept.
        assert variables["PATH"] == "/bin"
    else:
        # A local shell gets an allow-list of the server's, its user's names and its home.
        assert variables["PATH"] == os.environ["PATH"]
        user = pwd.getpwuid(os.getuid())
        assert (variables["USER"], variables["HOME"]) == (user.pw_name, user.pw_dir)


class TestToolTypeSettings:
    """User, working directory and environment come from the tool type, never the client."""

    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {
            "student": {
                "shell": ["/bin/sh", "-l"],
                "user": "student",
                "workdir": "/home/student",
                "env": {"LANG": "en_US.UTF-8"},
            }
        }

    async def test_user_workdir_and_env_come_from_the_tool_type(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance(tool="student")
        _, term = await alice.terminal(container.name)
        assert (
            await term.run("id -un; pwd; echo $LANG")
            == "student\r\n/home/student\r\nen_US.UTF-8\r\n"
        )

    async def test_client_fields_do_not_choose_what_runs(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance(tool="student")
        body = {
            "instance": container.name,
            "cmd": ["/bin/sh", "-c", "touch /tmp/pwned"],
            "user": "root",
            "workdir": "/",
            "env": {"EVIL": "1"},
            "privileged": True,
        }
        model = await alice.call("POST", "sessions", body=body)
        term = await alice.connect(model["id"])
        assert (
            await term.run("id -un; pwd; echo x${EVIL}x; ls /tmp")
            == "student\r\n/home/student\r\nxx\r\n"
        )
