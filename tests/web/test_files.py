"""Files into and out of a tool instance (``/tool-terminal/api/instances/{id}/files``).

Each route and each refusal against the real engine and the local runtime; in a container, as
the tool type's user (never root unless that is the tool's user).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import typing as t
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_tool_terminal.files import FileTransfers

from ..conftest import (
    ALICE,
    TOOL_TYPES,
    Api,
    AuditEvents,
    InstanceFactory,
    LocalInstanceHandle,
    both_runtimes,
    instance_path,
    wait_until,
)

#: Every byte value, twice (NUL, newline and invalid UTF-8 among them).
BINARY = bytes(range(256)) * 2
#: The transfer limit the tests configure (the default is 100 MiB).
LIMIT = 4096

TOOL_TYPES_WITH_USER = {
    **TOOL_TYPES,
    "student": {"display_name": "Student", "shell": ["/bin/sh"], "user": "student"},
}


@pytest.fixture
def tool_types(runtime_name: str) -> dict[str, t.Any]:
    # (A local instance's shells run as the server's user: no tool type may ask for another.)
    return TOOL_TYPES if runtime_name == "local" else TOOL_TYPES_WITH_USER


@pytest.fixture
def extension_config() -> dict[str, t.Any]:
    return {"max_file_transfer_bytes": LIMIT}


class Files:
    """The file routes as one user: (status, body) without raising."""

    def __init__(self, fetch: t.Any, headers: dict[str, str]) -> None:
        self._fetch = fetch
        self._headers = headers

    async def request(
        self,
        method: str,
        instance: str,
        body: bytes | None,
        params: dict[str, str],
    ) -> tuple[int, bytes, t.Any]:
        kwargs: dict[str, t.Any] = {"method": method, "headers": self._headers, "params": params}
        if body is not None:
            kwargs["body"] = body
        try:
            response = await self._fetch(
                "tool-terminal", "api", "instances", instance, "files", **kwargs
            )
        except HTTPClientError as error:
            response = error.response
        assert response is not None
        return response.code, response.body or b"", response.headers

    async def get(self, instance: str, **params: str) -> tuple[int, bytes, t.Any]:
        return await self.request("GET", instance, None, params)

    async def put(self, instance: str, body: bytes, **params: str) -> tuple[int, t.Any]:
        status, answer, _ = await self.request("PUT", instance, body, params)
        return status, json.loads(answer) if answer else None


@pytest.fixture
def files(jp_fetch: t.Any) -> Files:
    return Files(jp_fetch, ALICE)


@pytest.fixture
def bobs_files(jp_fetch: t.Any) -> Files:
    return Files(jp_fetch, {"Authorization": "token bob-secret-token"})


def _message(body: bytes) -> str:
    message = json.loads(body)["message"]
    assert isinstance(message, str)
    return message


async def _exists(instance: t.Any, path: str) -> bool:
    if isinstance(instance, LocalInstanceHandle):
        return await asyncio.to_thread(os.path.lexists, path)
    code, _ = await asyncio.to_thread(instance.exec_run, ["test", "-e", path])
    return bool(code == 0)


async def _leftovers(instance: t.Any, folder: str) -> list[str]:
    """Hidden upload files left in ``folder``."""
    if isinstance(instance, LocalInstanceHandle):
        return [name for name in os.listdir(folder) if ".upload-" in name]
    _, output = await asyncio.to_thread(instance.exec_run, ["ls", "-a", folder])
    return [name for name in output.decode().split() if ".upload-" in name]


@both_runtimes
async def test_upload_then_download_the_same_bytes(
    files: Files, make_instance: InstanceFactory, audit: AuditEvents
) -> None:
    instance = make_instance()
    path = instance_path(instance, "data/every byte.bin")
    status, model = await files.put(instance.name, BINARY, path=path)
    assert (status, model) == (201, {"path": path, "size": len(BINARY)})
    status, body, headers = await files.get(instance.name, path=path)
    assert status == 200
    assert body == BINARY
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"] == 'attachment; filename="every byte.bin"'
    # An empty file is a file too.
    empty = instance_path(instance, "data/empty")
    assert (await files.put(instance.name, b"", path=empty))[0] == 201
    assert (await files.get(instance.name, path=empty))[:2] == (200, b"")
    # Audited with path and size, never content.
    done = [(e["action"], e["path"], e["size"]) for e in audit.events if e["path"]]
    assert done == [
        ("upload", path, len(BINARY)),
        ("download", path, len(BINARY)),
        ("upload", empty, 0),
        ("download", empty, 0),
    ]
    assert all(e["instance"] == instance.name and e["username"] == "alice" for e in audit.events)


@both_runtimes
async def test_refusals_say_what_to_do_and_change_nothing(
    files: Files, make_instance: InstanceFactory
) -> None:
    instance = make_instance()
    data = instance_path(instance, "data")
    kept = f"{data}/kept.txt"
    assert (await files.put(instance.name, b"original", path=kept))[0] == 201

    async def get_refused(status: int, **params: str) -> str:
        code, body, headers = await files.get(instance.name, **params)
        assert code == status, (params, body)
        assert headers["Content-Type"].startswith("application/json")
        return _message(body)

    async def put_refused(status: int, body: bytes = b"new", **params: str) -> str:
        code, answer = await files.put(instance.name, body, **params)
        assert code == status, (params, answer)
        return t.cast(str, answer["message"])

    assert "'path' is missing" in await get_refused(400)
    assert "not absolute" in await get_refused(400, path="data/kept.txt")
    assert "is a folder" in await get_refused(400, path=data)
    assert "does not exist" in await get_refused(404, path=f"{data}/nothing")
    assert "'path' is missing" in await put_refused(400)
    assert "not absolute" in await put_refused(400, path="kept.txt")
    assert "ends in '/'" in await put_refused(400, path=f"{data}/")
    assert "is a folder" in await put_refused(400, path=data)
    assert "create it first" in await put_refused(404, path=f"{data}/no/such.txt")
    assert "overwrite=true" in await put_refused(409, path=kept)
    assert "overwrite=true" in await put_refused(409, path=kept, overwrite="yes")
    assert "max_file_transfer_bytes" in await put_refused(
        413, b"x" * (LIMIT + 1), path=f"{data}/big"
    )
    assert not await _exists(instance, f"{data}/big")
    # A file larger than the limit is not sent either.
    big = f"{data}/at-limit"
    assert (await files.put(instance.name, b"y" * LIMIT, path=big))[0] == 201
    assert (await files.put(instance.name, b"y" * LIMIT, path=big, overwrite="true"))[0] == 201
    await _append_outside(instance, big, "z")
    assert f"{LIMIT + 1} bytes" in await get_refused(413, path=big)
    # Nothing was changed, nothing left behind.
    assert (await files.get(instance.name, path=kept))[:2] == (200, b"original")
    assert await _leftovers(instance, data) == []
    # overwrite=true replaces.
    assert (await files.put(instance.name, b"new", path=kept, overwrite="true"))[0] == 201
    assert (await files.get(instance.name, path=kept))[:2] == (200, b"new")


async def _append_outside(instance: t.Any, path: str, text: str) -> None:
    """Append to a file of an instance as its owner would, outside the transfer routes."""
    command = ["/bin/sh", "-c", 'printf %s "$1" >> "$2"', "append", text, path]
    if isinstance(instance, LocalInstanceHandle):
        await asyncio.to_thread(subprocess.run, command, check=True)
        return
    code, _ = await asyncio.to_thread(instance.exec_run, command)
    assert code == 0


@both_runtimes
async def test_not_the_callers_instance_is_403(
    files: Files, bobs_files: Files, make_instance: InstanceFactory
) -> None:
    instance = make_instance()
    path = instance_path(instance, "data/secret")
    assert (await files.put(instance.name, b"alice's", path=path))[0] == 201
    for who, name in ((bobs_files, instance.name), (files, "no-such-instance")):
        status, body, _ = await who.get(name, path=path)
        assert status == 403
        assert _message(body) == "No such tool instance for this user."
        status, _ = await who.put(name, b"bob's", path=path, overwrite="true")
        assert status == 403
    assert (await files.get(instance.name, path=path))[:2] == (200, b"alice's")


@both_runtimes
async def test_a_relative_path_is_taken_in_the_terminals_current_folder(
    alice: Api,
    bob: Api,
    files: Files,
    bobs_files: Files,
    make_instance: InstanceFactory,
) -> None:
    instance = make_instance()
    model, client = await alice.terminal(instance.name)
    folder = instance_path(instance, "data")
    await client.run(f"cd '{folder}'")
    status, answer = await files.put(
        instance.name, b"dropped", path="drop.txt", session=model["id"]
    )
    assert (status, answer) == (201, {"path": f"{folder}/drop.txt", "size": 7})
    status, body, headers = await files.get(instance.name, path="drop.txt", session=model["id"])
    assert (status, body) == (200, b"dropped")
    assert headers["Content-Disposition"] == 'attachment; filename="drop.txt"'
    assert "drop.txt" in await client.run("ls")
    # An observer of the session, or a session that is not the caller's: 403.
    await alice.call("POST", "sessions", model["id"], "observers", body={"user": "bob"})
    status, body, _ = await bobs_files.get(instance.name, path="drop.txt", session=model["id"])
    assert status == 403
    status, _ = await bobs_files.put(instance.name, b"x", path="x.txt", session=model["id"])
    assert status == 403
    status, body, _ = await files.get(instance.name, path="drop.txt", session="A" * 32)
    assert status == 403
    # A session in another instance of the caller's does not say where this one's shell is.
    other = make_instance()
    status, body, _ = await files.get(other.name, path="drop.txt", session=model["id"])
    assert status == 403
    client.ws.close()


async def test_files_move_as_the_tool_types_user(
    files: Files, make_instance: InstanceFactory
) -> None:
    instance = make_instance(tool="student")
    assert (await files.put(instance.name, b"mine", path="/tmp/mine.txt"))[0] == 201
    _, owner = await asyncio.to_thread(instance.exec_run, ["stat", "-c", "%U", "/tmp/mine.txt"])
    assert owner.decode().strip() == "student"
    # What root may read and write, the tool's user may not.
    code, _ = await asyncio.to_thread(
        instance.exec_run,
        ["/bin/sh", "-c", "echo root-only > /root/secret && chmod 600 /root/secret"],
    )
    assert code == 0
    status, body, _ = await files.get(instance.name, path="/root/secret")
    assert status == 403
    assert _message(body) == "The tool's user (student) may not read /root/secret."
    status, answer = await files.put(instance.name, b"intrusion", path="/root/planted")
    assert status == 403
    assert answer["message"] == "The tool's user (student) may not write to /root."
    assert not await _exists(instance, "/root/planted")


async def test_a_container_without_a_shell_says_so(
    files: Files, make_instance: InstanceFactory
) -> None:
    instance = make_instance()
    code, _ = await asyncio.to_thread(instance.exec_run, ["rm", "/bin/sh"])
    assert code == 0
    status, body, _ = await files.get(instance.name, path="/etc/passwd")
    assert status == 501
    assert "needs /bin/sh" in _message(body)
    status, _ = await files.put(instance.name, b"x", path="/tmp/x")
    assert status == 501


@both_runtimes
async def test_an_upload_cut_short_leaves_nothing(
    make_instance: InstanceFactory, jp_http_port: int, jp_base_url: str, files: Files
) -> None:
    instance = make_instance()
    folder = instance_path(instance, "data")
    path = f"{folder}/cut.bin"
    reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
    target = f"{jp_base_url}tool-terminal/api/instances/{instance.name}/files?path={path}"
    writer.write(
        (
            f"PUT {target.replace(' ', '%20')} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: {ALICE['Authorization']}\r\nContent-Length: 1000\r\n\r\n"
        ).encode()
        + b"only a part"
    )
    await writer.drain()

    async def staged() -> bool:
        return bool(await _leftovers(instance, folder))

    # The upload began (its hidden file exists); the client goes away.
    await wait_until(staged, timeout=10)
    writer.close()
    await writer.wait_closed()

    async def cleaned() -> bool:
        return not await _leftovers(instance, folder)

    await wait_until(cleaned, timeout=10)
    assert not await _exists(instance, path)
    del reader


async def test_a_body_without_a_length_is_refused(
    files: Files, make_instance: InstanceFactory, jp_http_port: int, jp_base_url: str
) -> None:
    instance = make_instance()
    reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
    target = f"{jp_base_url}tool-terminal/api/instances/{instance.name}/files?path=/tmp/x"
    writer.write(
        (
            f"PUT {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: {ALICE['Authorization']}\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\n0\r\n\r\n"
        ).encode()
    )
    await writer.drain()
    status_line = await reader.readline()
    assert status_line.split()[1] == b"411"
    writer.close()
    assert not await _exists(instance, "/tmp/x")


def test_the_default_limit_is_the_contracts() -> None:
    assert FileTransfers.class_traits()["max_file_transfer_bytes"].default_value == 104857600


@pytest.mark.parametrize("runtime_name", ["local"])
async def test_a_local_path_outside_the_instance_folder_is_refused(
    files: Files, make_instance: InstanceFactory, tmp_path: Path
) -> None:
    instance = make_instance()
    outside = tmp_path / "outside.txt"
    outside.write_text("not the instance's")
    status, body, _ = await files.get(instance.name, path=str(outside))
    assert status == 403
    assert "outside this local instance's folder" in _message(body)
    status, _ = await files.put(instance.name, b"x", path=str(tmp_path / "planted"))
    assert status == 403
    assert not (tmp_path / "planted").exists()
    # A symbolic link inside that leads out counts as outside.
    os.symlink(tmp_path, instance.root / "data" / "escape")
    status, body, _ = await files.get(
        instance.name, path=str(instance.root.resolve() / "data" / "escape" / "outside.txt")
    )
    assert status == 403
