"""A real Docker Swarm on this machine, for the tests of ``c.DockerRuntime.swarm``.

Each node is a ``dockerd`` (with its containerd) in a network namespace and a UTS namespace of
its own, so it has its own address and host name, as a host of a cluster has. The namespaces
hang off one bridge in a namespace of their own; this machine reaches the bridge through a
veth pair, as a Jupyter server reaches its cluster's hosts. Every node's engine listens on TCP
with TLS (one CA, a server certificate per node, one client certificate for the server) and on
a local socket for the test's own calls. No registry: the test image is loaded into every node
and ``DOCKER_SERVICE_PREFER_OFFLINE_IMAGE`` makes tasks start from it. Tear-down leaves no
namespace, mount, process or folder behind.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
import typing as t
import uuid
from pathlib import Path

import docker
import docker.errors
import docker.types
import pytest

from ..conftest import TEST_IMAGE
from .engines import answers, containerd_command, openssl

#: The cluster's network: the machine's side of its veth, and node N at ``.1N``.
SUBNET = "10.231.88"
HOST_ADDRESS = f"{SUBNET}.1"
TLS_PORT = 2376
OWNER_LABEL = "jupyter-tool-terminal.owner"
TOOL_LABEL = "jupyter-tool-terminal.tool"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _certificate(folder: Path, name: str, subject: str, extensions: str) -> None:
    (folder / f"{name}.ext").write_text(extensions + "\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}-key.pem",
            "-out", f"{name}.csr", "-subj", subject, cwd=folder)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem",
            "-CAcreateserial", "-out", f"{name}-cert.pem", "-days", "2",
            "-extfile", f"{name}.ext", cwd=folder)  # fmt: skip


class Node:
    """One host of the swarm: its namespaces, containerd and dockerd."""

    def __init__(self, swarm: Swarm, index: int) -> None:
        self.swarm = swarm
        self.index = index
        self.hostname = f"{swarm.prefix}-n{index}"
        self.address = f"{SUBNET}.{10 + index}"
        self.namespace = f"{swarm.prefix}-n{index}"
        self.folder = swarm.folder / f"n{index}"
        self.folder.mkdir()
        self.socket = f"unix://{self.folder / 'docker.sock'}"
        self.dockerd: subprocess.Popen[bytes] | None = None
        self.containerd: subprocess.Popen[bytes] | None = None
        self._containerd_socket = self.folder / "containerd" / "containerd.sock"
        bridge_side = f"{swarm.prefix}p{index}"
        _ip("netns", "add", self.namespace)
        _ip("-n", swarm.namespace, "link", "add", bridge_side, "type", "veth",
            "peer", "name", "eth0", "netns", self.namespace)  # fmt: skip
        _ip("-n", swarm.namespace, "link", "set", bridge_side, "master", "br0", "up")
        _ip("-n", self.namespace, "addr", "add", f"{self.address}/24", "dev", "eth0")
        _ip("-n", self.namespace, "link", "set", "eth0", "up")
        _ip("-n", self.namespace, "link", "set", "lo", "up")
        _certificate(
            swarm.folder,
            f"n{index}",
            f"/CN={self.address}",
            f"subjectAltName=IP:{self.address}\nextendedKeyUsage=serverAuth",
        )

    def _in_namespace(self, *command: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.namespace}", "--", *command]

    def start(self) -> None:
        """Start containerd and dockerd in the node's namespaces (containerd there too: a
        task on the host network runs in its shim's namespace)."""
        if self.containerd is None:
            log = (self.folder / "containerd.log").open("ab")
            self.containerd = subprocess.Popen(
                self._in_namespace(
                    *containerd_command(self.folder / "containerd", self._containerd_socket)
                ),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
            log.close()
            self._wait(self._containerd_socket.exists, "containerd", self.containerd)
        certs = self.swarm.folder
        dockerd = " ".join(
            [
                "dockerd",
                f"--containerd={self._containerd_socket}",
                f"--host={self.socket}",
                f"--host=tcp://{self.address}:{TLS_PORT}",
                "--tlsverify",
                f"--tlscacert={certs / 'ca.pem'}",
                f"--tlscert={certs / f'n{self.index}-cert.pem'}",
                f"--tlskey={certs / f'n{self.index}-key.pem'}",
                f"--data-root={self.folder / 'data'}",
                f"--exec-root={self.folder / 'exec'}",
                f"--pidfile={self.folder / 'docker.pid'}",
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-forward=false",
                "--ip-masq=false",
            ]
        )
        log = (self.folder / "dockerd.log").open("ab")
        # Its own host name (a UTS namespace), then exec: the process is the daemon.
        self.dockerd = subprocess.Popen(
            self._in_namespace(
                "unshare", "--uts", "--", "sh", "-c", f"hostname {self.hostname} && exec {dockerd}"
            ),
            stdout=log,
            stderr=log,
            start_new_session=True,
            # No registry: a task starts from the image the node has.
            env={
                "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1",
            },
        )
        log.close()
        self._wait(lambda: answers(self.socket), "dockerd", self.dockerd)

    def _wait(
        self, ready: t.Callable[[], bool], what: str, process: subprocess.Popen[bytes]
    ) -> None:
        deadline = time.monotonic() + 60
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                log = "containerd.log" if what == "containerd" else "dockerd.log"
                tail = (self.folder / log).read_text(errors="replace")[-3000:]
                pytest.fail(f"{what} of {self.hostname} did not start:\n{tail}")
            time.sleep(0.05)

    def client(self) -> docker.DockerClient:
        """An SDK client on the node's local socket."""
        return docker.DockerClient(base_url=self.socket, timeout=30)

    def load_image(self, image_tar: Path) -> None:
        """Load the test image (saved once for the swarm)."""
        subprocess.run(
            ["docker", "-H", self.socket, "load", "-q", "-i", str(image_tar)],
            check=True,
            capture_output=True,
        )

    @property
    def config(self) -> dict[str, t.Any]:
        """The node's entry for ``c.DockerRuntime.engines`` (over TCP with TLS)."""
        return {"url": f"tcp://{self.address}:{TLS_PORT}", "tls": self.swarm.client_tls}

    def freeze(self) -> None:
        """SIGSTOP the node's dockerd (a host that hangs)."""
        assert self.dockerd is not None
        self.dockerd.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT it again."""
        assert self.dockerd is not None
        self.dockerd.send_signal(signal.SIGCONT)

    def cut_off_from(self, other: Node) -> None:
        """Drop this node's traffic to ``other`` (a partition the machine still sees across)."""
        _ip("-n", self.namespace, "route", "add", "blackhole", f"{other.address}/32")

    def heal_from(self, other: Node) -> None:
        """Undo :meth:`cut_off_from`."""
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("-n", self.namespace, "route", "del", "blackhole", f"{other.address}/32")

    def remove(self) -> None:
        """Stop the daemons, unmount what they left and remove the namespace."""
        for process in (self.dockerd, self.containerd):
            if process is None or process.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        # The containers' processes, if a daemon left any (their shims are in our session).
        subprocess.run(["pkill", "-KILL", "-f", str(self.folder)], check=False)
        with open("/proc/mounts") as mounts:
            points = [line.split()[1] for line in mounts if f" {self.folder}/" in line]
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], check=False, capture_output=True)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", self.namespace)


