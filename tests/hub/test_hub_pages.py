"""The service's two HTML pages (``hub/pages.py``, rendered from ``hub/templates``): the tool
tiles and the login window's answer, with what a user or tool type names escaped."""

from __future__ import annotations

import json
import typing as t

import pytest

from jupyter_tool_terminal.hub.pages import LOGIN_MESSAGE

from ..conftest import ALICE, TOOL_TYPES, InstanceFactory

#: A display name that is HTML (and would end a script).
HOSTILE = "<b>Sandbox</b> & </script>"


@pytest.fixture
def tool_types() -> dict[str, t.Any]:
    return {**TOOL_TYPES, "sandbox": {**TOOL_TYPES["sandbox"], "display_name": HOSTILE}}


async def test_the_tiles_page_lists_the_callers_instances_escaped(
    jp_fetch: t.Any, make_container: InstanceFactory
) -> None:
    container = make_container(owner="alice")
    response = await jp_fetch("tool-terminal/", headers=ALICE)
    page = response.body.decode()
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "<h1>Tool terminals of alice</h1>" in page
    assert f'data-instance="{container.name}"' in page
    assert "&lt;b&gt;Sandbox&lt;/b&gt; &amp; &lt;/script&gt;" in page
    assert HOSTILE not in page
    assert f"{container.name} (running)" in page


async def test_the_tiles_page_of_a_user_with_no_instances(jp_fetch: t.Any) -> None:
    page = (await jp_fetch("tool-terminal/", headers=ALICE)).body.decode()
    assert "<p>You have no tool instances.</p>" in page
    assert "<ul>" not in page


async def test_the_login_window_posts_the_user_and_the_xsrf_token(jp_fetch: t.Any) -> None:
    response = await jp_fetch("tool-terminal/login", params={"popup": "1"}, headers=ALICE)
    page = response.body.decode()
    assert response.headers["Cache-Control"] == "no-store"
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    literal = script.split("const login = ", 1)[1].split(";\n", 1)[0]
    login = json.loads(literal)
    assert login["type"] == LOGIN_MESSAGE
    assert login["user"] == "alice"
    assert login["xsrf"]
    plain = await jp_fetch("tool-terminal/login", headers=ALICE)
    assert json.loads(plain.body)["user"] == "alice"
