"""Agent credentials: who an agent is, whose it is, whether it holds control, what it may read.

An agent is created by its owner (a Jupyter user) and gets a token, shown once. The store keeps
only the token's SHA-256 digest; a token is ``jtt_<agent id>_<secret>``, so that checking one
looks up its agent by id and compares digests in constant time. Agents survive a server restart:
the store is a JSON file readable only by the server's user (0600), rewritten atomically on
every change. Control (``control_until``) and a pending ``request`` are checked against the
clock when read, so control ends by itself without a timer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import typing as t

from jupyter_core.paths import jupyter_data_dir
from traitlets import Integer, Unicode, default
from traitlets.config import LoggingConfigurable

from ..errors import Refusal

#: What every agent token starts with (so that a leaked one is recognisable as this kind).
TOKEN_PREFIX = "jtt_"  # noqa: S105 - a prefix, not a secret
#: Agent ids: ``secrets.token_hex(6)`` (12 hex digits: no ``_``, never a session id's 32).
AGENT_ID = re.compile(r"[0-9a-f]{12}")
#: An agent's name: what its owner calls it ("Claude Code"); printable, one line.
AGENT_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,64}")
#: The reason an agent gives for control, as the owner reads it (longer ones are cut).
MAX_REASON = 500
#: Minutes of control when neither the owner nor the agent names them.
DEFAULT_CONTROL_MINUTES = 10
#: The file format's version (a file of another version is not read).
FILE_VERSION = 1


class AgentError(Refusal):
    """A request about agents cannot be honoured."""


class NoSuchAgent(AgentError):
    """Not the caller's agent, or none: deliberately the same answer for both."""

    status = 403


class TooManyAgents(AgentError):
    """The owner has ``max_agents_per_user`` agents already."""

    status = 429


def now() -> datetime.datetime:
    """The current time, in UTC."""
    return datetime.datetime.now(datetime.timezone.utc)


