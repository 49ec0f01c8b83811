"""Audit events and logs: everything is recorded, nothing secret is."""

from __future__ import annotations

import logging

import pytest

from jupyter_tool_terminal.app import ToolTerminalApp

from .conftest import Api, AuditEvents, InstanceFactory


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
