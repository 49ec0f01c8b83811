"""The OpenAPI description (`rest-api.yml`) against a real server, with schemathesis (issue 22.6).

The description must be valid OpenAPI, and complete enough for a tester that knows nothing else:
schemathesis' stateful run starts from the caller's instances, follows every declared link into
real sessions (in labelled containers) and holds every response to the description
(`--checks all`: status codes, content types, headers, schemas, methods, authentication).
The server is a subprocess on a port of its own (the client's load never shares the server's
event loop), at a base URL of its own, as a JupyterHub user's server is.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import typing as t
import uuid
from pathlib import Path

import pytest
import yaml
from openapi_spec_validator import validate

from ..conftest import REPO, InstanceFactory
from ..support.server_process import TOKEN, ServerProcess, add_server, running_servers

SPEC = REPO / "jupyter_tool_terminal" / "rest-api.yml"
CONFIG = Path(__file__).with_name("schemathesis.toml")


def _spec() -> dict[str, t.Any]:
    spec: dict[str, t.Any] = yaml.safe_load(SPEC.read_text())
    return spec


def declared_links(spec: dict[str, t.Any]) -> set[str]:
    """Every link of the description, as the start of schemathesis' transition ids
    (``"POST /path -> [201] Name"``)."""
    return {
        f"{method.upper()} {path} -> [{status}] {name}"
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method != "parameters"
        for status, response in operation["responses"].items()
        for name in response.get("links", {})
    }


def followed_links(report: Path) -> set[str]:
    """The links schemathesis' stateful phase followed (applied to a request), from its
    ndjson events."""
    followed = set()
    for line in report.read_text().splitlines():
        event = json.loads(line)
        scenario = event.get("ScenarioFinished")
        if scenario is None or scenario.get("phase") != "stateful":
            continue
        for case in (scenario.get("recorder") or {}).get("cases", {}).values():
            transition = case.get("transition")
            if transition is not None and case.get("is_transition_applied"):
                followed.add(" -> ".join(transition["id"].split(" -> ")[:2]))
    return followed


def test_the_description_is_valid_openapi() -> None:
    validate(_spec())  # raises, naming the first error


def test_every_link_leads_to_an_operation_of_the_description() -> None:
    spec = _spec()
    operations = {
        operation.get("operationId")
        for item in spec["paths"].values()
        for method, operation in item.items()
        if method != "parameters"
    }
    targets = {
        link["operationId"]
        for item in spec["paths"].values()
        for method, operation in item.items()
        if method != "parameters"
        for response in operation["responses"].values()
        for link in response.get("links", {}).values()
    }
    assert targets <= operations, targets - operations
    # From the instances to a new session, and from it to everything done with a session.
    one_session = {"getSession", "resetSession", "deleteSession", "listObservers", "addObserver"}
    assert {"createSession", "removeObserver", *one_session} <= targets
    assert "GET /tool-terminal/api/instances -> [200] StartSessionInFirstInstance" in (
        declared_links(spec)
    )


#: Stateful runs after the first, at most, until every link was followed: which link a step
#: follows is drawn at random (schemathesis draws it outside the seed), so one run may miss one;
#: a share needs a drawn user name the server takes, which 1 run in 2 or 3 draws.
EXTRA_STATEFUL_RUNS = 5


def run_schemathesis(
    server: ServerProcess, folder: Path, phases: str, seed: int = 22
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """One schemathesis run of ``phases`` with every check (blocking: run it in a thread);
    the links it followed."""
    folder.mkdir()
    report = folder / "events.ndjson"
    command = [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run"),
        *(str(SPEC), "--url", server.base, "--header", f"Authorization: token {TOKEN}"),
        # (The number of test cases per phase is in the configuration file.)
        *("--checks", "all", "--phases", phases, "--seed", str(seed), "--workers", "1"),
        *("--request-timeout", "20", "--no-color", "--report", "ndjson"),
        *("--report-ndjson-path", str(report), "--report-dir", str(folder)),
    ]
    run = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=200, cwd=folder
    )
    return run, followed_links(report) if report.exists() else set()


def failures(run: subprocess.CompletedProcess[str]) -> str:
    """A run's failures (each with its reproduction) and summary, without the progress."""
    return run.stdout[run.stdout.find("=== FAILURES") :][-12000:] + run.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.timeout(420)
async def test_schemathesis_finds_nothing_against_a_real_server(
    make_container: InstanceFactory, tmp_path: Path
) -> None:
    # An owner of the test's own: no other test's containers (or sessions) are reachable.
    owner = f"openapi-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        make_container(owner=owner)
    links = declared_links(_spec())
    with running_servers() as servers:
        server = await add_server(
            servers,
            tmp_path / "server",
            base_url="/user/openapi/",
            owner=owner,
            tool_types={"sandbox": {"display_name": "Sandbox", "shell": ["/bin/sh"]}},
        )
        all_phases = "examples,coverage,fuzzing,stateful"
        run, followed = await asyncio.to_thread(
            run_schemathesis, server, tmp_path / "run-0", all_phases
        )
        assert run.returncode == 0, failures(run)
        print(f"first run followed {sorted(followed)}")
        for attempt in range(1, EXTRA_STATEFUL_RUNS + 1):
            if followed >= links:
                break
            # The sessions the last run left count against the caller's cap: with them every
            # new session of this run would be refused (429), and no link from one followed.
            for session_id in await server.sessions():
                await server.delete_session(session_id)
            folder = tmp_path / f"run-{attempt}"
            # (another seed: other scenarios, other user names for the shares)
            run, more = await asyncio.to_thread(
                run_schemathesis, server, folder, "stateful", 22 + attempt
            )
            assert run.returncode == 0, failures(run)
            print(f"stateful run {attempt} followed {sorted(more)}")
            followed |= more
    assert followed == links
