"""Several Docker engines behind one runtime: their configuration, and their health.

``c.DockerRuntime.engines = {NAME: {"url": URL, "tls": {"ca": PATH, "cert": PATH, "key": PATH}}}``
gives the runtime one engine per entry (see the docs, "Several hosts"). Each is served by an
:class:`~jupyter_tool_terminal.runtime.docker_engine.EngineRuntime` of its own (its connection
pool, threads, kill wing and leases), and watched by an :class:`EngineHealth`: an engine that
stops answering is marked down at once, its sessions end, and it is back as soon as it answers
again. Nothing one engine does, or fails to do, waits on another.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import re
import typing as t

import docker
import docker.constants
import docker.errors
import docker.tls

from .. import metrics
from .base import EngineUnreachable

#: Engine names: the first part of an instance id (``ENGINE/CONTAINER``) and a metrics label.
ENGINE_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}")
#: The URL schemes an engine can be reached by (as ``DOCKER_HOST`` takes them).
SCHEMES = ("unix://", "tcp://", "ssh://")
_TLS_KEYS = ("ca", "cert", "key")


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """One entry of ``c.DockerRuntime.engines``, checked."""

    name: str
    url: str
    #: The CA that signed the engine's certificate, and this server's client certificate.
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def client(self, **kwargs: t.Any) -> docker.APIClient:
        """A new SDK client for the engine (``kwargs``: pool size, timeout)."""
        tls: docker.tls.TLSConfig | bool = False
        if self.ca or self.cert:
            tls = docker.tls.TLSConfig(
                client_cert=(self.cert, self.key) if self.cert and self.key else None,
                ca_cert=self.ca,
                verify=self.ca or True,
            )
        # ssh:// through the ssh client of the host (its keys, known_hosts and config), not a
        # Python SSH library.
        client = docker.APIClient(
            base_url=self.url,
            tls=tls,
            use_ssh_client=self.url.startswith("ssh://"),
            # The lowest API version, until the engine's own is asked below.
            version=docker.constants.MINIMUM_DOCKER_API_VERSION,
            **kwargs,
        )
        # requests lets REQUESTS_CA_BUNDLE override the engine's own CA (psf/requests#3829):
        # a host that sets it for its public CAs would refuse the engine's certificate.
        client.trust_env = False
        # What version="auto" does, once the environment is out of the way.
        client._version = client._retrieve_server_version()
        return client


def parse_engines(value: t.Mapping[str, t.Any]) -> dict[str, EngineSpec]:
    """``c.DockerRuntime.engines`` as specs; ``ValueError`` says what is wrong with it."""
    specs = {}
    for name, entry in value.items():
        if ENGINE_NAME.fullmatch(str(name)) is None:
            msg = f"engine name {name!r} must be letters, digits, '_', '.' or '-' (at most 64)"
            raise ValueError(msg)
        if not isinstance(entry, dict):
            msg = f'engine {name!r} must be a dict {{"url": URL, "tls": {{...}}}}'
            raise ValueError(msg)  # noqa: TRY004 - one error type for every mistake in it
        unknown = set(entry) - {"url", "tls"}
        if unknown:
            msg = f"engine {name!r} has unknown keys: {', '.join(sorted(unknown))}"
            raise ValueError(msg)
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(SCHEMES):
            msg = f"engine {name!r} needs a url starting with {', '.join(SCHEMES)}"
            raise ValueError(msg)
        specs[name] = EngineSpec(name, url, *parse_tls(f"engine {name!r}", url, entry.get("tls")))
    return specs


def parse_tls(what: str, url: str, value: t.Any) -> tuple[str | None, str | None, str | None]:
    """An engine's ``tls`` entry as (ca, cert, key); ``ValueError`` names ``what`` it is of."""
    tls = value or {}
    if not isinstance(tls, dict) or set(tls) - set(_TLS_KEYS):
        msg = f'{what}: tls is {{"ca": PATH, "cert": PATH, "key": PATH}}'
        raise ValueError(msg)
    if not all(isinstance(tls.get(key, ""), str) for key in _TLS_KEYS):
        msg = f"{what}: tls paths must be strings"
        raise ValueError(msg)
    if bool(tls.get("cert")) != bool(tls.get("key")):
        msg = f"{what}: tls needs both cert and key, or neither"
        raise ValueError(msg)
    if tls and not url.startswith("tcp://"):
        msg = f"{what}: tls is for tcp:// urls"
        raise ValueError(msg)
    return tls.get("ca"), tls.get("cert"), tls.get("key")


