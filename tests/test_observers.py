"""Observers: an owner shares one session read-only with another user, and revokes it."""

from __future__ import annotations

import typing as t

import pytest

from .conftest import Api, AuditEvents, InstanceFactory


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
