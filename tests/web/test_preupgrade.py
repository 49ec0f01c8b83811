"""Refusals before the WebSocket upgrade: HTTP 403, no exec created, no slot used."""

from __future__ import annotations

import asyncio
import typing as t

import pytest
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from ..conftest import ALICE, COOKIE_NAME, Api, InstanceFactory, exec_count


async def _upgrade_status(jp_http_port: int, path: str, headers: dict[str, str]) -> int:
    request = HTTPRequest(f"ws://127.0.0.1:{jp_http_port}{path}", headers=headers)
    try:
        ws = await websocket_connect(request)
    except HTTPClientError as error:
        return error.code
    ws.close()
    return 101


@pytest.fixture
def ws_path(jp_base_url: str) -> t.Callable[[str], str]:
    return lambda session_id: f"{jp_base_url}tool-terminal/websocket/{session_id}"


async def test_origin_checks_apply_to_cookie_authenticated_upgrades(
    alice: Api,
    make_instance: InstanceFactory,
    jp_http_port: int,
    ws_path: t.Callable[[str], str],
) -> None:
    container = make_instance()
    model = await alice.open_session(container.name)
    execs = await asyncio.to_thread(exec_count, container)
    cookie = {"Cookie": f"{COOKIE_NAME}=alice"}
    same_origin = f"http://127.0.0.1:{jp_http_port}"
    for origin in [
        "http://evil.example",
        "null",
        f"http://127.0.0.1:{jp_http_port + 1}",
        f"http://127.0.0.1:{jp_http_port}.evil.example",
        f"https://127.0.0.1.evil.example:{jp_http_port}",
    ]:
        headers = {**cookie, "Origin": origin}
        assert await _upgrade_status(jp_http_port, ws_path(model["id"]), headers) == 403, origin
    assert await asyncio.to_thread(exec_count, container) == execs
    assert (await alice.call("GET", "sessions", model["id"]))["clients"] == 0
    # The same cookie from the server's own origin is accepted.
    headers = {**cookie, "Origin": same_origin}
    assert await _upgrade_status(jp_http_port, ws_path(model["id"]), headers) == 101


async def test_foreign_host_is_refused(
    alice: Api,
    make_instance: InstanceFactory,
    jp_http_port: int,
    ws_path: t.Callable[[str], str],
    jp_serverapp: t.Any,
) -> None:
    jp_serverapp.web_app.settings["allow_remote_access"] = False
    container = make_instance()
    model = await alice.open_session(container.name)
    headers = {**ALICE, "Host": "evil.example"}
    assert await _upgrade_status(jp_http_port, ws_path(model["id"]), headers) == 403


async def test_forged_cookie_and_wrong_tokens_are_refused(
    alice: Api, make_instance: InstanceFactory, jp_http_port: int, ws_path: t.Callable[[str], str]
) -> None:
    container = make_instance()
    model = await alice.open_session(container.name)
    execs = await asyncio.to_thread(exec_count, container)
    for headers in [
        {},
        {"Cookie": f"{COOKIE_NAME}=mallory"},
        {"Cookie": "username-127-0-0-1-8888=forged"},
        {"Authorization": "token alice-secret-token-but-longer"},
        {"Authorization": "bearer nope"},
    ]:
        assert await _upgrade_status(jp_http_port, ws_path(model["id"]), headers) == 403
    path = ws_path(model["id"]) + "?token=wrong"
    assert await _upgrade_status(jp_http_port, path, {}) == 403
    assert await asyncio.to_thread(exec_count, container) == execs


@pytest.mark.parametrize(
    "session_id",
    ["..", "-h", "%2F", "a%00b", "x" * 300, "A" * 31, "A" * 33, "%2e%2e", "abc%20def"],
)
async def test_malformed_session_ids_get_the_same_403(
    alice: Api, session_id: str, jp_http_port: int, ws_path: t.Callable[[str], str]
) -> None:
    status, body = await alice.status("GET", "sessions", session_id)
    assert (status, body["message"]) == (403, "No such session for this user.")
    assert await _upgrade_status(jp_http_port, ws_path(session_id), ALICE) == 403


async def test_no_docker_passthrough_under_the_prefix(alice: Api) -> None:
    for path in [("..", "..", "containers", "json"), ("proxy", "containers"), ("containers",)]:
        status, _ = await alice.status("GET", *path)
        assert status == 404


async def test_renamed_and_replaced_containers_are_resolved_by_id(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    original = make_instance(owner="alice")
    name = original.name
    model, term = await alice.terminal(name)
    await term.run("echo $$ > /tmp/marker")
    await asyncio.to_thread(original.rename, f"{name}-old")
    impostor = await asyncio.to_thread(make_instance, owner="bob", name=name)
    # Alice's session keeps running in the container it was opened in.
    assert await term.run("cat /tmp/marker") != ""
    # Alice cannot open bob's container under the old name; bob can.
    status, _ = await alice.status("POST", "sessions", body={"instance": name})
    assert status == 403
    bobs = await bob.open_session(impostor.name)
    assert bobs["instance"] == name
    assert (await alice.call("GET", "sessions", model["id"]))["instance"] == name


async def test_cookie_authenticated_writes_need_xsrf(
    alice: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    cookie = Api(
        alice._fetch, alice._ws_fetch, {"Authorization": "", "Cookie": f"{COOKIE_NAME}=alice"}
    )
    assert (await cookie.status("GET", "instances"))[0] == 200
    status, _ = await cookie.status("POST", "sessions", body={"instance": container.name})
    assert status == 403
    assert await alice.call("GET", "sessions") == []


async def test_owner_labels_compare_exactly(alice: Api, make_instance: InstanceFactory) -> None:
    for owner in ["Alice", "alice ", "alice.", "\uff41lice", "alice\n", "alice\r\n"]:
        container = make_instance(owner=owner)
        status, _ = await alice.status("POST", "sessions", body={"instance": container.name})
        assert status == 403, owner
