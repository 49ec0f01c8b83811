"""Audit events and logs: everything is recorded, nothing secret is."""

from __future__ import annotations

import json
import logging
import typing as t

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import ALICE, Api, AuditEvents, InstanceFactory


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


async def test_sessions_and_refusals_are_audited(
    audit: AuditEvents, alice: Api, bob: Api, make_instance: InstanceFactory
) -> None:
    container = make_instance(tool="course")
    model, term = await alice.terminal(container.name)
    await alice.call("POST", "sessions", model["id"], "reset")
    await term.expect("STARTUP-BANNER")
    await bob.status("POST", "sessions", body={"instance": container.name})
    term.send("stdin", "exit 3\r")
    await term.expect_frame("exit")
    await term.wait_closed()

    actions = [(e["action"], e["username"]) for e in audit.events]
    assert actions == [("open", "alice"), ("reset", "alice"), ("refuse", "bob"), ("close", "alice")]
    opened, reset, refused, closed = audit.events
    assert opened["instance"] == container.name
    assert opened["tool"] == "course"
    assert opened["session_id"] == model["id"]
    assert opened["duration"] > 0
    assert reset["duration"] > 0
    assert refused["status"] == 403
    assert refused["instance"] == container.name
    assert closed["reason"] == "exit"
    assert closed["exit_code"] == 3
    for event in audit.events:
        assert "STARTUP-BANNER" not in str(event)
        assert "exit 3" not in str(event)


async def test_logs_carry_no_tokens_input_or_output(
    alice: Api,
    make_instance: InstanceFactory,
    caplog: pytest.LogCaptureFixture,
    tool_app: ToolTerminalApp,
) -> None:
    caplog.set_level(logging.DEBUG)
    app = tool_app
    extension_log = _Lines()
    app.log.addHandler(extension_log)
    app.log.setLevel(logging.DEBUG)
    container = make_instance()
    model, term = await alice.terminal(container.name)
    term.send("stdin", "echo typed-secret-$((40+2))\r")
    await term.expect("typed-secret-42")
    term.ws.write_message("{not json")
    await term.expect_frame("error")
    status, body = await alice.status("GET", "sessions", "Z" * 32)
    assert status == 403
    assert "Traceback" not in str(body)
    await alice.call("DELETE", "sessions", model["id"])
    app.log.removeHandler(extension_log)
    logged = caplog.text + "\n".join(extension_log.lines)
    assert "opened" in logged  # the log is captured at all
    for secret in ["alice-secret-token", "typed-secret", "{not json"]:
        assert secret not in logged, secret


#: Requests tornado refuses before a handler method runs: (method, path, headers, body).
EARLY_REFUSALS = [
    ("XYZZY", "tool-terminal/api/sessions", {}, None),
    ("TRACE", "tool-terminal/api/instances", {}, None),
    ("XYZZY", "tool-terminal/", {}, None),
    ("XYZZY", "tool-terminal/websocket/" + "A" * 32, {}, None),
    ("GET", "tool-terminal/api/sessions/%FF%FE", {}, None),
    ("DELETE", "tool-terminal/api/sessions/%FF%FE/observers/%C0", {}, None),
    ("GET", "tool-terminal/websocket/%FF%FE", {}, None),
    (
        "POST",
        "tool-terminal/api/sessions",
        {"Content-Type": "multipart/form-data; boundary=xyz"},
        b"--xyz\r\nno headers, no final boundary",
    ),
    ("POST", "tool-terminal/api/sessions", {"Content-Type": "multipart/form-dataxyz"}, b"x"),
    (
        "POST",
        "tool-terminal/api/sessions",
        {"Content-Type": "application/x-www-form-urlencoded", "Content-Encoding": "br"},
        b"instance=x",
    ),
]


@pytest.mark.parametrize(("method", "path", "headers", "body"), EARLY_REFUSALS)
async def test_requests_tornado_refuses_early_get_a_json_4xx_and_are_audited(
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None,
    http_server_client: t.Any,
    jp_base_url: str,
    audit: AuditEvents,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    response = await http_server_client.fetch(
        jp_base_url + path,
        method=method,
        headers={**ALICE, **headers},
        body=body,
        allow_nonstandard_methods=True,
        raise_error=False,
    )
    assert 400 <= response.code < 500, response.code
    assert json.loads(response.body)["message"], response.body
    assert "Traceback" not in caplog.text
    assert "Uncaught exception" not in caplog.text
    refused = [event for event in audit.events if event["action"] == "refuse"]
    assert [event["status"] for event in refused] == [response.code]
    assert refused[0]["session_id"] is None


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("XYZZY", "tool-terminal/api/sessions", "GET, POST, OPTIONS"),
        ("TRACE", "tool-terminal/api/instances", "GET, OPTIONS"),
        ("PUT", "tool-terminal/api/sessions/" + "A" * 32 + "/reset", "POST, OPTIONS"),
        ("XYZZY", "tool-terminal/", "GET"),
        ("POST", "tool-terminal/websocket/" + "A" * 32, "GET"),
    ],
)
async def test_a_405_names_the_methods_of_its_route(
    method: str, path: str, allowed: str, http_server_client: t.Any, jp_base_url: str
) -> None:
    # RFC 9110: a 405 carries `Allow` (schemathesis' unsupported-method check asks for it).
    response = await http_server_client.fetch(
        jp_base_url + path,
        method=method,
        headers=ALICE,
        body=b"" if method in ("POST", "PUT") else None,
        allow_nonstandard_methods=True,
        raise_error=False,
    )
    assert response.code == 405, response.code
    assert response.headers.get("Allow") == allowed


async def test_a_refusal_is_logged_with_the_user_and_the_session(
    alice: Api, bob: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    model = await alice.open_session(make_instance().name)
    extension_log = _Lines()
    tool_app.log.addHandler(extension_log)
    try:
        assert (await bob.status("DELETE", "sessions", model["id"]))[0] == 403
    finally:
        tool_app.log.removeHandler(extension_log)
    assert (
        f"Tool terminal request refused (403 Forbidden): DELETE by bob for session "
        f"{model['id'][:8]} (of alice)"
    ) in extension_log.lines, extension_log.lines
