"""A user's server must not be able to act as its visitors at the tool-terminal service.

A user controls the code of her own server. When JupyterHub shares alice's server with bob and
bob opens it, alice's server receives an OAuth token *for bob*. If that token carried the
service's scope (as `Spawner.oauth_client_allowed_scopes` once told operators to set), alice's
server could open terminals in bob's containers. Here alice's server loads a small extension
that hands every visitor's token to whoever asks; the token it receives for bob must be refused
by the service, while bob's own login at the service (its own OAuth client) keeps working.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import typing as t

import pytest

from ..conftest import InstanceFactory
from ..support.hub import REPO, Browser, Hub, running_hub, service_mode_config, wait_for_service

SERVICE = "tool-terminal"
PREFIX = f"/services/{SERVICE}/"
API = f"{PREFIX}tool-terminal/api"

#: What a hostile server owner can load into her own server: an extension that shows each
#: visitor the token her server received for them.
LEAKING_EXTENSION = '''
"""Hands every visitor the Hub token this server received for them."""
from jupyter_server.base.handlers import JupyterHandler
from tornado import web


class LeakHandler(JupyterHandler):
    @web.authenticated
    def get(self):
        self.finish(self.identity_provider.hub_auth.get_token(self) or "")


def _jupyter_server_extension_points():
    return [{"module": "jtt_leak"}]


def _load_jupyter_server_extension(serverapp):
    route = serverapp.base_url.rstrip("/") + "/leak"
    serverapp.web_app.add_handlers(".*$", [(route, LeakHandler)])
'''


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> t.Iterator[Hub]:
    """A Hub with the service as docs/source/howto/jupyterhub-service.md configures it, and
    leaking user servers."""
    directory = tmp_path_factory.mktemp("hub-visitor-token")
    extension_dir = directory / "extensions"
    extension_dir.mkdir()
    (extension_dir / "jtt_leak.py").write_text(LEAKING_EXTENSION)
    config = service_mode_config(
        directory,
        SERVICE,
        service_config='c.ToolTerminalApp.tool_types = {"sandbox": {"shell": ["/bin/sh"]}}\n',
        user_config='c.ServerApp.jpserver_extensions["jtt_leak"] = True\n',
        user_environment={"PYTHONPATH": f"{extension_dir}:{REPO}"},
    )
    with running_hub(directory, config) as hub:
        wait_for_service(hub, PREFIX)
        yield hub


def _authorize_if_asked(browser: Browser, response: t.Any) -> t.Any:
    """Click *Authorize* on the Hub's consent page, as a visitor does, if it is shown."""
    if "/hub/api/oauth2/authorize" not in response.url or 'name="scopes"' not in response.text:
        return response
    fields = [("_xsrf", re.search(r'name="_xsrf" value="([^"]*)"', response.text).group(1))]  # type: ignore[union-attr]
    fields += [
        ("scopes", html.unescape(scope))
        for scope in re.findall(r'name="scopes" value="([^"]*)"', response.text)
    ]
    return browser.http.post(
        response.url,
        data=fields,
        headers={"Referer": response.url},
        timeout=30,
        allow_redirects=True,
    )


async def test_a_token_a_user_server_received_for_its_visitor_is_refused_at_the_service(
    hub: Hub, make_instance: InstanceFactory
) -> None:
    bobs = make_instance(owner="bob")
    await asyncio.to_thread(hub.start_server, "alice")
    # Alice shares her server with bob (JupyterHub's sharing API).
    shared = hub.api("POST", "shares/alice/", json={"user": "bob"})
    assert shared.status_code in (200, 201), shared.text
    bob = Browser(hub, "bob")
    await asyncio.to_thread(bob.login)
    visit = await bob.visit("/user/alice/leak")
    visit = await asyncio.to_thread(_authorize_if_asked, bob, visit)
    assert visit.status_code == 200, visit.text
    assert visit.url.endswith("/user/alice/leak"), visit.url
    leaked = visit.text.strip()
    assert leaked, "alice's server received no token for bob"

    thief = Browser(hub)
    thief.token = leaked
    status, body = await thief.json("GET", f"{API}/instances")
    assert status == 403, body
    assert bobs.name not in json.dumps(body)
    status, body = await thief.json(
        "POST", f"{API}/sessions", data=json.dumps({"instance": bobs.name})
    )
    assert status == 403, body
    # Nor can the token be turned into the service's login cookie.
    status, _ = await thief.json("POST", f"{API}/hub-login", data=b"")
    assert status in (400, 403)

    # Bob's own login at the service (the service's own OAuth client) still works.
    page = await bob.visit(f"{PREFIX}tool-terminal/login")
    assert page.status_code == 200, page.text
    login = page.json()
    assert login["user"] == "bob"
    assert login["xsrf"]
    status, instances = await bob.json("GET", f"{API}/instances")
    assert status == 200, instances
    assert bobs.name in {item["id"] for item in instances}


def test_the_service_login_cookie_is_same_site_lax(hub: Hub) -> None:
    browser = Browser(hub, "alice")
    browser.login()
    # Follow the OAuth flow by hand to see the callback's Set-Cookie header.
    url = f"{hub.url}{PREFIX}tool-terminal/login"
    cookies = []
    for _ in range(10):
        response = browser.http.get(url, timeout=30, allow_redirects=False)
        if "oauth_callback" in response.url:
            cookies += response.raw.headers.getlist("Set-Cookie")
        if response.status_code != 302:
            break
        location = response.headers["Location"]
        url = location if location.startswith("http") else hub.url + location
    assert response.status_code == 200, response.text
    login_cookies = [value for value in cookies if value.startswith(f"service-{SERVICE}=")]
    assert login_cookies, cookies
    assert all("samesite=lax" in value.lower() for value in login_cookies), login_cookies
