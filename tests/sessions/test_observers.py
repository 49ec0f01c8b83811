"""Observers: an owner shares one session read-only with another user, and revokes it."""

from __future__ import annotations

import json
import typing as t

import pytest
from tornado.httpclient import HTTPClientError

from ..conftest import Api, AuditEvents, InstanceFactory, wait_until
from ..support.terminal_client import TerminalClient

#: `max_clients_per_observer`'s default: connections one observer may hold to one session.
MAX_CLIENTS_PER_OBSERVER = 2


def _path(session_id: str, *rest: str) -> tuple[str, ...]:
    return ("sessions", session_id, "observers", *rest)


async def test_grant_list_and_revoke_with_clear_refusals(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model = await alice.open_session(container.name)
    sid = model["id"]
    assert await alice.call("GET", *_path(sid)) == []
    assert await alice.status("POST", *_path(sid), body={"user": "bob"}) == (201, ["bob"])
    status, body = await alice.status("POST", *_path(sid), body={"user": "bob"})
    assert status == 409
    assert "already shared" in body["message"]
    assert await alice.call("GET", *_path(sid)) == ["bob"]
    for bad in ({"user": "alice"}, {"user": "b b"}, {"user": "a/b"}, {"user": 5}, {}, "[]", "{"):
        status, body = await alice.status("POST", *_path(sid), body=bad)
        assert status == 400, bad
        assert body["message"]
    # Not the caller's session, or no such session: 403, the same answer.
    assert (await bob.status("POST", *_path(sid), body={"user": "carol"}))[0] == 403
    assert (await bob.status("GET", *_path(sid)))[0] == 403
    assert (await bob.status("DELETE", *_path(sid, "bob")))[0] == 403
    unknown = "A" * 32
    assert (await alice.status("POST", *_path(unknown), body={"user": "bob"}))[0] == 403
    assert (await alice.status("DELETE", *_path(sid, "bob")))[0] == 204
    assert await alice.call("GET", *_path(sid)) == []
    assert (await alice.status("DELETE", *_path(sid, "bob")))[0] == 404


async def test_observers_see_the_shared_session_and_nothing_else(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    shared = await alice.open_session(make_instance().name)
    await alice.open_session(make_instance().name)  # not shared
    await alice.call("POST", *_path(shared["id"]), body={"user": "bob"})
    assert await bob.call("GET", "sessions") == []
    observed = await bob.call("GET", "sessions", params={"role": "observer"})
    assert [(s["id"], s["owner"], s["role"]) for s in observed] == [
        (shared["id"], "alice", "observer")
    ]
    assert await alice.call("GET", "sessions", params={"role": "observer"}) == []
    assert (await bob.status("GET", "sessions", params={"role": "bogus"}))[0] == 400
    for method, path in (
        ("GET", ("sessions", shared["id"])),
        ("DELETE", ("sessions", shared["id"])),
        ("POST", ("sessions", shared["id"], "reset")),
    ):
        assert (await bob.status(method, *path))[0] == 403, (method, path)
    assert len(await alice.call("GET", "sessions")) == 2


async def test_an_observer_sees_screen_and_live_output_but_cannot_type_or_resize(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance()
    model, owner = await alice.terminal(container.name)
    owner.send("set_size", 24, 80)
    assert await owner.size_becomes("24 80") == "24 80"
    await owner.run("echo before-sharing")
    await alice.call("POST", *_path(model["id"]), body={"user": "bob"})

    watcher = await bob.connect(model["id"])
    await watcher.expect("before-sharing")  # the current screen
    await owner.run("echo live-for-both")
    await watcher.expect("live-for-both")

    watcher.send("stdin", "touch /tmp/observer-typed\r")
    assert "read-only" in (await watcher.expect_frame("error"))[1]
    watcher.send("set_size", 10, 20)
    assert "read-only" in (await watcher.expect_frame("error"))[1]
    assert await owner.run("ls /tmp/observer-typed 2>&1 || echo absent") == (
        "ls: /tmp/observer-typed: No such file or directory\r\nabsent\r\n"
    )
    assert await owner.run("stty size") == "24 80\r\n"
    assert "observer-typed" not in owner.output


async def test_revoke_closes_the_observers_connections_at_once(
    alice: Api, bob: Api, make_instance: InstanceFactory, audit: AuditEvents
) -> None:
    model, owner = await alice.terminal(make_instance().name)
    await alice.call("POST", *_path(model["id"]), body={"user": "bob"})
    watchers = [await bob.connect(model["id"]), await bob.connect(model["id"])]
    await alice.call("DELETE", *_path(model["id"], "bob"))
    for watcher in watchers:
        await watcher.wait_closed(timeout=2)
        assert watcher.ws.close_code == 1008
    with pytest.raises(Exception, match="403"):
        await bob.connect(model["id"])
    assert await owner.run("echo still-here") == "still-here\r\n"
    shares = [(e["action"], e["username"], e["observer"]) for e in audit.events]
    assert ("grant", "alice", "bob") in shares
    assert ("revoke", "alice", "bob") in shares


async def test_the_session_ending_detaches_observers(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    model, _ = await alice.terminal(make_instance().name)
    await alice.call("POST", *_path(model["id"]), body={"user": "bob"})
    watcher = await bob.connect(model["id"])
    await alice.call("DELETE", "sessions", model["id"])
    assert await watcher.expect_frame("disconnect") == ["disconnect", 1]
    await watcher.wait_closed(timeout=2)
    assert await bob.call("GET", "sessions", params={"role": "observer"}) == []


async def test_observers_do_not_keep_the_owners_session_alive(
    alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    # The suite runs with disconnect_grace = 0: the owner's last client leaving ends it.
    model, owner = await alice.terminal(make_instance().name)
    await alice.call("POST", *_path(model["id"]), body={"user": "bob"})
    watcher = await bob.connect(model["id"])
    owner.ws.close()
    await watcher.wait_closed(timeout=5)
    assert await alice.call("GET", "sessions") == []


class TestRevalidation:
    """An observer's connection is re-checked like an owner's."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"auth_recheck_interval": 0.2}

    async def test_an_observer_still_granted_stays_connected(
        self, alice: Api, bob: Api, make_instance: InstanceFactory
    ) -> None:
        model, owner = await alice.terminal(make_instance().name)
        await alice.call("POST", *_path(model["id"]), body={"user": "bob"})
        watcher = await bob.connect(model["id"])
        # Several re-checks pass while the owner works.
        for n in range(4):
            await owner.run(f"sleep 0.2; echo round-{n}")
            await watcher.expect(f"round-{n}")
        assert not watcher.closed


class TestObserversBounds:
    """Observers have bounds of their own and never take the owner's connection slots."""

    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        # A reload finds the session again (the product default).
        return {"disconnect_grace": 60}

    async def test_an_observer_cannot_lock_the_owner_out(
        self, alice: Api, bob: Api, make_instance: InstanceFactory
    ) -> None:
        model, owner = await alice.terminal(make_instance().name)
        await alice.call("POST", *_path(model["id"]), body={"user": "bob"})

        async def bob_tries() -> list[int]:
            """Bob opens as many connections as he is let (each refusal a 429)."""
            refusals = []
            for _ in range(10):
                try:
                    watchers.append(await bob.connect(model["id"]))
                except HTTPClientError as refused:
                    refusals.append(refused.code)
            return refusals

        watchers: list[TerminalClient] = []
        first_refusals = await bob_tries()
        # Alice reloads her page: her connection goes, bob grabs at what it freed, she comes
        # back, and so do the owner's other tabs, up to her own cap.
        owner.ws.close()
        await owner.wait_closed()
        second_refusals = await bob_tries()
        tabs = [await alice.connect(model["id"]) for _ in range(8)]
        assert await tabs[0].run("echo back") == "back\r\n"
        assert len(watchers) == MAX_CLIENTS_PER_OBSERVER
        assert first_refusals == [429] * (10 - MAX_CLIENTS_PER_OBSERVER)
        assert second_refusals == [429] * 10
        status, body = await alice.status("GET", "sessions", model["id"])
        assert status == 200
        assert body["clients"] == 8 + MAX_CLIENTS_PER_OBSERVER
        with pytest.raises(HTTPClientError) as refused:
            await alice.connect(model["id"])
        assert refused.value.code == 429
        for client in [*tabs, *watchers]:
            client.ws.close()


class TestObserverConnectionCaps:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_observer_clients_per_session": 3, "max_clients_per_observer": 5}

    async def test_all_observers_together_are_bounded_per_session(
        self, alice: Api, bob: Api, make_instance: InstanceFactory
    ) -> None:
        model, owner = await alice.terminal(make_instance().name)
        await alice.call("POST", *_path(model["id"]), body={"user": "bob"})
        watchers = [await bob.connect(model["id"]) for _ in range(3)]
        with pytest.raises(HTTPClientError) as refused:
            await bob.connect(model["id"])
        assert refused.value.code == 429
        assert refused.value.response is not None
        assert "watching" in json.loads(refused.value.response.body)["message"]
        watchers[0].ws.close()
        await watchers[0].wait_closed()

        async def two_watching() -> bool:
            return bool((await alice.call("GET", "sessions", model["id"]))["clients"] == 3)

        await wait_until(two_watching)
        watchers[0] = await bob.connect(model["id"])
        assert await owner.run("echo ok") == "ok\r\n"


class TestMaxObservers:
    @pytest.fixture
    def extension_config(self) -> dict[str, t.Any]:
        return {"max_observers": 1}

    async def test_a_session_is_shared_with_at_most_max_observers_users(
        self, alice: Api, make_instance: InstanceFactory
    ) -> None:
        model = await alice.open_session(make_instance().name)
        assert (await alice.status("POST", *_path(model["id"]), body={"user": "bob"}))[0] == 201
        status, body = await alice.status("POST", *_path(model["id"]), body={"user": "carol"})
        assert status == 429
        assert "at most 1 " in body["message"]


async def test_messages_name_users_as_they_are_spelled(
    alice: Api, make_instance: InstanceFactory
) -> None:
    model = await alice.open_session(make_instance().name)
    assert (await alice.status("POST", *_path(model["id"]), body={"user": "50%off"}))[0] == 201
    status, body = await alice.status("POST", *_path(model["id"]), body={"user": "50%off"})
    assert status == 409
    assert body["message"] == "The terminal is already shared with 50%off."