def isoformat(moment: datetime.datetime | None) -> str | None:
    """``moment`` as the REST API writes times (ISO 8601, UTC, ``Z``)."""
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _parse_time(value: t.Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclasses.dataclass
class ControlRequest:
    """An agent's pending request for control, as its owner is shown it."""

    reason: str
    minutes: int
    created: datetime.datetime

    def model(self) -> dict[str, t.Any]:
        """The request as the REST API shows it."""
        return {"reason": self.reason, "minutes": self.minutes, "created": isoformat(self.created)}


@dataclasses.dataclass
class Agent:
    """One agent credential of one owner."""

    id: str
    name: str
    #: The owner label value it acts as (whose instances it reaches).
    owner: str
    #: The Jupyter username that created it (its terminals' username, as the audit names it).
    username: str
    token_digest: str
    created: datetime.datetime
    expires: datetime.datetime
    control_until: datetime.datetime | None = None
    request: ControlRequest | None = None
    #: Sessions of the owner the agent may read, in the order shared.
    shared: list[str] = dataclasses.field(default_factory=list)
    #: How it reaches its terminals: ``mcp`` (its token, at the MCP endpoint) or ``acp`` (a
    #: Jupyter AI persona, through ``jupyter_tool_terminal.acp``; its token is never shown).
    kind: str = "mcp"

    @property
    def expired(self) -> bool:
        """Whether its token no longer works because its lifetime is over."""
        return now() >= self.expires

    def has_control(self) -> bool:
        """Whether it may type into its terminals now."""
        return self.control_until is not None and now() < self.control_until

    def model(self) -> dict[str, t.Any]:
        """The agent as the REST API shows it (never its token)."""
        return {
            "id": self.id,
            "name": self.name,
            "created": isoformat(self.created),
            "expires": isoformat(self.expires),
            "control_until": isoformat(self.control_until) if self.has_control() else None,
            "request": self.request.model() if self.request is not None else None,
            "shared": list(self.shared),
            "kind": self.kind,
        }

    def to_json(self) -> dict[str, t.Any]:
        """The agent as its file stores it."""
        return {
            "id": self.id,
            "name": self.name,
            "owner": self.owner,
            "username": self.username,
            "token_sha256": self.token_digest,
            "created": isoformat(self.created),
            "expires": isoformat(self.expires),
            "control_until": isoformat(self.control_until),
            "request": self.request.model() if self.request is not None else None,
            "kind": self.kind,
        }

    @classmethod
    def from_json(cls, data: dict[str, t.Any]) -> Agent:
        """An agent from its file's record (``KeyError``/``ValueError``/``TypeError`` if bad)."""
        request = data.get("request")
        created = _parse_time(data["created"])
        expires = _parse_time(data["expires"])
        if created is None or expires is None or not AGENT_ID.fullmatch(data["id"]):
            msg = "bad agent record"
            raise ValueError(msg)
        return cls(
            id=data["id"],
            name=str(data["name"]),
            owner=str(data["owner"]),
            username=str(data["username"]),
            token_digest=str(data["token_sha256"]),
            created=created,
            expires=expires,
            control_until=_parse_time(data.get("control_until")),
            request=ControlRequest(
                reason=str(request["reason"]),
                minutes=int(request["minutes"]),
                created=_parse_time(request["created"]) or now(),
            )
            if isinstance(request, dict)
            else None,
            kind=str(data.get("kind", "mcp")),
        )


class AgentStore(LoggingConfigurable):
    """Every owner's agents, kept in ``path`` (``None`` or empty: in memory only).

    Configurable as ``c.AgentStore`` (created with ``parent=`` the extension application).
    """

    path = Unicode(
        None,
        allow_none=True,
        help="""The JSON file agents are kept in, so that they survive a restart (their token
        digests, owners, expiry and control; never a token). Written atomically, readable only
        by the server's user (0600). Default: `tool_terminal_agents.json` in the Jupyter data
        directory. Empty string: agents are kept in memory only.""",
    ).tag(config=True)

    token_lifetime = Integer(
        604800,
        min=60,
        help="Seconds an agent's token works after it was created (default a week).",
    ).tag(config=True)

    max_agents_per_user = Integer(
        8, min=1, help="How many agents one user may have at once; more are refused (429)."
    ).tag(config=True)

    control_max_minutes = Integer(
        60,
        min=1,
        help="""The most minutes of control a user can grant an agent at once (a longer grant
        or request is cut to this).""",
    ).tag(config=True)

    @default("path")
    def _default_path(self) -> str:
        return os.path.join(jupyter_data_dir(), "tool_terminal_agents.json")

    def __init__(self, **settings: t.Any) -> None:
        """``settings``: ``parent``, ``log``, ``config`` and any of the traits above."""
        super().__init__(**settings)
        if not self.path:
            self.path = None
        self.agents: dict[str, Agent] = {}
        self._load()

    # -- persistence --------------------------------------------------------------------------

    def _load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        try:
            with open(self.path, encoding="utf-8") as file:
                data = json.load(file)
            records = data["agents"] if data.get("version") == FILE_VERSION else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            # A file this server cannot read is not thrown away: the operator may want it.
            self.log.error(  # noqa: TRY400 - the reason is in the message, no traceback
                "jupyter_tool_terminal: the agents file %s cannot be read (%s); starting without "
                "agents (their tokens do not work) and not writing it",
                self.path,
                error,
            )
            self.path = None
            return
        if not isinstance(records, list):
            self.log.error(
                "jupyter_tool_terminal: the agents file %s is not of version %d; starting "
                "without agents and not writing it",
                self.path,
                FILE_VERSION,
            )
            self.path = None
            return
        for record in records:
            try:
                agent = Agent.from_json(record)
            except (KeyError, ValueError, TypeError):
                self.log.warning("jupyter_tool_terminal: skipping a malformed agent record")
                continue
            if not agent.expired:
                self.agents[agent.id] = agent

    def _save(self) -> None:
        """Write every agent to the file at once (a crash leaves the old or the new one)."""
        if self.path is None:
            return
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, mode=0o700, exist_ok=True)
        data = {"version": FILE_VERSION, "agents": [a.to_json() for a in self.agents.values()]}
        descriptor, temporary = tempfile.mkstemp(prefix=".agents-", dir=directory)
        try:
            # mkstemp creates the file 0600: the digests are no secret, but who has which
            # agent is nobody else's business.
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                json.dump(data, file, indent=1)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    # -- credentials --------------------------------------------------------------------------

    def create(
        self, owner: str, username: str, name: t.Any, *, kind: str = "mcp"
    ) -> tuple[Agent, str]:
        """A new agent of ``owner`` and its token (the only time the token is known)."""
        # The name as given (what rest-api.yml describes); the dialog trims what it sends.
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
            msg = "The name must be text of 1-64 characters on one line."
            raise AgentError(msg)
        mine = self.of(owner)
        if len(mine) >= self.max_agents_per_user:
            msg = (
                f"You have {self.max_agents_per_user} agents; revoke one before you connect "
                "another."
            )
            raise TooManyAgents(msg)
        agent_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        created = now().replace(microsecond=0)
        agent = Agent(
            id=agent_id,
            name=name.strip(),
            owner=owner,
            username=username,
            token_digest=_digest(secret),
            created=created,
            expires=created + datetime.timedelta(seconds=self.token_lifetime),
            kind=kind,
        )
        self.agents[agent_id] = agent
        self._save()
        return agent, f"{TOKEN_PREFIX}{agent_id}_{secret}"

    def authenticate(self, token: str) -> Agent | None:
        """The agent ``token`` belongs to, if it is one of a live agent; else ``None``."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        rest = token[len(TOKEN_PREFIX) :]
        # (The secret is urlsafe base64 and may hold "_"; the id never does.)
        agent_id, separator, secret = rest.partition("_")
        agent = self.agents.get(agent_id)
        if agent is None or not separator or not secret:
            return None
        if not hmac.compare_digest(agent.token_digest, _digest(secret)):
            return None
        if agent.expired:
            return None
        return agent

    def holds(self, agent: Agent) -> bool:
        """Whether ``agent`` is still one of the store's live agents (not revoked, not expired):
        a call authenticated earlier acts only while this holds."""
        return self.agents.get(agent.id) is agent and not agent.expired

    def of(self, owner: str) -> list[Agent]:
        """``owner``'s agents whose token still works, oldest first."""
        return [a for a in self.agents.values() if a.owner == owner and not a.expired]

    def get(self, owner: str, agent_id: t.Any) -> Agent:
        """``owner``'s agent ``agent_id``; :class:`NoSuchAgent` for anything else."""
        agent = self.agents.get(agent_id) if isinstance(agent_id, str) else None
        if agent is None or agent.owner != owner or agent.expired:
            msg = "No such agent for this user."
            raise NoSuchAgent(msg)
        return agent

    def delete(self, agent: Agent) -> None:
        """Forget ``agent``: its token stops working at once."""
        self.agents.pop(agent.id, None)
        self._save()

    def expire(self) -> list[Agent]:
        """Forget the agents whose lifetime is over; they are returned (to end their terminals)."""
        gone = [agent for agent in self.agents.values() if agent.expired]
        for agent in gone:
            del self.agents[agent.id]
        if gone:
            self._save()
        return gone

    # -- control ------------------------------------------------------------------------------

    def clamp_minutes(self, minutes: t.Any, *, default: int = DEFAULT_CONTROL_MINUTES) -> int:
        """``minutes`` of control as granted: a whole number, at most ``control_max_minutes``."""
        if minutes is None:
            minutes = default
        if isinstance(minutes, bool) or not isinstance(minutes, (int, float)):
            msg = "minutes must be a number of minutes (1 or more)."
            raise AgentError(msg)
        if not minutes >= 1:  # (NaN is not either)
            msg = "minutes must be a number of minutes (1 or more)."
            raise AgentError(msg)
        return int(min(minutes, self.control_max_minutes))

    def request_control(self, agent: Agent, reason: str, minutes: t.Any) -> None:
        """Record the agent's request for control, for its owner to grant or deny."""
        agent.request = ControlRequest(
            reason=reason[:MAX_REASON], minutes=self.clamp_minutes(minutes), created=now()
        )
        self._save()

    def grant(self, agent: Agent, minutes: t.Any) -> int:
        """Give the agent control for ``minutes`` from now (a pending request is answered);
        the minutes granted are returned."""
        granted = self.clamp_minutes(minutes)
        agent.control_until = now() + datetime.timedelta(minutes=granted)
        agent.request = None
        self._save()
        return granted

    def end_control(self, agent: Agent) -> None:
        """End the agent's control, or deny its request, at once."""
        agent.control_until = None
        agent.request = None
        self._save()

    # -- sharing ------------------------------------------------------------------------------

    def share(self, agent: Agent, session_id: str) -> None:
        """Let the agent read session ``session_id`` (one of its owner's)."""
        if session_id in agent.shared:
            msg = "The terminal is already shared with this agent."
            raise AgentError(msg)
        agent.shared.append(session_id)

    def unshare(self, agent: Agent, session_id: str) -> None:
        """Stop letting the agent read ``session_id``."""
        agent.shared.remove(session_id)

    def session_ended(self, session_id: str) -> None:
        """Forget ``session_id`` wherever it was shared (it ended)."""
        for agent in self.agents.values():
            if session_id in agent.shared:
                agent.shared.remove(session_id)
