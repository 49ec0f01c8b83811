"""The jupyter_server extension application: configuration, wiring and shutdown."""

from __future__ import annotations

import datetime
import getpass
import os
import typing as t

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.extension.application import ExtensionApp
from traitlets import (
    Bool,
    CaselessStrEnum,
    Dict,
    Float,
    Integer,
    List,
    Type,
    Unicode,
    default,
    observe,
)

from . import api_handlers, websocket
from .agents.endpoint import MCPHandler
from .agents.rest import (
    AgentControlHandler,
    AgentHandler,
    AgentsHandler,
    AgentSharedHandler,
    AgentSharedSessionHandler,
    JupyterAiHandler,
)
from .agents.setup import Agents, make_agents
from .agents.store import AgentStore
from .agents.tools import AgentTools
from .base import ID
from .events import AuditLog
from .files import FileTransfers
from .gcfreeze import freeze_start_up
from .handover import Handover
from .hub import login as hub_login
from .hub.api import HubActivityReporter, HubUserDirectory, running_as_hub_service
from .hub.pages import LoginPage, ToolTilesPage
from .manager import ToolTerminalManager
from .recording import Recorder
from .redaction import Redactor
from .runtime import RuntimeUnavailable, ToolRuntime
from .runtime.docker import DockerRuntime
from .runtime.local import LocalRuntime
from .screen import BACKENDS, ScreenModels
from .settings import forward_moved, moved, rename, renamed
from .setup_status import (
    LOCAL_SECTION,
    QUICK_START_SECTION,
    TOOL_TYPES_SECTION,
    SetupNote,
    SetupStatusHandler,
    no_tool_types,
)
from .tooltypes import ToolType, ToolTypeError, parse_tool_types

if t.TYPE_CHECKING:
    from .agents.endpoint import MCPExtension
    from .agents.rest import AgentsExtension
    from .setup_status import StatusExtension

#: The `web_app.settings` key of the tool terminals' last input or output (contract).
LAST_ACTIVITY_SETTING = "tool_terminal_last_activity"
#: The JupyterLab page-config key carrying `service_url` to the frontend.
SERVICE_URL_PAGE_CONFIG = "toolTerminalServiceUrl"


