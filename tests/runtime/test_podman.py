"""The contract tests against Podman's Docker-compatible API (issue 25.4).

The same tests as for Docker (imported here, so pytest runs them again in this module), with
the engine at ``JTT_PODMAN_HOST`` (``scripts/podman.sh`` starts `podman system service` and
imports the test image): the tests' containers are made there, and the server under test
connects there with ``DOCKER_HOST``, as an operator points the extension at Podman. Without
``JTT_PODMAN_HOST`` the module is skipped (CI sets it).
"""

from __future__ import annotations

import os
import typing as t

import docker
import pytest

from ..conftest import TOOL_TYPES, is_podman

# The contract tests this module runs again, on Podman: terminal, echo, resize, exit codes,
# startup commands, replay, discovery by label, and every end path (the kill of the shell's
# process tree, reapers and leases, a killed server's orphans).
from ..lifecycle.test_crash import test_a_restarted_server_kills_what_its_killed_instance_left
from ..lifecycle.test_lifecycle import (
    test_closing_beside_a_live_shell_kills_through_a_reaper,
    test_closing_the_last_websocket_kills_everything,
    test_delete_kills_everything,
    test_kills_go_on_when_the_reaper_is_killed,
    test_reset_kills_everything,
    test_sessions_closing_together_share_kill_execs,
    test_shell_exit_sends_exit_code_then_disconnect,
)
from ..sessions.test_terminal import (
    test_lists_show_the_callers_instances_and_sessions,
    test_replay_for_a_second_client,
    test_reset_runs_the_startup_command_again_for_attached_clients,
    test_set_size_changes_stty_size,
    test_startup_command_runs_first_and_carries_cwd_and_exports,
    test_statuses_are_the_real_ones,
    test_type_and_see_output,
)

#: The contract tests once more, on Podman: minutes.
pytestmark = pytest.mark.slow

PODMAN_HOST = os.environ.get("JTT_PODMAN_HOST", "")
if not PODMAN_HOST:
    pytest.skip(
        "JTT_PODMAN_HOST is not set (scripts/podman.sh starts Podman's service)",
        allow_module_level=True,
    )

__all__ = [
    "test_a_restarted_server_kills_what_its_killed_instance_left",
    "test_closing_beside_a_live_shell_kills_through_a_reaper",
    "test_closing_the_last_websocket_kills_everything",
    "test_delete_kills_everything",
    "test_kills_go_on_when_the_reaper_is_killed",
    "test_lists_show_the_callers_instances_and_sessions",
    "test_replay_for_a_second_client",
    "test_reset_kills_everything",
    "test_reset_runs_the_startup_command_again_for_attached_clients",
    "test_sessions_closing_together_share_kill_execs",
    "test_set_size_changes_stty_size",
    "test_shell_exit_sends_exit_code_then_disconnect",
    "test_startup_command_runs_first_and_carries_cwd_and_exports",
    "test_statuses_are_the_real_ones",
    "test_type_and_see_output",
]


@pytest.fixture(scope="module")
def docker_client() -> t.Iterator[docker.DockerClient]:
    """Podman's service, where this module's containers are made (instead of Docker's)."""
    client = docker.DockerClient(base_url=PODMAN_HOST)
    assert is_podman(client.version()), f"{PODMAN_HOST} is not Podman"
    yield client
    client.close()


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    """The suite's tool types, the sandbox's shells as `nobody`: the harder case of every end
    path (root in the container cannot read another uid's environment, where the kill tag is;
    the Docker run tests both), once, to keep the run short."""
    return {**TOOL_TYPES, "sandbox": {**TOOL_TYPES["sandbox"], "user": "nobody"}}


@pytest.fixture(autouse=True)
def podman_engine(monkeypatch: pytest.MonkeyPatch, runtime_name: str) -> None:
    """The server under test (and a subprocess server) uses Podman, as `DOCKER_HOST` says."""
    if runtime_name != "docker":
        pytest.skip("Podman serves the Docker runtime; the local runtime has its own run")
    monkeypatch.setenv("DOCKER_HOST", PODMAN_HOST)
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(name, raising=False)


def test_the_engine_is_podman(docker_client: docker.DockerClient) -> None:
    components = [item["Name"] for item in docker_client.version().get("Components", [])]
    assert "Podman Engine" in components, components
