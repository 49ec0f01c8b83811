"""Telling JupyterHub that users of the tool-terminal service are active.

A user's own server reports its activity to the Hub itself, and this extension's activity is
part of it there (``tool_terminal_last_activity``). In service mode users work in the service,
which the Hub does not count as anyone's activity: a user who types only in tool terminals
would look idle, and ``jupyterhub-idle-culler`` would stop their server (the one whose
JupyterLab shows the terminals) under them. The service therefore posts each active user's
latest activity to the Hub's activity API, as a single-user server does for itself, for the
user and their default server. It needs the ``users:activity`` scope (a role for the service
in the Hub's config; see docs/jupyterhub.md).
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
        # The Hub gives its services these (and they are what JupyterHub's HubAuth reads).
        self._api_url = os.environ.get("JUPYTERHUB_API_URL", "").rstrip("/")
        self._api_token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
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
        quoted = urllib.parse.quote(user, safe="")
        await AsyncHTTPClient().fetch(
            HTTPRequest(
                f"{self._api_url}/users/{quoted}/activity",
                method="POST",
                headers={
                    "Authorization": f"token {self._api_token}",
                    "Content-Type": "application/json",
                },
                body=json.dumps(body),
                request_timeout=self.request_timeout,
            )
        )

    def stop(self) -> None:
        """Stop reporting (what was recorded since the last report is not sent)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
