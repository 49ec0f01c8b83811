"""Access control: authenticated users only, each on their own instances and sessions."""

from __future__ import annotations

import asyncio
import typing as t

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError

from jupyter_tool_terminal.manager import valid_session_id
from jupyter_tool_terminal.runtime.base import valid_instance_id

from ..conftest import Api, InstanceFactory, both_runtimes

UNKNOWN_SESSION = "A" * 32


async def _ws_status(api: Api, session_id: str, headers: dict[str, str] | None = None) -> int:
    try:
        ws = await api._ws_fetch(
            "tool-terminal", "websocket", session_id, headers=headers or api.headers
        )
    except HTTPClientError as error:
        return error.code
    ws.close()
    return 101


@both_runtimes
async def test_another_user_gets_the_same_403_as_for_unknown_ids(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(owner="alice")
    model, term = await alice.terminal(container.name)

    assert await bob.call("GET", "instances") == [] or all(
        i["id"] != container.name for i in await bob.call("GET", "instances")
    )
    assert await bob.call("GET", "sessions") == []
    forbidden = await bob.status("POST", "sessions", body={"instance": container.name})
    missing = await bob.status("POST", "sessions", body={"instance": "no-such-instance"})
    assert forbidden == missing
    assert forbidden[0] == 403
    for method, path in [("GET", ()), ("DELETE", ()), ("POST", ("reset",))]:
        theirs = await bob.status(method, "sessions", model["id"], *path)
        unknown = await bob.status(method, "sessions", UNKNOWN_SESSION, *path)
        assert theirs == unknown
        assert theirs[0] == 403
    assert await _ws_status(bob, model["id"]) == 403
    assert await _ws_status(bob, UNKNOWN_SESSION) == 403
    # Alice's session is untouched by all of that.
    assert await term.run("echo alive") == "alive\r\n"
    assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 1


@both_runtimes
async def test_unauthenticated_requests_are_refused(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model = await alice.open_session(container.name)
    anonymous = Api(alice._fetch, alice._ws_fetch, {"Authorization": ""})
    wrong = Api(alice._fetch, alice._ws_fetch, {"Authorization": "token wrong-token"})
    for api in (anonymous, wrong):
        assert (await api.status("GET", "instances"))[0] == 403
        assert (await api.status("GET", "sessions"))[0] == 403
        status, _ = await api.status("POST", "sessions", body={"instance": container.name})
        assert status == 403
        assert await _ws_status(api, model["id"]) == 403
    assert len(await alice.call("GET", "sessions")) == 1


@pytest.mark.parametrize(
    "instance",
    ["-h", "..", "a/b", "%2F", "x\x00y", "a" * 300, "\uff41lice", "--privileged", ""],
)
async def test_malformed_instance_ids_are_refused(
    alice: Api, instance: str, make_instance: InstanceFactory
) -> None:
    status, body = await alice.status("POST", "sessions", body={"instance": instance})
    assert status == 403
    assert body["message"] == "No such tool instance for this user."


async def test_an_instance_id_with_a_trailing_newline_never_reaches_the_engine(
    alice: Api,
    make_instance: InstanceFactory,
    runtime_calls: t.Callable[[str], list[tuple[t.Any, ...]]],
) -> None:
    # `$` matches before a final newline: an anchored pattern let "name\n" through to the
    # engine (GET /containers/name%0A/json).
    container = make_instance()
    asked = runtime_calls("get_instance")
    for suffix in ["\n", "\r\n", "\n\n"]:
        status, body = await alice.status(
            "POST", "sessions", body={"instance": container.name + suffix}
        )
        assert (status, body["message"]) == (403, "No such tool instance for this user.")
    assert asked == []
    assert (await alice.status("POST", "sessions", body={"instance": container.name}))[0] == 201
    assert asked == [(container.name,)]


async def test_an_engine_prefixed_id_never_reaches_the_only_engine(
    alice: Api,
    make_instance: InstanceFactory,
    runtime_calls: t.Callable[[str], list[tuple[t.Any, ...]]],
) -> None:
    # With one engine no id has an ENGINE/ part: "a/b" went to the Docker API as a path
    # (GET /containers/a/b/json); it is refused before any engine call.
    container = make_instance()
    engine_calls = runtime_calls("call")
    for instance in ["a/b", f"local/{container.name}", f"{container.name}/x"]:
        status, body = await alice.status("POST", "sessions", body={"instance": instance})
        assert (status, body["message"]) == (403, "No such tool instance for this user.")
    assert engine_calls == []
    assert (await alice.status("POST", "sessions", body={"instance": container.name}))[0] == 201
    assert engine_calls[0][:2] == ("inspect_container", container.name)


@pytest.mark.parametrize(
    "body", ["", "{", "[]", '{"instance": 3}', '{"other": "x"}', '{"instance": NaN}', "null"]
)
async def test_malformed_bodies_are_400(alice: Api, body: str) -> None:
    status, reply = await alice.status("POST", "sessions", body=body)
    assert status == 400
    assert "instance" in reply["message"]


async def test_container_id_prefix_is_not_an_instance_id(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    status, _ = await alice.status("POST", "sessions", body={"instance": container.id[:12]})
    assert status == 403


async def test_stopped_instance_is_409(
    alice: Api, make_instance: InstanceFactory, docker_client: t.Any
) -> None:
    container = make_instance()
    await asyncio.to_thread(container.stop, timeout=0)
    instances = await alice.call("GET", "instances")
    assert [i["status"] for i in instances if i["id"] == container.name] == ["exited"]
    status, body = await alice.status("POST", "sessions", body={"instance": container.name})
    assert status == 409
    assert "not running" in body["message"]


class RecordingAuthorizer(Authorizer):
    """Allows everything but ``execute``, and records what it was asked."""

    calls: t.ClassVar[list[tuple[str, str]]] = []

    async def is_authorized(self, handler: t.Any, user: t.Any, action: str, resource: str) -> bool:
        self.calls.append((action, resource))
        return action != "execute"


class TestAuthorizer:
    """The authorizer is asked for read/write/execute on the documented resource."""

    @pytest.fixture
    def jp_server_config(self, jp_server_config: t.Any) -> t.Any:
        jp_server_config.ServerApp.authorizer_class = RecordingAuthorizer
        RecordingAuthorizer.calls = []
        return jp_server_config

    async def test_execute_is_required_for_the_websocket(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        container = make_instance()
        await alice.call("GET", "instances")
        model = await alice.open_session(container.name)
        await alice.call("GET", "sessions")
        assert await _ws_status(alice, model["id"]) == 403
        await alice.call("DELETE", "sessions", model["id"])
        ours = [call for call in RecordingAuthorizer.calls if call[1].startswith("jupyter_tool")]
        assert ours == [
            ("read", "jupyter_tool_terminal:terminals"),
            ("write", "jupyter_tool_terminal:terminals"),
            ("read", "jupyter_tool_terminal:terminals"),
            ("execute", "jupyter_tool_terminal:terminals"),
            ("write", "jupyter_tool_terminal:terminals"),
        ]


class TestDefaultIdentityProvider:
    """With Jupyter's own token identity, every authenticated request acts as ``owner``."""

    @pytest.fixture
    def jp_server_config(self, jp_server_config: t.Any) -> t.Any:
        del jp_server_config.ServerApp["identity_provider_class"]
        jp_server_config.ToolTerminalApp.owner = "carol"
        return jp_server_config

    @pytest.fixture
    def jp_auth_header(self, jp_serverapp: t.Any) -> dict[str, str]:
        return {"Authorization": f"token {jp_serverapp.identity_provider.token}"}

    async def test_owner_label_is_the_configured_owner(
        self,
        jp_fetch: t.Any,
        jp_ws_fetch: t.Any,
        jp_auth_header: dict[str, str],
        make_instance: InstanceFactory,
    ) -> None:
        api = Api(jp_fetch, jp_ws_fetch, jp_auth_header)
        carols = make_instance(owner="carol")
        make_instance(owner="alice")
        instances = await api.call("GET", "instances")
        assert [i["id"] for i in instances] == [carols.name]
        _, term = await api.terminal(carols.name)
        assert await term.run("echo $((1+1))") == "2\r\n"


def test_id_patterns_match_the_whole_string() -> None:
    assert valid_instance_id("box-1")
    assert valid_session_id("A" * 32)
    for bad in ["\n", "\r", "\r\n", " ", "\x00"]:
        assert not valid_instance_id("box-1" + bad), repr(bad)
        assert not valid_session_id("A" * 32 + bad), repr(bad)
        assert not valid_instance_id(bad + "box-1"), repr(bad)


async def test_a_session_id_with_a_trailing_newline_is_refused(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, _ = await alice.terminal(container.name)
    for method, path in [("GET", ()), ("DELETE", ()), ("POST", ("reset",))]:
        status, body = await alice.status(method, "sessions", model["id"] + "\n", *path)
        assert (status, body["message"]) == (403, "No such session for this user."), method
    assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 1


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
async def test_reset_only_answers_post(
    alice: Api, make_instance: InstanceFactory, method: str
) -> None:
    container = make_instance()
    model, term = await alice.terminal(container.name)
    body = "{}" if method in ("PUT", "PATCH") else None
    status, reply = await alice.status(method, "sessions", model["id"], "reset", body=body)
    assert status == 405, (status, reply)
    assert "message" in reply
    # Nothing happened to the session.
    assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 1
    assert await term.run("echo alive") == "alive\r\n"