def unreachable(name: str) -> EngineUnreachable:
    """The error (safe to show) of an engine that does not answer."""
    return EngineUnreachable(f"the container engine '{name}' is not reachable")


class EngineHealth:
    """Whether one engine answers, checked every ``interval`` seconds by a ping on a client
    and a thread of its own (so a hanging engine's other calls never delay the verdict).

    ``on_change(up)`` is called on the event loop when the verdict changes.
    """

    def __init__(
        self,
        spec: EngineSpec,
        *,
        interval: float,
        timeout: float,
        log: logging.Logger | logging.LoggerAdapter[t.Any],
        on_change: t.Callable[[bool], None],
    ) -> None:
        self.spec = spec
        self.interval = interval
        self.timeout = timeout
        self.log = log
        self._on_change = on_change
        self.up = True
        self._answering = asyncio.Event()
        self._answering.set()
        self._task: asyncio.Task[None] | None = None
        self._checking: asyncio.Future[bool] | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"jupyter-tool-terminal-health-{spec.name}"
        )
        self._client: docker.APIClient | None = None
        metrics.ENGINE_UP.labels(spec.name).set(1)

    def start(self) -> None:
        """Start watching (on the running event loop); idempotent."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch())

    async def wait_answering(self) -> None:
        """Return once the engine answers (at once while it does)."""
        await self._answering.wait()

    def ping(self) -> bool:
        """Whether the engine answers a ping within the timeout (blocking)."""
        try:
            if self._client is None:
                self._client = self.spec.client(timeout=max(int(self.timeout), 1))
            return bool(self._client.ping())
        except (docker.errors.DockerException, OSError) as error:
            self.log.debug("Docker engine %r does not answer: %s", self.spec.name, error)
            if self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
            self._client = None
            return False

    def assume(self, up: bool) -> None:
        """Take a verdict found before the event loop runs (at start-up), without acting."""
        self.up = up
        metrics.ENGINE_UP.labels(self.spec.name).set(1 if up else 0)
        if up:
            self._answering.set()
        else:
            self._answering.clear()

    async def check(self) -> bool:
        """Ping now (or join the ping on its way), and take the verdict; whether the engine
        answered. Many failing calls at once (an engine's sessions ending together) share
        one ping."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._ping_and_judge())
        return await asyncio.shield(self._checking)

    async def _ping_and_judge(self) -> bool:
        loop = asyncio.get_running_loop()
        ping = loop.run_in_executor(self._executor, self.ping)
        try:
            # A stopped engine accepts the connection and never answers: the socket's own
            # timeout ends the ping, and this one the wait for it.
            answered = await asyncio.wait_for(asyncio.shield(ping), self.timeout + 1)
        except TimeoutError:
            answered = False
        self.set(answered)
        return answered

    def set(self, up: bool) -> None:
        """Take a verdict."""
        if up == self.up:
            return
        self.up = up
        metrics.ENGINE_UP.labels(self.spec.name).set(1 if up else 0)
        if up:
            self._answering.set()
            self.log.warning("Docker engine %r (%s) answers again", self.spec.name, self.spec.url)
        else:
            self._answering.clear()
            self.log.warning(
                "Docker engine %r (%s) is not reachable: its tool terminals end, new ones on it "
                "are refused, and its kills wait until it answers",
                self.spec.name,
                self.spec.url,
            )
        self._on_change(up)

    async def _watch(self) -> None:
        while True:
            await self.check()
            await asyncio.sleep(self.interval)

    def close(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