class Swarm:
    """Three (or more) nodes, ``n1`` the manager, the others workers; services of the tests'."""

    def __init__(self, nodes: int = 3) -> None:
        self.prefix = f"jsw{uuid.uuid4().hex[:4]}"
        self.folder = Path(tempfile.mkdtemp(prefix="jtt-swarm-"))
        self.namespace = f"{self.prefix}-sw"
        self.nodes: dict[str, Node] = {}
        self._host_side = f"{self.prefix}h"
        self._image_tar = self.folder / "image.tar"
        self._services: list[str] = []
        _ip("netns", "add", self.namespace)
        _ip("-n", self.namespace, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.namespace, "link", "set", "br0", "up")
        # The machine's way in: a veth from here to the bridge.
        _ip("link", "add", self._host_side, "type", "veth", "peer", "name", "uplink",
            "netns", self.namespace)  # fmt: skip
        _ip("-n", self.namespace, "link", "set", "uplink", "master", "br0", "up")
        _ip("addr", "add", f"{HOST_ADDRESS}/24", "dev", self._host_side)
        _ip("link", "set", self._host_side, "up")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem",
                "-out", "ca.pem", "-days", "2", "-subj", "/CN=jtt-swarm-ca",
                cwd=self.folder)  # fmt: skip
        _certificate(self.folder, "client", "/CN=jtt-swarm-client", "extendedKeyUsage=clientAuth")
        subprocess.run(
            ["docker", "save", "-o", str(self._image_tar), TEST_IMAGE],
            check=True,
            capture_output=True,
        )
        for _ in range(nodes):
            self.add_node(join=False)

    @property
    def client_tls(self) -> dict[str, str]:
        """The server's TLS settings for every node's engine."""
        return {
            "ca": str(self.folder / "ca.pem"),
            "cert": str(self.folder / "client-cert.pem"),
            "key": str(self.folder / "client-key.pem"),
        }

    @property
    def manager(self) -> Node:
        return self.nodes["n1"]

    def add_node(self, *, join: bool = True) -> Node:
        """A new node, started with the image (and joined as a worker when the swarm runs)."""
        node = Node(self, len(self.nodes) + 1)
        self.nodes[f"n{node.index}"] = node
        node.start()
        node.load_image(self._image_tar)
        if join:
            self.join(node)
        return node

    def start(self) -> None:
        """Init the swarm on n1 (a 1 s dispatcher heartbeat: a node that hangs is marked down
        in seconds), join the others, and wait until every node is ready."""
        manager = self.manager.client()
        manager.swarm.init(
            advertise_addr=self.manager.address,
            listen_addr=f"{self.manager.address}:2377",
            dispatcher_heartbeat_period=1_000_000_000,
        )
        manager.close()
        for node in list(self.nodes.values())[1:]:
            self.join(node)

    def join(self, node: Node) -> None:
        manager = self.manager.client()
        token = manager.swarm.attrs["JoinTokens"]["Worker"]
        manager.close()
        client = node.client()
        client.swarm.join(
            remote_addrs=[f"{self.manager.address}:2377"],
            join_token=token,
            advertise_addr=node.address,
            listen_addr=f"{node.address}:2377",
        )
        client.close()
        ready = ("ready", "active")
        self.wait_for(lambda: self.node_state(node) == ready, f"{node.hostname} ready")

    def node_state(self, node: Node) -> tuple[str, str] | None:
        """(state, availability) of a node in the manager's view."""
        client = self.manager.client()
        try:
            for info in client.api.nodes():
                if info["Description"]["Hostname"] == node.hostname:
                    return info["Status"]["State"], info["Spec"]["Availability"]
        finally:
            client.close()
        return None

    @staticmethod
    def wait_for(predicate: t.Callable[[], bool], what: str, timeout: float = 60) -> None:
        """Poll the swarm's state (it announces nothing a test can await)."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                pytest.fail(f"the swarm did not get there in {timeout} s: {what}")
            time.sleep(0.1)

    def service(
        self,
        name: str,
        *,
        owner: str = "alice",
        tool: str | None = "sandbox",
        on: Node | None = None,
        replicas: int = 1,
    ) -> str:
        """A service like SwarmSpawner's: its task containers carry the owner and tool labels
        (``--container-label``), on the host network, with a host name ``NODE-SLOT``."""
        labels = {OWNER_LABEL: owner, **({TOOL_LABEL: tool} if tool else {})}
        client = self.manager.client()
        try:
            service = client.services.create(
                TEST_IMAGE,
                ["/bin/sleep", "infinity"],
                name=name,
                container_labels=labels,
                hostname="{{.Node.Hostname}}-{{.Task.Slot}}",
                networks=["host"],
                init=True,
                mode=docker.types.ServiceMode("replicated", replicas=replicas),
                constraints=[f"node.hostname=={on.hostname}"] if on is not None else None,
                stop_grace_period=1_000_000_000,
            )
            self._services.append(service.id)
        finally:
            client.close()
        self.wait_for(lambda: len(self.running_tasks(name)) == replicas, f"{name} running")
        return name

    def running_tasks(self, service: str) -> list[dict[str, t.Any]]:
        """The service's tasks that the managers want running and that run."""
        client = self.manager.client()
        try:
            tasks = client.api.tasks(filters={"service": service, "desired-state": "running"})
        finally:
            client.close()
        return [task for task in tasks if task["Status"]["State"] == "running"]

    def task_node(self, service: str) -> str:
        """The host name of the node that runs the service's (one) running task."""
        client = self.manager.client()
        try:
            (task,) = self.running_tasks(service)
            node: str = client.api.inspect_node(task["NodeID"])["Description"]["Hostname"]
            return node
        finally:
            client.close()

    def update(self, service: str, **changes: t.Any) -> None:
        """``docker service update`` through the SDK (``constraints=[...]``, say)."""
        client = self.manager.client()
        try:
            client.services.get(service).update(**changes)
        finally:
            client.close()

    def activate(self, node: Node) -> None:
        """Undo :meth:`drain`."""
        self._availability(node, "active")

    def drain(self, node: Node) -> None:
        """``docker node update --availability drain``: its tasks move elsewhere."""
        self._availability(node, "drain")

    def _availability(self, node: Node, availability: str) -> None:
        client = self.manager.client()
        try:
            for entry in client.nodes.list():
                if entry.attrs["Description"]["Hostname"] != node.hostname:
                    continue
                spec = dict(entry.attrs["Spec"])
                spec["Availability"] = availability
                entry.update(spec)
        finally:
            client.close()

    def remove_services(self) -> None:
        client = self.manager.client()
        try:
            for service_id in self._services:
                with contextlib.suppress(docker.errors.NotFound):
                    client.api.remove_service(service_id)
        finally:
            client.close()
        self._services.clear()

    def remove(self) -> None:
        """Tear it all down: services, daemons, namespaces, the folder."""
        with contextlib.suppress(Exception):
            self.remove_services()
        for node in self.nodes.values():
            node.remove()
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", self._host_side)
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", self.namespace)
        shutil.rmtree(self.folder, ignore_errors=True)