class ToolTerminalApp(ExtensionApp):
    """Terminals inside each Jupyter user's own tool instances (Docker containers, or local
    working directories)."""

    name = "jupyter_tool_terminal"
    description = __doc__
    load_other_extensions = True

    tool_types = Dict(
        {},
        help="""Tool types by name (the value of a container's `jupyter-tool-terminal.tool`
        label). Each is a dict with the keys `display_name` (launcher title), `shell` (the
        command, a non-empty list of strings; default ["/bin/sh"]) or `shells` (absolute paths of
        shells tried in order, e.g. ["/bin/bash", "/bin/sh"]: the first the instance has
        starts), `startup_command` (a shell
        command run in the terminal before the shell; its `cd` and `export` carry over),
        `user` (the exec user; default the image's), `workdir` (an absolute path; for a local
        instance taken relative to its root), `env` (variables added to the terminal's
        environment), `icon` (an SVG string), `record` (true: every session is recorded, see
        `recording_dir`) and `cleanup` ("session", the default: a session's end kills its own
        processes; "instance": when an instance's last session ends, every process started
        since its first one is killed, as root, including those no session can be told by). A
        tool type with an unknown key or a bad value disables the extension with an error at
        start-up.""",
    ).tag(config=True)

    manager_class = Type(
        default_value=ToolTerminalManager,
        klass=ToolTerminalManager,
        help="""The class of the registry of tool terminals (a subclass of ToolTerminalManager),
        as ServerApp.terminal_manager_class is for Jupyter's own terminals.""",
    ).tag(config=True)

    # Settings that moved to the objects that use them (see settings.py): these names on the
    # app are the contract's; they keep working, and warn once.
    max_sessions_per_user = moved(ToolTerminalManager, "max_sessions_per_user", Integer)
    max_sessions = moved(ToolTerminalManager, "max_sessions", Integer)
    idle_timeout = moved(ToolTerminalManager, "idle_timeout", Float)
    disconnect_grace = moved(ToolTerminalManager, "disconnect_grace", Float)
    attach_timeout = moved(ToolTerminalManager, "attach_timeout", Float)
    max_clients_per_session = moved(ToolTerminalManager, "max_clients_per_session", Integer)
    max_observers = moved(ToolTerminalManager, "max_observers", Integer)
    max_observer_clients_per_session = moved(
        ToolTerminalManager, "max_observer_clients_per_session", Integer
    )
    max_clients_per_observer = moved(ToolTerminalManager, "max_clients_per_observer", Integer)
    max_clients_per_user = moved(ToolTerminalManager, "max_clients_per_user", Integer)
    max_input_backlog = moved(ToolTerminalManager, "max_input_backlog", Integer)
    replay_buffer_size = moved(ToolTerminalManager, "replay_buffer_size", Integer)
    scrollback_lines = moved(ToolTerminalManager, "scrollback_lines", Integer)

    screen_model = CaselessStrEnum(
        ["auto", *BACKENDS],
        default_value="auto",
        help="""The terminal emulator of the sessions' screen models: "pyghostty" (Ghostty's
        libghostty-vt: fast, and a reattached screen equal to the browser terminal's; wheels
        for Linux x86_64 and aarch64 only), "pyte" (pure Python, everywhere), or "auto"
        (pyghostty where it is installed, else pyte).""",
    ).tag(config=True)

    screen_memory_limit = Float(
        None,
        allow_none=True,
        help="""MiB all the sessions' screen models may use together (estimated). Past it,
        the models with no recent output, largest first, drop their scrollback and keep none
        (a client attaching to them gets only the visible screen), logged once. Default
        (unset): `ToolTerminalManager.max_sessions` times the largest model with a full
        scrollback of the chosen emulator (pyghostty), or 8 MiB a session (pyte, whose
        largest model is much larger).""",
    ).tag(config=True)

    max_message_size = Integer(
        1024 * 1024,
        min=1024,
        help="Largest WebSocket frame (bytes) a client may send; larger ones close with 1009.",
    ).tag(config=True)

    ping_interval = Float(
        30,
        min=0,
        help="""Seconds between WebSocket pings to each terminal client. A client that does
        not answer within `pong_timeout` is dropped (and its session closed if it was the last
        one). 0 turns pings off.""",
    ).tag(config=True)

    pong_timeout = Float(
        30,
        min=0,
        help="""Seconds a terminal client has to answer a WebSocket ping (at most
        `ping_interval`).""",
    ).tag(config=True)

    ping_timeout = renamed(Float(30, min=0), "ToolTerminalApp", "pong_timeout")

    @observe("ping_timeout")
    def _ping_timeout_renamed(self, change: t.Mapping[str, t.Any]) -> None:
        rename(self, change)

    auth_recheck_interval = Float(
        60,
        min=0,
        help="""Seconds between checks that each open terminal connection's credentials are
        still valid: its user is authenticated again (token or cookie, as on connect; with
        JupyterHub this asks the Hub, so a logout or a revoked token counts, after the Hub
        client's own cache) and must still be allowed to `execute` and own the session. A
        connection that fails is closed with code 1008. 0 turns the checks off.""",
    ).tag(config=True)

    runtime = CaselessStrEnum(
        ["auto", "docker", "local"],
        default_value="auto",
        help="""Where tool terminals run: "docker" (tool instances are labelled containers of
        the Docker Engine that `docker.from_env()` finds), "local" (tool instances are working
        directories on this machine, declared in `local_instances`), or "auto": Docker when an
        engine answers at start-up, else local. With "docker" and no engine the extension is
        disabled with an error saying how to fix it.""",
    ).tag(config=True)

    docker_runtime_class = Type(
        DockerRuntime,
        klass=ToolRuntime,
        help='The runtime class used for `runtime = "docker"` (configure it as c.DockerRuntime).',
    ).tag(config=True)

    local_runtime_class = Type(
        LocalRuntime,
        klass=ToolRuntime,
        help='The runtime class used for `runtime = "local"` (configure it as c.LocalRuntime).',
    ).tag(config=True)

    local_instances = Dict(
        {},
        help="""Tool instances of the local runtime: {ID: {"tool": NAME, "root": PATH}}. Each
        is a working directory on this machine (`~` expanded, created at start-up if missing)
        owned by `owner`; its terminals are shells of the server's own user, started in the
        tool type's `workdir` taken relative to the root. A local instance is not an isolation
        boundary. An instance with an unknown tool type, or whose working directory leads
        outside its root, disables the extension with an error naming it.""",
    ).tag(config=True)

    owner = Unicode(
        help="""The owner name that tool instances' `jupyter-tool-terminal.owner` label must
        carry when jupyter_server's own (token or password) identity provider is in use, since
        it does not name real users. Default: $JUPYTERHUB_USER if set, else the OS user name.
        With any other identity provider (JupyterHub's, or a custom one) the label is compared
        with each request's `username` instead.""",
    ).tag(config=True)

    owner_from_identity = Bool(
        None,
        allow_none=True,
        help="""Whether instance ownership is the requesting user's `username` (True) or the
        configured `owner` (False). The default (None) decides by the identity provider:
        `owner` for jupyter_server's own token/password provider, `username` for any other.""",
    ).tag(config=True)

    recording_dir = Unicode(
        help="""Directory for the recordings of tool types with `"record": true`: one asciicast
        v2 file (`*.cast`, playable with `asciinema play`) per session, named after its owner,
        instance, session id and start time, readable only by the server's user. Created if
        missing. A session of a recorded tool type that cannot write its file does not start.
        Default: `tool_terminal_recordings` in the Jupyter data directory.""",
    ).tag(config=True)

    recording_max_bytes = Integer(
        50 * 1024 * 1024,
        min=1024,
        help="""Largest size of one recording file (bytes); the recording then stops with a
        marker saying so, while the terminal goes on.""",
    ).tag(config=True)

    recording_input = Bool(
        False,
        help="""Whether recordings also contain what users type (asciicast "i" events),
        redacted like the output. Off by default: keystrokes include passwords typed at
        prompts that do not echo them.""",
    ).tag(config=True)

    redact_patterns = List(
        Unicode(),
        help="""Regular expressions (Python syntax) whose matches are replaced by [REDACTED]
        in recordings, in addition to the built-in secret formats (cloud, AI and other API
        keys and tokens, JWTs, private keys, password=... assignments). A named group `keep`
        stays readable (e.g. `(?P<keep>PIN: )\\d+`). Write them for one line: they are
        matched on what the terminal shows (a wrapped line is one), a line or several at a
        time, so a match should not reach across a line end (use [ \\t] rather than \\s).""",
    ).tag(config=True)

    redact_literals = List(
        Unicode(),
        help="""Strings replaced by [REDACTED] wherever they appear in recordings (for
        example a deployment's shared demo password).""",
    ).tag(config=True)

    service_url = Unicode(
        "",
        help="""The URL of a jupyter-tool-terminal JupyterHub service (for example
        "/services/tool-terminal/"), set in users' single-user servers: their JupyterLab then
        lists tool tiles and opens terminals through that service, authenticated by the Hub,
        instead of this server, which then runs none itself (it needs no container engine,
        and its own tool-terminal routes answer 503 naming the service). Empty: this server
        serves the tool terminals itself.""",
    ).tag(config=True)

    take_over = Bool(
        False,
        help="""Start by taking over the tool terminals of the server running on this port
        (an upgrade or a configuration change that ends no session): that server hands its
        sessions, their shells and its listening socket over and exits, and the browsers
        reconnect within `disconnect_grace`. If this server cannot serve them (its
        configuration lacks one of their tool types, or uses another runtime), it exits with
        status 4 and the running server goes on serving. With no server running, it starts
        as usual. The service's `--take-over` sets this.""",
    ).tag(config=True)

    handover_socket = Unicode(
        "",
        help="""The Unix socket (mode 0600) where this server listens for a successor, and
        where a server with `take_over` looks for the one it succeeds. Default:
        `jupyter-tool-terminal-handover-PORT.sock` in the Jupyter runtime directory.""",
    ).tag(config=True)

    max_file_transfer_bytes = moved(FileTransfers, "max_file_transfer_bytes", Integer)

    #: Serves the file routes of tool instances (``None`` while no terminals are served).
    file_transfers: FileTransfers | None = None

    #: The hand-over to a successor and from a predecessor (``None`` before it starts).
    handover: Handover | None = None

    agents_enabled = Bool(
        True,
        help="""Whether AI agents (MCP clients such as Claude Code) may be connected: users
        create agent credentials in JupyterLab, and agents reach their tool terminals at
        `{base_url}tool-terminal/mcp`, read-only until the user grants control for some
        minutes. False: the agent routes answer 404 and the MCP endpoint refuses every
        request (403).""",
    ).tag(config=True)

    agents_on_shared_domain = Bool(
        False,
        help="""In a JupyterHub service on a Hub without per-user subdomains (no
        `JupyterHub.subdomain_host`, so no `JUPYTERHUB_HOST`): allow AI agents anyway. There
        every user's server serves pages at the service's origin, and a script of such a page
        can create an agent in a visitor's name and grant it control (no confirmation on that
        origin stops a script of the same origin), so agents are off in such a service unless
        this is True (docs: "Run it as a JupyterHub service", "AI agents on a Hub without per-user
        subdomains").
        Set it only where every user's server serves pages you trust.""",
    ).tag(config=True)

    agents_file = moved(AgentStore, "path", Unicode)
    agent_token_lifetime = moved(AgentStore, "token_lifetime", Integer)
    max_agents_per_user = moved(AgentStore, "max_agents_per_user", Integer)
    agent_control_max_minutes = moved(AgentStore, "control_max_minutes", Integer)
    agent_output_limit = moved(AgentTools, "output_limit", Integer)
    max_agent_calls_in_flight = moved(AgentTools, "max_calls_in_flight", Integer)
    max_terminals_per_agent = moved(AgentTools, "max_terminals_per_agent", Integer)

    #: Agents' credentials, tools and MCP endpoint; ``None`` while tool terminals are
    #: unavailable here (agents off still creates them, to say so).
    agents: Agents | None = None
    #: The runtime that runs the shells (created at start-up unless a test or embedder set one).
    tool_runtime: ToolRuntime | None = None
    #: The registry of sessions; ``None`` while the extension is disabled by a config error.
    session_manager: ToolTerminalManager | None = None
    #: Reports users' activity to JupyterHub when this server is a Hub service, else ``None``.
    hub_activity: HubActivityReporter | None = None
    setup_notes: List[SetupNote] = List(
        help="""What start-up found that keeps users from tool terminals (SetupNote objects,
        sent by GET /tool-terminal/api/status). Set by the extension, not configuration."""
    )

    @default("recording_dir")
    def _default_recording_dir(self) -> str:
        return os.path.join(jupyter_data_dir(), "tool_terminal_recordings")

    @default("owner")
    def _default_owner(self) -> str:
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()

    def principal_for(self, user: User, identity_provider: IdentityProvider) -> str:
        """The owner-label value that ``user`` (already authenticated) acts as."""
        by_identity = self.owner_from_identity
        if by_identity is None:
            by_identity = type(identity_provider).__module__ != IdentityProvider.__module__
        return user.username if by_identity else self.owner

    def initialize_settings(self) -> None:
        """Validate the tool types and create the session manager."""
        self.setup_notes = []
        # JupyterLab's page config tells the frontend where the tool terminals are.
        web_app = getattr(self.serverapp, "web_app", None)
        if self.service_url:
            if web_app is not None:
                page_config = web_app.settings.setdefault("page_config_data", {})
                page_config[SERVICE_URL_PAGE_CONFIG] = self.service_url
            # Nothing about tool types or engines: they are the service's, not this server's.
            self.log.info(
                "jupyter_tool_terminal: tool terminals are served by the JupyterHub service at "
                "%s (service_url); this server runs none",
                self.service_url,
            )
            return
        try:
            tool_types = parse_tool_types(self.tool_types)
        except ToolTypeError as error:
            self._disabled(str(error), TOOL_TYPES_SECTION)
            return
        if not tool_types:
            self.log.warning(
                "jupyter_tool_terminal: no tool types are configured (set "
                "ToolTerminalApp.tool_types): no tool instance will be shown"
            )
            self.setup_notes.append(no_tool_types())
        try:
            redactor = Redactor(self.redact_patterns, self.redact_literals)
        except ValueError as error:
            self._disabled(str(error), "recording")
            return
        if self.tool_runtime is None:
            self.tool_runtime = self._make_runtime(tool_types)
            if self.tool_runtime is None:
                return
        user_directory = None
        if running_as_hub_service():
            self.hub_activity = HubActivityReporter(parent=self, log=self.log)
            user_directory = HubUserDirectory(parent=self, log=self.log)
            self._agents_only_on_an_origin_of_their_own()
        # Set as `c.ToolTerminalApp.NAME`, a moved setting wins over its new name.
        forward_moved(self)
        screens = ScreenModels(self.screen_model, log=self.log)
        self.session_manager = self.manager_class(
            parent=self,
            runtime=self.tool_runtime,
            tool_types=tool_types,
            screens=screens,
            log=self.log,
            recorder=Recorder(
                parent=self,
                directory=self.recording_dir,
                max_bytes=self.recording_max_bytes,
                redactor=redactor,
                record_input=self.recording_input,
                log=self.log,
            ),
            audit=AuditLog(getattr(self.serverapp, "event_logger", None), self.log),
            on_activity=self._record_activity,
            user_directory=user_directory,
        )
        screens.limit_memory(int(self._screen_memory_limit(self.session_manager) * 2**20))
        self.file_transfers = FileTransfers(parent=self, manager=self.session_manager, log=self.log)
        self.agents = make_agents(
            manager=self.session_manager,
            redactor=redactor,
            event_logger=getattr(self.serverapp, "event_logger", None),
            parent=self,
            log=self.log,
        )
        if self.agents_enabled and self.agents.jupyter_ai.wanted:
            from .acp.personas import give_tool_terminals  # noqa: PLC0415 (needs Jupyter AI)

            self.agents.jupyter_ai.start(give_tool_terminals)
        assert self.serverapp is not None
        self.handover = Handover(
            parent=self,
            serverapp=self.serverapp,
            manager=self.session_manager,
            runtime=self.tool_runtime,
            socket_path=self.handover_socket,
            take_over=self.take_over,
            log=self.log,
        )
        self.handover.prepare()

    def _screen_memory_limit(self, manager: ToolTerminalManager) -> float:
        """``screen_memory_limit`` (MiB), by default ``manager``'s ``max_sessions`` shares:
        the manager's, which holds whichever name the configuration set it by."""
        if self.screen_memory_limit is not None:
            return self.screen_memory_limit
        return manager.max_sessions * manager.screens.model_class.session_share_mib

    def _agents_only_on_an_origin_of_their_own(self) -> None:
        """Turn agents off in a Hub service whose origin every user's server shares (issue
        30.6), unless the operator accepted that (``agents_on_shared_domain``)."""
        if not self.agents_enabled or self.agents_on_shared_domain:
            return
        if os.environ.get("JUPYTERHUB_HOST"):
            return  # users' servers have origins of their own
        self.agents_enabled = False
        self.log.warning(
            "jupyter_tool_terminal: AI agents are off: the Hub serves users' servers at this "
            "service's origin (no JUPYTERHUB_HOST, JupyterHub's subdomain_host), where any "
            "user's page could create agents in its visitors' names; set "
            "c.ToolTerminalApp.agents_on_shared_domain = True to allow them anyway"
        )

    def _disabled(self, why: str, section: str) -> None:
        """Log that the extension is disabled and why, and tell its users (a setup note)."""
        self.log.error("jupyter_tool_terminal is disabled: %s", why)
        self.setup_notes.append(
            SetupNote("disabled", f"Tool terminals are disabled on this server: {why}.", section)
        )

    def _make_runtime(self, tool_types: dict[str, ToolType]) -> ToolRuntime | None:
        """The configured runtime, or ``None`` (with an error logged) if it cannot work here.

        ``auto`` takes Docker when an engine answers, else the local runtime; the log says
        which and why.
        """
        if self.runtime != "local":
            docker = self.docker_runtime_class(parent=self, log=self.log)
            try:
                docker.check_available()
            except RuntimeUnavailable as error:
                docker.close()
                if self.runtime == "docker":
                    self._disabled(
                        f"ToolTerminalApp.runtime is 'docker' but {error} (or set "
                        "ToolTerminalApp.runtime = 'auto')",
                        QUICK_START_SECTION,
                    )
                    return None
                why = f"runtime 'auto' and {error}"
                if not self.local_instances:
                    self.setup_notes.append(
                        SetupNote(
                            "engine",
                            f"No container engine can be used: {error}. This server has no "
                            "local tool instances either.",
                            LOCAL_SECTION,
                        )
                    )
            else:
                self.log.info(
                    "jupyter_tool_terminal: tool terminals run in Docker containers (%s)",
                    "runtime 'docker'"
                    if self.runtime == "docker"
                    else "runtime 'auto' and a Docker Engine answers",
                )
                if self.local_instances:
                    self.log.warning(
                        "jupyter_tool_terminal: local_instances are not served: the runtime is "
                        "Docker (set ToolTerminalApp.runtime = 'local' to use them)"
                    )
                return docker
        else:
            why = "runtime 'local'"
        local = self.local_runtime_class(
            parent=self,
            log=self.log,
            instances=self.local_instances,
            owner=self.owner,
            tool_types=tool_types,
        )
        try:
            local.check_available()
        except RuntimeUnavailable as error:
            self._disabled(str(error), LOCAL_SECTION)
            return None
        self.log.info(
            "jupyter_tool_terminal: tool terminals run locally, as this server's user, in %d "
            "local instance(s) (%s)",
            len(self.local_instances),
            why,
        )
        return local

    def initialize_handlers(self) -> None:
        """Register the REST and WebSocket routes (relative: the server adds its base_url)."""
        self.handlers.extend(
            [
                *api_handlers.default_handlers,
                *hub_login.default_handlers,
                (r"/tool-terminal/api/status", SetupStatusHandler),
                *websocket.default_handlers,
                (r"/tool-terminal/api/agents", AgentsHandler),
                (rf"/tool-terminal/api/agents/{ID}", AgentHandler),
                (rf"/tool-terminal/api/agents/{ID}/control", AgentControlHandler),
                (rf"/tool-terminal/api/agents/{ID}/shared", AgentSharedHandler),
                (rf"/tool-terminal/api/agents/{ID}/shared/{ID}", AgentSharedSessionHandler),
                (r"/tool-terminal/api/jupyter-ai", JupyterAiHandler),
                (r"/tool-terminal/mcp", MCPHandler),
                (r"/tool-terminal/login", LoginPage),
                (r"/tool-terminal/?", ToolTilesPage),
            ]
        )

    def _record_activity(self, user: str, moment: datetime.datetime) -> None:
        # jupyter_server's last activity (`/api/status`, what a JupyterHub single-user server
        # reports to the Hub for idle culling) is the latest `*_last_activity` setting.
        web_app = getattr(self.serverapp, "web_app", None)
        if web_app is not None:
            web_app.settings[LAST_ACTIVITY_SETTING] = moment
        # A Hub service is nobody's server: it reports its users' activity to the Hub itself.
        if self.hub_activity is not None:
            self.hub_activity.record(user, moment)

    def current_activity(self) -> bool:
        """Whether any tool terminal is open (keeps an idle-shutdown server alive)."""
        return bool(self.session_manager and self.session_manager.session_count())

    async def _start_jupyter_server_extension(self, serverapp: t.Any) -> None:
        """Once the server runs, every extension loaded: keep what start-up made out of the
        garbage collector's full passes, which held the event loop (``gcfreeze.py``)."""
        del serverapp
        freeze_start_up(self.log)

    async def stop_extension(self) -> None:
        """Kill every session's processes before the server exits."""
        if self.handover is not None:
            self.handover.close()
        if self.agents is not None:
            await self.agents.stop()
        if self.session_manager is not None:
            await self.session_manager.shutdown()
        if self.tool_runtime is not None:
            self.tool_runtime.close()
        if self.hub_activity is not None:
            self.hub_activity.stop()


if t.TYPE_CHECKING:
    from .base import ToolTerminalExtension

    # The handlers see the app through these protocols: mypy checks that it is each of them.
    _AS_SEEN_BY_HANDLERS: type[ToolTerminalExtension] = ToolTerminalApp
    _AS_SEEN_BY_STATUS: type[StatusExtension] = ToolTerminalApp
    _AS_SEEN_BY_AGENT_ROUTES: type[AgentsExtension] = ToolTerminalApp
    _AS_SEEN_BY_MCP: type[MCPExtension] = ToolTerminalApp
