"""What the tool-terminal service asks of JupyterHub's REST API: activity and user names.

**Activity.** A user's own server reports its activity to the Hub itself, and this
extension's activity is part of it there (``tool_terminal_last_activity``). In service mode users
work in the service, which the Hub does not count as anyone's activity: a user who types only in
tool terminals would look idle, and ``jupyterhub-idle-culler`` would stop their server (the one
whose JupyterLab shows the terminals) under them. The service therefore posts each active user's
latest activity to the Hub's activity API, as a single-user server does for itself, for the
user and their default server. It needs the ``users:activity`` scope.

**User names.** A read-only share names another user; the Hub knows whether that user exists.
With the ``read:users:name`` scope the service asks it, so that a share with a mistyped name is
refused instead of granted to nobody.

Both scopes come from a role for the service in the Hub's config (see
docs/source/howto/jupyterhub-service.md).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import typing as t
import urllib.parse

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import Float
from traitlets.config import LoggingConfigurable


def running_as_hub_service(environ: t.Mapping[str, str] = os.environ) -> bool:
    """Whether this server was started by JupyterHub as a service (not as a user's server)."""
    return all(environ.get(name) for name in ("JUPYTERHUB_SERVICE_NAME", "JUPYTERHUB_API_URL"))


async def hub_request(
    path: str, *, method: str = "GET", body: t.Any = None, timeout: float = 10
) -> t.Any:
    """A request to the Hub's REST API (``path`` below ``/hub/api/``) with this service's own
    token, as JupyterHub gives it to its services; the answer's JSON, if any.

    Raises :class:`tornado.httpclient.HTTPClientError` for an error status, :class:`OSError`
    or :class:`asyncio.TimeoutError` if the Hub cannot be reached.
    """
    api_url = os.environ.get("JUPYTERHUB_API_URL", "").rstrip("/")
    response = await AsyncHTTPClient().fetch(
        HTTPRequest(
            f"{api_url}/{path}",
            method=method,
            headers={
                "Authorization": f"token {os.environ.get('JUPYTERHUB_API_TOKEN', '')}",
                "Content-Type": "application/json",
            },
            body=None if body is None else json.dumps(body),
            request_timeout=timeout,
        )
    )
    return json.loads(response.body) if response.body else None


class HubActivityReporter(LoggingConfigurable):
    """Posts the latest tool-terminal activity of each user to the Hub, every ``interval``."""

    interval = Float(
        60,
        min=0,
        config=True,
        help="""Seconds between two reports of users' tool-terminal activity to JupyterHub
        (service mode only; a user's own server reports its activity itself). Each report
        sends, for every user who worked in a tool terminal since the last one, their latest
        activity, for the user and their default server, so that idle culling counts it.
        0 turns the reports off.""",
    )

    request_timeout = Float(
        10,
        min=1,
        config=True,
        help="Seconds one report to the Hub may take before it is given up (and logged).",
    )

    def __init__(self, **kwargs: t.Any) -> None:
        super().__init__(**kwargs)
        self._pending: dict[str, datetime.datetime] = {}
        self._task: asyncio.Task[None] | None = None

    def record(self, user: str, moment: datetime.datetime) -> None:
        """Note that ``user`` was active at ``moment`` (sent with the next report)."""
        if self.interval <= 0:
            return
        if user not in self._pending or moment > self._pending[user]:
            self._pending[user] = moment
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._report_periodically())

    async def _report_periodically(self) -> None:
        while True:
            await self.report()
            await asyncio.sleep(self.interval)

    async def report(self) -> None:
        """Send what was recorded since the last report (errors are logged, never raised)."""
        pending, self._pending = self._pending, {}
        for user, moment in pending.items():
            await self._post(user, moment)

    async def _post(self, user: str, moment: datetime.datetime) -> None:
        stamp = moment.astimezone(datetime.timezone.utc).isoformat().replace("+00:00", "Z")
        body = {"last_activity": stamp, "servers": {"": {"last_activity": stamp}}}
        try:
            await self._request(user, body)
        except HTTPClientError as error:
            if error.code != 400:
                self.log.warning("Could not report %s's activity to the Hub: %s", user, error)
                return
            # 400: the user has no default server (it was never started, or they use named
            # servers only); their own activity still counts.
            del body["servers"]
            try:
                await self._request(user, body)
            except HTTPClientError as again:
                self.log.warning("Could not report %s's activity to the Hub: %s", user, again)
        except (OSError, asyncio.TimeoutError) as error:
            self.log.warning("Could not report %s's activity to the Hub: %s", user, error)

    async def _request(self, user: str, body: dict[str, t.Any]) -> None:
        await hub_request(
            f"users/{urllib.parse.quote(user, safe='')}/activity",
            method="POST",
            body=body,
            timeout=self.request_timeout,
        )

    def stop(self) -> None:
        """Stop reporting (what was recorded since the last report is not sent)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None


class HubUserDirectory(LoggingConfigurable):
    """Tells whether a user name exists on the Hub (with the ``read:users:name`` scope)."""

    request_timeout = Float(
        5,
        min=1,
        config=True,
        help="Seconds a question to the Hub about a user name may take before it is given up.",
    )

    async def exists(self, name: str) -> bool | None:
        """Whether the Hub has a user ``name``; ``None`` if it cannot tell (no scope, no Hub)."""
        try:
            await hub_request(
                f"users/{urllib.parse.quote(name, safe='')}", timeout=self.request_timeout
            )
        except HTTPClientError as error:
            if error.code == 404:
                return False
            self.log.warning(
                "Cannot check user names with the Hub (%s): shares are granted unchecked; give "
                "the service the read:users:name scope to check them",
                error,
            )
            return None
        except (OSError, asyncio.TimeoutError) as error:
            self.log.warning("Cannot check user names with the Hub: %s", error)
            return None
        return True
