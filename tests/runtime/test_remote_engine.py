"""A remote engine over TLS: a second, real dockerd on tcp://127.0.0.1 with certificates.

The contract tests and the stalled-tab flood run again (in a pytest of their own, since the
engine is chosen from the environment as ``docker.from_env()`` does) with ``DOCKER_HOST``,
``DOCKER_TLS_VERIFY`` and ``DOCKER_CERT_PATH`` pointing at it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
from pathlib import Path

import docker
import pytest

from jupyter_tool_terminal.app import ToolTerminalApp

from ..conftest import REPO, Api, InstanceFactory

#: A dockerd of its own and the contract run again against it: minutes.
pytestmark = pytest.mark.slow

#: What runs again against the TLS engine: the contract, the no-orphan guarantees, floods.
CONTRACT_TESTS = [
    "tests/sessions/test_terminal.py",
    "tests/lifecycle/test_lifecycle.py",
    "tests/sessions/test_output.py",
    "tests/runtime/test_remote_engine.py::test_tls_sessions_are_driven_by_the_event_loop",
]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificates(folder: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (as DOCKER_CERT_PATH
    wants them: ca.pem, cert.pem, key.pem)."""
    days = ["-days", "2"]
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem",
             "-out", "ca.pem", *days, "-subj", "/CN=jtt-test-ca", cwd=folder)  # fmt: skip
    for name, subject, usage in [
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth"),
        ("client", "/CN=jtt-test-client", "extendedKeyUsage=clientAuth"),
    ]:
        (folder / f"{name}.ext").write_text(usage + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem",
                 "-out", f"{name}.csr", "-subj", subject, cwd=folder)  # fmt: skip
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                 "-CAcreateserial", "-out", f"{name}-cert.pem", *days,
                 "-extfile", f"{name}.ext", cwd=folder)  # fmt: skip
    (folder / "client-cert.pem").rename(folder / "cert.pem")
    (folder / "client-key.pem").rename(folder / "key.pem")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(base_url: str) -> bool:
    try:
        client = docker.DockerClient(base_url=base_url)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except docker.errors.DockerException:
        return False
    finally:
        client.close()


@pytest.fixture(scope="module")
def tls_engine() -> t.Iterator[dict[str, str]]:
    """A second dockerd with TLS on 127.0.0.1, its own state in a temporary folder; yields the
    environment that points the SDK (and this project) at it."""
    if os.geteuid() != 0:
        pytest.skip("starting a second dockerd needs root (CI runs as root)")
    for program in ("dockerd", "openssl"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (Debian: docker.io, openssl)")
    folder = Path(tempfile.mkdtemp(prefix="jtt-tls-engine-"))
    _certificates(folder)
    port = _free_port()
    log = (folder / "dockerd.log").open("wb")
    # Its own data, exec root, pid file and socket; no bridge and no iptables rules, so that
    # it leaves the machine's dockerd alone.
    daemon = subprocess.Popen(
        [
            "dockerd",
            "--tlsverify",
            f"--tlscacert={folder / 'ca.pem'}",
            f"--tlscert={folder / 'server-cert.pem'}",
            f"--tlskey={folder / 'server-key.pem'}",
            f"--host=tcp://127.0.0.1:{port}",
            f"--host=unix://{folder / 'docker.sock'}",
            f"--data-root={folder / 'data'}",
            f"--exec-root={folder / 'exec'}",
            f"--pidfile={folder / 'docker.pid'}",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    environment = {
        "DOCKER_HOST": f"tcp://127.0.0.1:{port}",
        "DOCKER_TLS_VERIFY": "1",
        "DOCKER_CERT_PATH": str(folder),
    }
    try:
        deadline = time.monotonic() + 60
        while not _answers(f"unix://{folder / 'docker.sock'}"):
            if daemon.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "dockerd.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"the TLS dockerd did not start:\n{tail}")
            time.sleep(0.2)
        subprocess.run(
            ["bash", str(REPO / "scripts/build-test-image.sh")],
            env={**os.environ, "DOCKER_HOST": f"unix://{folder / 'docker.sock'}"},
            check=True,
            capture_output=True,
        )
        yield environment
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(900)  # a whole contract run of its own, against the TLS engine
def test_the_contract_holds_on_a_remote_engine_over_tls(tls_engine: dict[str, str]) -> None:
    environment = {**os.environ, **tls_engine, "PYTHONPATH": str(REPO)}
    # requests lets these override the SDK's own CA (psf/requests#3829): a host that sets them
    # for its public CAs would refuse the engine's certificate.
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        environment.pop(name, None)
    result = subprocess.run(
        # The local runtime's variants of these tests do not use the engine: left out here.
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
            *("-k", "not local", *CONTRACT_TESTS),
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    summary = result.stdout.strip().splitlines()[-1:] or [result.stderr[-2000:]]
    assert result.returncode == 0, result.stdout[-6000:]
    # Every one of them ran: a skip would hide a missing engine.
    assert " skipped" not in summary[0], summary
    assert " passed" in summary[0], summary


@pytest.mark.skipif(
    os.environ.get("DOCKER_TLS_VERIFY") is None,
    reason="runs inside test_the_contract_holds_on_a_remote_engine_over_tls, against its engine",
)
async def test_tls_sessions_are_driven_by_the_event_loop(
    alice: Api, make_instance: InstanceFactory, tool_app: ToolTerminalApp
) -> None:
    container = make_instance()
    models = []
    for _ in range(3):
        model, term = await alice.terminal(container.name)
        assert await term.run("echo over-tls") == "over-tls\r\n"
        models.append(model)
    assert tool_app.session_manager is not None
    for model in models:
        channel = tool_app.session_manager.sessions[model["id"]]._channel
        transport = channel._stream.transport  # type: ignore[union-attr]
        # asyncio's own TLS on the exec's connection, not the SDK's socket and a thread.
        assert transport.get_extra_info("sslcontext") is not None
    assert not [thread.name for thread in threading.enumerate() if thread.name.startswith("exec-")]
