"""``GET /tool-terminal/api/status``: what keeps a user from tool terminals, said to the user.

An extension installed into one's own JupyterLab shows nothing until tool types are configured;
containers labelled with a tool type the server does not know are not listed; a server whose
engine cannot be used has no instances. Each is a note with a link to the README section."""

from __future__ import annotations

import typing as t
import uuid

import pytest

from ..conftest import Api, InstanceFactory

# Other tests (of this run, or of others sharing the engine) leave alice's containers of every
# kind around for a moment: a test looks at the notes of its own kind only.


def _notes(body: dict[str, t.Any], kind: str) -> list[dict[str, str]]:
    return [note for note in body["notes"] if note["kind"] == kind]


class TestNoToolTypes:
    @pytest.fixture
    def tool_types(self) -> dict[str, t.Any]:
        return {}

    async def test_the_status_says_what_to_configure_and_links_the_readme(self, alice: Api) -> None:
        status, body = await alice.status("GET", "status")
        assert status == 200, body
        assert body["tool_types"] == 0
        (note,) = _notes(body, "no-tool-types")
        assert "c.ToolTerminalApp.tool_types" in note["message"]
        assert note["help"].endswith("#tool-instances-and-tool-types")
        assert note["help"].startswith("https://")


async def test_containers_of_an_unknown_tool_type_are_named(
    alice: Api, make_container: InstanceFactory
) -> None:
    make_container(owner="alice", tool="sandbox")
    spark, hadoop = f"spark-{uuid.uuid4().hex[:8]}", f"hadoop-{uuid.uuid4().hex[:8]}"
    make_container(owner="alice", tool=spark)
    make_container(owner="bob", tool=hadoop)  # another user's: not alice's business
    body = await alice.call("GET", "status")
    assert body["runtime"] == "docker"
    (note,) = _notes(body, "unknown-tool-types")
    assert spark in note["message"]
    assert hadoop not in note["message"]
    assert "sandbox" in note["message"].split("Configured: ")[1]


async def test_a_server_that_works_has_nothing_to_say(
    alice: Api, make_container: InstanceFactory
) -> None:
    make_container(owner="alice", tool="sandbox")
    body = await alice.call("GET", "status")
    assert [note for note in body["notes"] if note["kind"] != "unknown-tool-types"] == []
    for note in _notes(body, "unknown-tool-types"):
        assert "sandbox" not in note["message"].split("Configured: ")[0]


class TestNoEngineNoLocalInstances:
    @pytest.fixture
    def extension_config(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, t.Any]:
        monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
        return {"runtime": "auto", "local_instances": {}}

    async def test_the_status_says_no_engine_can_be_used(self, alice: Api) -> None:
        body = await alice.call("GET", "status")
        assert body["runtime"] == "local"
        (note,) = _notes(body, "engine")
        assert "no Docker Engine answers at tcp://127.0.0.1:9" in note["message"]
        assert note["help"].endswith("#local-instances-no-docker")


class TestDisabled:
    @pytest.fixture
    def extension_config(self, monkeypatch: pytest.MonkeyPatch) -> dict[str, t.Any]:
        monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
        return {"runtime": "docker"}

    async def test_the_status_answers_and_says_why(self, alice: Api) -> None:
        body = await alice.call("GET", "status")
        assert body["runtime"] is None
        (note,) = _notes(body, "disabled")
        assert "ToolTerminalApp.runtime is 'docker'" in note["message"]


async def test_the_status_refuses_who_is_not_logged_in(alice: Api) -> None:
    for header in ("", "token wrong-token"):
        api = Api(alice._fetch, alice._ws_fetch, {"Authorization": header})
        status, body = await api.status("GET", "status")
        assert status == 403, body
        assert "notes" not in (body or {})
