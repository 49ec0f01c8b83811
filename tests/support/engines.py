"""Several real Docker engines on this machine, for the tests of ``c.DockerRuntime.engines``.

Each :class:`Dockerd` is a ``dockerd`` of its own: its data root, exec root, pid file and
socket in a temporary folder, no bridge, no iptables rules (so it leaves the machine's engine
alone), and ``--live-restore`` (its containers outlive it, as a host's do when its engine
restarts). One of them runs in a network namespace of its own behind a veth pair and is
reached over TCP with TLS, like an engine on another host. Each gets the test image from the
machine's engine (``docker save | docker load``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import typing as t
import uuid
from pathlib import Path

import docker
import docker.errors
import pytest

from ..conftest import TEST_IMAGE

#: The addresses of the namespace's veth pair (outside, inside): a private /30 of the tests'.
OUTSIDE, INSIDE = "10.219.77.1", "10.219.77.2"
TLS_PORT = 2376


def openssl(*args: str, cwd: Path) -> None:
    """Run ``openssl`` in ``cwd`` (its output is kept out of the test's)."""
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def certificates(folder: Path, host: str) -> None:
    """A CA, a server certificate for the IP ``host`` and a client certificate (as
    DOCKER_CERT_PATH wants them: ca.pem, cert.pem, key.pem)."""
    days = ["-days", "2"]
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem",
            "-out", "ca.pem", *days, "-subj", "/CN=jtt-test-ca", cwd=folder)  # fmt: skip
    for name, subject, usage in [
        ("server", f"/CN={host}", f"subjectAltName=IP:{host}\nextendedKeyUsage=serverAuth"),
        ("client", "/CN=jtt-test-client", "extendedKeyUsage=clientAuth"),
    ]:
        (folder / f"{name}.ext").write_text(usage + "\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem",
                "-out", f"{name}.csr", "-subj", subject, cwd=folder)  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
                "-CAcreateserial", "-out", f"{name}-cert.pem", *days,
                "-extfile", f"{name}.ext", cwd=folder)  # fmt: skip
    (folder / "client-cert.pem").rename(folder / "cert.pem")
    (folder / "client-key.pem").rename(folder / "key.pem")


def containerd_command(folder: Path, socket: Path) -> list[str]:
    """A containerd of its own in ``folder``, listening on ``socket`` (its config written)."""
    folder.mkdir(exist_ok=True)
    config = folder / "config.toml"
    config.write_text(
        "version = 2\n"
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{socket}"\n'
        f'[ttrpc]\n  address = "{socket}.ttrpc"\n'
    )
    return [
        *("containerd", "--config", str(config)),
        *("--root", str(folder / "root"), "--state", str(folder / "state")),
    ]


