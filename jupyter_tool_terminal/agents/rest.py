"""REST routes of agents: credentials, control and sharing (the owner's Jupyter auth).

``/tool-terminal/api/agents``, ``/{id}``, ``/{id}/control``, ``/{id}/shared`` and
``/{id}/shared/{session}``. Another user's agent is answered 403, as an unknown one.
``/tool-terminal/api/jupyter-ai``: the caller's instance for Jupyter AI's agents.
"""

from __future__ import annotations

import json
import typing as t

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from tornado import web

from .. import metrics
from ..base import ToolTerminalAPIHandler, ToolTerminalExtension
from ..protocol import strict_json
from ..runtime.base import valid_instance_id
from .setup import Agents
from .store import Agent, AgentError, isoformat

#: What every agent route answers while agents are turned off.
AGENTS_OFF = "AI agents are turned off on this server (ToolTerminalApp.agents_enabled is False)."


class NotFound(AgentError):
    """Agents are off here, or a sub-resource of the caller's own agent does not exist."""

    status = 404


class AgentsExtension(ToolTerminalExtension, t.Protocol):
    """What the agent routes need of the extension, beside what every handler does."""

    agents: Agents | None
    agents_enabled: bool


class AgentAPIHandler(ToolTerminalAPIHandler):
    """Base of the agent routes."""

    @property
    def tool_app(self) -> AgentsExtension:
        """The extension application."""
        return t.cast(AgentsExtension, self.extensionapp)

    @property
    def agents(self) -> Agents:
        """The server's agents; 503 if tool terminals are unavailable, 404 if agents are off."""
        self.tool_sessions  # noqa: B018 - raises 503 (naming the Hub service) if unavailable
        agents = self.tool_app.agents
        if agents is None or not self.tool_app.agents_enabled:
            raise NotFound(AGENTS_OFF)
        return agents

    def username(self) -> str:
        """The caller's Jupyter username."""
        return t.cast(User, self.current_user).username

    def json_body(self) -> dict[str, t.Any]:
        """The request's JSON object body (an empty body is ``{}``); 400 for anything else."""
        text = self.request.body.decode("utf-8", errors="replace").strip()
        if not text:
            return {}
        try:
            body = strict_json(text)
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            raise web.HTTPError(400, "The body must be a JSON object.")
        return body

    async def own_agent(self, agent_id: str) -> Agent:
        """The caller's agent ``agent_id`` (else 403, as for one that does not exist)."""
        agents = self.agents
        await agents.expire()
        return agents.store.get(self.owner(), agent_id)


class AgentsHandler(AgentAPIHandler):
    """``GET``/``POST /tool-terminal/api/agents``: the caller's agents; a new one."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """List the caller's agents (never their tokens)."""
        agents = self.agents
        await agents.expire()
        self.finish(json.dumps([agent.model() for agent in agents.store.of(self.owner())]))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        """Create an agent ``{"name": NAME}``; the answer carries its token, once."""
        agents = self.agents
        name = self.body_string("name")
        await agents.expire()
        agent, token = agents.store.create(self.owner(), self.username(), name)
        agents.audit.emit("create", agent, username=self.username())
        self.set_status(201)
        self.set_header(
            "Location", self.base_url.rstrip("/") + f"/tool-terminal/api/agents/{agent.id}"
        )
        self.finish(json.dumps({**agent.model(), "token": token}))


class AgentHandler(AgentAPIHandler):
    """``GET``/``DELETE /tool-terminal/api/agents/{id}``."""

    @web.authenticated
    @authorized
    async def get(self, agent_id: str) -> None:
        """Show one of the caller's agents."""
        self.finish(json.dumps((await self.own_agent(agent_id)).model()))

    @web.authenticated
    @authorized
    async def delete(self, agent_id: str) -> None:
        """Revoke the agent: its token stops at once and its terminals end."""
        agent = await self.own_agent(agent_id)
        await self.agents.revoke(agent, self.username())
        self.set_status(204)
        self.finish()


class AgentControlHandler(AgentAPIHandler):
    """``POST``/``DELETE /tool-terminal/api/agents/{id}/control``: grant or end control."""

    @web.authenticated
    @authorized
    async def post(self, agent_id: str) -> None:
        """Give the agent control for ``{"minutes": M}`` (default 10, capped by the server)."""
        agent = await self.own_agent(agent_id)
        body = self.json_body()
        store = self.agents.store
        minutes = store.grant(agent, body.get("minutes"))
        metrics.AGENT_CONTROL_GRANTS.inc()
        self.agents.audit.emit("grant", agent, username=self.username(), minutes=minutes)
        self.finish(json.dumps({**agent.model(), "control_until": isoformat(agent.control_until)}))

    @web.authenticated
    @authorized
    async def delete(self, agent_id: str) -> None:
        """End the agent's control, or deny its pending request, at once."""
        agent = await self.own_agent(agent_id)
        self.agents.store.end_control(agent)
        self.agents.audit.emit("end_control", agent, username=self.username())
        self.set_status(204)
        self.finish()


class AgentSharedHandler(AgentAPIHandler):
    """``GET``/``POST /tool-terminal/api/agents/{id}/shared``: sessions the agent may read."""

    @web.authenticated
    @authorized
    async def get(self, agent_id: str) -> None:
        """The session ids shared with the agent."""
        self.finish(json.dumps((await self.own_agent(agent_id)).shared))

    @web.authenticated
    @authorized
    async def post(self, agent_id: str) -> None:
        """Let the agent read ``{"session": ID}``, one of the caller's sessions."""
        agent = await self.own_agent(agent_id)
        session = self.tool_sessions.get_session(self.owner(), self.body_string("session"))
        self.agents.store.share(agent, session.id)
        self.agents.audit.emit("share", agent, username=self.username(), session_id=session.id)
        self.set_status(201)
        self.finish(json.dumps(agent.model()))


class AgentSharedSessionHandler(AgentAPIHandler):
    """``DELETE /tool-terminal/api/agents/{id}/shared/{session}``: stop sharing."""

    @web.authenticated
    @authorized
    async def delete(self, agent_id: str, session_id: str) -> None:
        """The agent may no longer read ``session_id``."""
        agent = await self.own_agent(agent_id)
        if session_id not in agent.shared:
            msg = "The terminal is not shared with this agent."
            raise NotFound(msg)
        self.agents.store.unshare(agent, session_id)
        self.agents.audit.emit("unshare", agent, username=self.username(), session_id=session_id)
        self.set_status(204)
        self.finish()


class JupyterAiHandler(AgentAPIHandler):
    """``GET``/``PUT /tool-terminal/api/jupyter-ai``: the instance the caller chose for Jupyter
    AI's agents (JupyterLab sends its setting here)."""

    def _model(self) -> str:
        return json.dumps({"instance": self.agents.jupyter_ai.chosen_instance(self.owner())})

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The caller's choice: ``{"instance": ID}``, or ``null`` for none."""
        self.finish(self._model())

    @web.authenticated
    @authorized
    async def put(self) -> None:
        """Choose ``{"instance": ID}`` (``null`` or ``""``: no choice, the only running one)."""
        body = self.json_body()
        instance = body.get("instance")
        if instance == "":
            instance = None
        if "instance" not in body or (instance is not None and not valid_instance_id(instance)):
            raise web.HTTPError(
                400, 'The body must be {"instance": ID} with a tool instance id, or null.'
            )
        self.agents.jupyter_ai.choose_instance(self.owner(), instance)
        self.finish(self._model())
