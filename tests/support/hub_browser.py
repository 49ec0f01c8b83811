"""Runs the real-browser test through JupyterHub (ui-tests/hub) in service mode.

Starts a Hub with the tool-terminal service and alice's and bob's servers (no engine; their
JupyterLab from this checkout, pointed at the service), a tool container for each, then
Playwright with Debian's chromium. Everything it started is stopped on exit.
Usage: python -m tests.support.hub_browser [PLAYWRIGHT ARGS...]
(scripts/test-browser-hub.sh; arguments, such as a spec file name or ``--grep``, are passed on
to Playwright)
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import docker
import docker.errors

from .hub import PASSWORD, REPO, Browser, running_hub, service_mode_config

IMAGE = "jupyter-tool-terminal-test:latest"
SERVICE = "tool-terminal"
SERVICE_CONFIG = """
c.ToolTerminalApp.tool_types = {"sandbox": {"display_name": "Sandbox", "shell": ["/bin/sh"]}}
"""
USER_CONFIG = """
import os
# Each user's own workspaces (JupyterLab restores the open panels from them).
c.LabServerApp.workspaces_dir = os.path.join(os.environ["HOME"], "workspaces")
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
"""


def _lab_environment(directory: Path) -> dict[str, str]:
    """JupyterLab of the users' servers: this checkout's extension, screen-reader terminals."""
    extensions = directory / "data" / "labextensions"
    extensions.mkdir(parents=True)
    (extensions / "jupyter-tool-terminal").symlink_to(
        REPO / "jupyter_tool_terminal" / "labextension"
    )
    settings = directory / "settings"
    terminal = settings / "@jupyterlab" / "terminal-extension"
    terminal.mkdir(parents=True)
    # The screen reader mode gives the test the screen as text.
    (terminal / "plugin.jupyterlab-settings").write_text(json.dumps({"screenReaderMode": True}))
    notifications = settings / "@jupyterlab" / "apputils-extension"
    notifications.mkdir(parents=True)
    (notifications / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return {
        "JUPYTER_PATH": str(directory / "data"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
    }


def main(playwright_args: list[str]) -> int:
    """Run the test (Playwright with ``playwright_args`` too); its exit status is Playwright's."""
    client = docker.from_env()
    containers = []
    with tempfile.TemporaryDirectory(prefix="jtt-hub-e2e-") as temporary:
        directory = Path(temporary)
        try:
            for owner in ("alice", "bob"):
                containers.append(
                    client.containers.run(
                        IMAGE,
                        name=f"jtt-hub-e2e-{owner}-{uuid.uuid4().hex[:8]}",
                        detach=True,
                        init=True,
                        network_mode="none",
                        labels={
                            "jupyter-tool-terminal.owner": owner,
                            "jupyter-tool-terminal.tool": "sandbox",
                        },
                    )
                )
            config = service_mode_config(
                directory,
                SERVICE,
                service_config=SERVICE_CONFIG,
                user_config=USER_CONFIG,
                user_environment=_lab_environment(directory),
            )
            with running_hub(directory, config) as hub:
                for name in ("alice", "bob"):
                    hub.start_server(name)
                service_api = f"/services/{SERVICE}/tool-terminal/api/instances"
                # The service answers (403 without a login) once it is up.
                deadline = time.monotonic() + 60
                while Browser(hub).request("GET", service_api).status_code != 403:
                    if time.monotonic() > deadline:
                        sys.stderr.write(hub.log_tail(80) + "\n")
                        return 1
                    time.sleep(0.2)
                environment = {
                    **os.environ,
                    "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
                    "E2E_HUB_URL": hub.url,
                    "E2E_HUB_PASSWORD": PASSWORD,
                    "E2E_ALICE_CONTAINER": containers[0].name,
                    "E2E_BOB_CONTAINER": containers[1].name,
                }
                command = ["jlpm", "playwright", "test", "-c", "playwright.hub.config.ts"]
                result = subprocess.run(
                    [*command, *playwright_args],
                    cwd=REPO / "ui-tests",
                    env=environment,
                    check=False,
                )
                if result.returncode != 0:
                    sys.stderr.write(hub.log_tail(80) + "\n")
                return result.returncode
        finally:
            for container in containers:
                with contextlib.suppress(docker.errors.NotFound):
                    container.remove(force=True)
            client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