def answers(base_url: str, **kwargs: t.Any) -> bool:
    """Whether the engine at ``base_url`` answers a ping."""
    try:
        client = docker.DockerClient(base_url=base_url, timeout=5, **kwargs)
    except docker.errors.DockerException:
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, OSError):
        return False
    finally:
        client.close()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Namespace:
    """A network namespace joined to this one by a veth pair (a second host, for the net)."""

    def __init__(self) -> None:
        suffix = uuid.uuid4().hex[:6]
        self.name = f"jtt-ns-{suffix}"
        self._outside = f"jtt{suffix}o"
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self._outside, "type", "veth", "peer", "name", f"jtt{suffix}i")
            _ip("link", "set", f"jtt{suffix}i", "netns", self.name)
            _ip("addr", "add", f"{OUTSIDE}/30", "dev", self._outside)
            _ip("link", "set", self._outside, "up")
            inside = ["netns", "exec", self.name, "ip"]
            _ip(*inside, "addr", "add", f"{INSIDE}/30", "dev", f"jtt{suffix}i")
            _ip(*inside, "link", "set", f"jtt{suffix}i", "up")
            _ip(*inside, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the pair and the namespace."""
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self._outside)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", self.name)


class Dockerd:
    """One test engine: started, stopped, frozen, killed and restarted at will."""

    def __init__(self, name: str, namespace: Namespace | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self.folder = Path(tempfile.mkdtemp(prefix=f"jtt-engine-{name}-"))
        #: The local socket (also of the namespaced engine: sockets are files).
        self.socket = f"unix://{self.folder / 'docker.sock'}"
        self.process: subprocess.Popen[bytes] | None = None
        #: The engine's containerd, of its own: it outlives a SIGKILLed dockerd, whose shims
        #: and containers (live-restored) then reconnect when the daemon comes back.
        self.containerd: subprocess.Popen[bytes] | None = None
        self._containerd_socket = self.folder / "containerd" / "containerd.sock"
        if namespace is not None:
            certificates(self.folder, INSIDE)

    @property
    def config(self) -> dict[str, t.Any]:
        """Its entry in ``c.DockerRuntime.engines``."""
        if self.namespace is None:
            return {"url": self.socket}
        folder = self.folder
        return {
            "url": f"tcp://{INSIDE}:{TLS_PORT}",
            "tls": {
                "ca": str(folder / "ca.pem"),
                "cert": str(folder / "cert.pem"),
                "key": str(folder / "key.pem"),
            },
        }

    def _start_containerd(self) -> None:
        log = (self.folder / "containerd.log").open("ab")
        self.containerd = subprocess.Popen(
            containerd_command(self.folder / "containerd", self._containerd_socket),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while not self._containerd_socket.exists():
            if self.containerd.poll() is not None or time.monotonic() > deadline:
                tail = (self.folder / "containerd.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"containerd of {self.name} did not start:\n{tail}")
            time.sleep(0.05)

    @property
    def running(self) -> bool:
        """Whether the daemon process is alive (it may be frozen)."""
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the daemon (and its containerd, the first time) and wait until it answers;
        nothing if it runs (a second daemon on its socket and pid file would break both)."""
        if self.running:
            return
        if self.containerd is None:
            self._start_containerd()
        folder = self.folder
        command = [
            "dockerd",
            f"--containerd={self._containerd_socket}",
            f"--host={self.socket}",
            f"--data-root={folder / 'data'}",
            f"--exec-root={folder / 'exec'}",
            f"--pidfile={folder / 'docker.pid'}",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            "--live-restore",
        ]
        if self.namespace is not None:
            command = [
                # Only the network namespace (`ip netns exec` would also hide the cgroups).
                *("nsenter", f"--net=/run/netns/{self.namespace.name}", "--", *command),
                "--tlsverify",
                f"--tlscacert={folder / 'ca.pem'}",
                f"--tlscert={folder / 'server-cert.pem'}",
                f"--tlskey={folder / 'server-key.pem'}",
                f"--host=tcp://{INSIDE}:{TLS_PORT}",
            ]
        log = (folder / "dockerd.log").open("ab")
        # nsenter execs dockerd: the process is the daemon (for its signals).
        self.process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while not answers(self.socket):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "dockerd.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"dockerd {self.name} did not start:\n{tail}")
            time.sleep(0.1)

    def client(self) -> docker.DockerClient:
        """An SDK client on its local socket."""
        return docker.DockerClient(base_url=self.socket)

    def load_image(self) -> None:
        """Copy the test image from the machine's engine into this one."""
        with subprocess.Popen(["docker", "save", TEST_IMAGE], stdout=subprocess.PIPE) as save:
            subprocess.run(
                ["docker", "-H", self.socket, "load", "-q"],
                stdin=save.stdout,
                check=True,
                capture_output=True,
            )

    def signal(self, number: int) -> None:
        """Send the daemon a signal (SIGSTOP freezes it, SIGCONT thaws it)."""
        assert self.process is not None
        os.kill(self.process.pid, number)

    def kill(self) -> None:
        """SIGKILL the daemon (its containers live on: --live-restore)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        """Stop the daemon (thawing it first if it is frozen)."""
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def remove(self) -> None:
        """Stop it, end its containers' processes and remove its folder."""
        if self.running:
            with contextlib.suppress(docker.errors.DockerException):
                client = self.client()
                for container in client.containers.list(all=True):
                    container.remove(force=True)
                client.close()
        self.stop()
        if self.containerd is not None:
            self.containerd.terminate()
            try:
                self.containerd.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.containerd.kill()
                self.containerd.wait()
        # What the daemon mounted under its exec root and left (a killed one's).
        # What a daemon that did not stop cleanly left mounted (its containers' netns files).
        with open("/proc/mounts") as mounts:
            points = [line.split()[1] for line in mounts if f" {self.folder}/" in line]
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def needs_root_and_tools() -> None:
    """Skip unless this machine can start engines of its own (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("starting dockerd needs root (CI runs as root)")
    for program in ("dockerd", "openssl", "ip"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (Debian: docker.io, openssl, iproute2)")


#: The port of the test sshd (in the namespace, beside the TLS engine).
SSH_PORT = 2222


class SshHost:
    """An sshd in the namespace whose one key may only run ``docker system dial-stdio``
    against ``target`` (an engine reached as ``ssh://root@INSIDE:SSH_PORT``), and an ``ssh``
    wrapper that trusts it with the test's own key and known_hosts (``bin`` goes first on
    ``PATH``: the docker SDK runs the ``ssh`` it finds there)."""

    def __init__(self, folder: Path, namespace: Namespace, target: Dockerd) -> None:
        self.folder = folder
        self.bin = folder / "bin"
        self.bin.mkdir(parents=True)
        for key in ("client", "host"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)],
                check=True,
                capture_output=True,
            )
        client_key = (folder / "client.pub").read_text().strip()
        forced = f"docker -H {target.socket} system dial-stdio"
        (folder / "authorized_keys").write_text(
            f'command="{forced}",no-pty,no-port-forwarding,no-agent-forwarding {client_key}\n'
        )
        (folder / "sshd_config").write_text(
            f"ListenAddress {INSIDE}:{SSH_PORT}\n"
            f"HostKey {folder / 'host'}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
            f"PidFile {folder / 'sshd.pid'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
        )
        host_key = (folder / "host.pub").read_text().split()[:2]
        (folder / "known_hosts").write_text(f"[{INSIDE}]:{SSH_PORT} {' '.join(host_key)}\n")
        (folder / "ssh_config").write_text(
            "Host *\n"
            f"  IdentityFile {folder / 'client'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {folder / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  BatchMode yes\n"
        )
        wrapper = self.bin / "ssh"
        wrapper.write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {folder / "ssh_config"} "$@"\n')
        wrapper.chmod(0o755)
        # sshd's privilege separation directory (Debian's service makes it at start).
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        log = (folder / "sshd.log").open("ab")
        self.process = subprocess.Popen(
            [
                *("nsenter", f"--net=/run/netns/{namespace.name}", "--"),
                *("/usr/sbin/sshd", "-D", "-e", "-f", str(folder / "sshd_config")),
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while not self._listening():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "sshd.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"sshd did not start:\n{tail}")
            time.sleep(0.05)

    @staticmethod
    def _listening() -> bool:
        try:
            socket.create_connection((INSIDE, SSH_PORT), timeout=1).close()
        except OSError:
            return False
        return True

    @property
    def config(self) -> dict[str, t.Any]:
        """Its entry in ``c.DockerRuntime.engines``."""
        return {"url": f"ssh://root@{INSIDE}:{SSH_PORT}"}

    def close(self) -> None:
        """Stop sshd."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
