"""The jupyter_server extension application: configuration, wiring and shutdown."""

from __future__ import annotations

import datetime
import getpass
import os
import sys
import typing as t

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, CaselessStrEnum, Dict, Float, Integer, List, Type, Unicode, default

from . import api_handlers, websocket
from .agents.endpoint import MCPHandler
from .agents.rest import (
    AgentControlHandler,
    AgentHandler,
    AgentsHandler,
    AgentSharedHandler,
    AgentSharedSessionHandler,
)
from .agents.setup import Agents, make_agents
from .base import ID
from .events import AuditLog
from .handover import (
    FAILED,
    HandoverError,
    Inheritance,
    Predecessor,
    Successor,
    adopt,
    default_socket_path,
    serve_only_on_inherited,
)
from .hub import login as hub_login
from .hub.api import HubActivityReporter, HubUserDirectory, running_as_hub_service
from .hub.pages import LoginPage, ToolTilesPage
from .manager import ToolTerminalManager, manager_setting
from .recording import Recorder
from .redaction import Redactor
from .runtime import RuntimeUnavailable, ToolRuntime
from .runtime.docker import DockerRuntime
from .runtime.local import LocalRuntime
from .screen import BACKENDS, ScreenModels, model_class
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
    from jupyter_server.serverapp import ServerApp

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
        command, a non-empty list of strings; default ["/bin/sh"]), `startup_command` (a shell
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

    # The session registry's settings live on ToolTerminalManager (c.ToolTerminalManager.*);
    # these names on the app are the contract's and keep working.
    max_sessions_per_user = manager_setting("max_sessions_per_user")
    max_sessions = manager_setting("max_sessions")
    idle_timeout = manager_setting("idle_timeout")
    disconnect_grace = manager_setting("disconnect_grace")
    attach_timeout = manager_setting("attach_timeout")
    max_clients_per_session = manager_setting("max_clients_per_session")
    max_observers = manager_setting("max_observers")
    max_observer_clients_per_session = manager_setting("max_observer_clients_per_session")
    max_clients_per_observer = manager_setting("max_clients_per_observer")
    max_clients_per_user = manager_setting("max_clients_per_user")
    max_input_backlog = manager_setting("max_input_backlog")
    replay_buffer_size = manager_setting("replay_buffer_size")
    scrollback_lines = manager_setting("scrollback_lines")

    screen_model = CaselessStrEnum(
        ["auto", *BACKENDS],
        default_value="auto",
        help="""The terminal emulator of the sessions' screen models: "pyghostty" (Ghostty's
        libghostty-vt: fast, and a reattached screen equal to the browser terminal's; wheels
        for Linux x86_64 and aarch64 only), "pyte" (pure Python, everywhere), or "auto"
        (pyghostty where it is installed, else pyte).""",
    ).tag(config=True)

    screen_memory_limit = Float(
        help="""MiB all the sessions' screen models may use together (estimated). Past it,
        the models with no recent output, largest first, drop their scrollback and keep none
        (a client attaching to them gets only the visible screen), logged once. Default:
        `max_sessions` times the largest model with a full scrollback of the chosen emulator
        (pyghostty), or 8 MiB a session (pyte, whose largest model is much larger).""",
    ).tag(config=True)

    @default("screen_memory_limit")
    def _default_screen_memory_limit(self) -> float:
        return float(self.max_sessions * model_class(self.screen_model).session_share_mib)

    max_message_size = Integer(
        1024 * 1024,
        min=1024,
        help="Largest WebSocket frame (bytes) a client may send; larger ones close with 1009.",
    ).tag(config=True)

    ping_interval = Float(
        30,
        min=0,
        help="""Seconds between WebSocket pings to each terminal client. A client that does
        not answer within `ping_timeout` is dropped (and its session closed if it was the last
        one). 0 turns pings off.""",
    ).tag(config=True)

    ping_timeout = Float(
        30,
        min=0,
        help="Seconds a terminal client has to answer a ping (at most `ping_interval`).",
    ).tag(config=True)

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
        v2 file (*.cast, playable with `asciinema play`) per session, named after its owner,
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

    #: Where this server listens for its successor (``None``: it does not).
    predecessor: Predecessor | None = None

    agents_enabled = Bool(
        True,
        help="""Whether AI agents (MCP clients such as Claude Code) may be connected: users
        create agent credentials in JupyterLab, and agents reach their tool terminals at
        `{base_url}tool-terminal/mcp`, read-only until the user grants control for some
        minutes. False: the agent routes answer 404 and the MCP endpoint refuses every
        request (403).""",
    ).tag(config=True)

    agent_token_lifetime = Integer(
        604800,
        min=60,
        help="Seconds an agent's token works after it was created (default a week).",
    ).tag(config=True)

    max_agents_per_user = Integer(
        8, min=1, help="How many agents one user may have at once; more are refused (429)."
    ).tag(config=True)

    agent_control_max_minutes = Integer(
        60,
        min=1,
        help="""The most minutes of control a user can grant an agent at once (a longer grant
        or request is cut to this).""",
    ).tag(config=True)

    agent_output_limit = Integer(
        32768,
        min=1024,
        help="""Characters of a command's output an agent receives from run_command at most
        (head and tail, with a marker between, when there is more).""",
    ).tag(config=True)

    max_agent_calls_in_flight = Integer(
        4,
        min=1,
        help="""How many MCP tool calls one agent may have running at once; more are refused
        (an isError result) until one answers.""",
    ).tag(config=True)

    max_terminals_per_agent = Integer(
        4,
        min=1,
        help="""How many terminals one agent may have open at once (they also count against
        the user's `max_sessions_per_user`).""",
    ).tag(config=True)

    agents_file = Unicode(
        help="""The JSON file agents are kept in, so that they survive a restart (their token
        digests, owners, expiry and control; never a token). Written atomically, readable only
        by the server's user (0600). Default: `tool_terminal_agents.json` in the Jupyter data
        directory. Empty string: agents are kept in memory only.""",
    ).tag(config=True)

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

    @default("agents_file")
    def _default_agents_file(self) -> str:
        return os.path.join(jupyter_data_dir(), "tool_terminal_agents.json")

    @default("owner")
    def _default_owner(self) -> str:
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()

    def principal_for(self, user: User, identity_provider: IdentityProvider) -> str:
        """The owner-label value that ``user`` (already authenticated) acts as."""
        by_identity = self.owner_from_identity
        if by_identity is None:
            by_identity = type(identity_provider).__module__ != IdentityProvider.__module__
        return user.username if by_identity else self.owner

    def _configured_manager_settings(self) -> list[str]:
        """The registry's settings the operator set by their names on this app."""
        configured: set[str] = set()
        for cls in type(self).mro():
            section = self.config.get(cls.__name__)
            if isinstance(section, dict):
                configured.update(section)
        return [
            name
            for name in self.manager_class.class_trait_names(config=True)
            if name in configured and self.has_trait(name)
        ]

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
        self.session_manager = self.manager_class(
            parent=self,
            runtime=self.tool_runtime,
            tool_types=tool_types,
            # Set as `c.ToolTerminalApp.NAME`: that wins over `c.ToolTerminalManager.NAME`.
            **{name: getattr(self, name) for name in self._configured_manager_settings()},
            screens=ScreenModels(
                self.screen_model, int(self.screen_memory_limit * 2**20), log=self.log
            ),
            log=self.log,
            recorder=Recorder(
                self.recording_dir,
                max_bytes=self.recording_max_bytes,
                redactor=redactor,
                record_input=self.recording_input,
                log=self.log,
            ),
            audit=AuditLog(getattr(self.serverapp, "event_logger", None), self.log),
            on_activity=self._record_activity,
            user_directory=user_directory,
        )
        self.agents = make_agents(
            manager=self.session_manager,
            redactor=redactor,
            output_limit=self.agent_output_limit,
            path=self.agents_file or None,
            token_lifetime=self.agent_token_lifetime,
            max_agents_per_user=self.max_agents_per_user,
            control_max_minutes=self.agent_control_max_minutes,
            max_calls_in_flight=self.max_agent_calls_in_flight,
            max_terminals_per_agent=self.max_terminals_per_agent,
            event_logger=getattr(self.serverapp, "event_logger", None),
            log=self.log,
        )
        self._prepare_handover()

    # -- hand-over (see handover.py) ----------------------------------------------------------

    def _server(self) -> ServerApp:
        assert self.serverapp is not None
        return self.serverapp

    def _handover_path(self) -> str:
        serverapp = self._server()
        return self.handover_socket or default_socket_path(
            serverapp.runtime_dir, serverapp.port, serverapp.sock
        )

    def _prepare_handover(self) -> None:
        """Take the running server's sessions (``take_over``), then listen for a successor."""
        successor = Successor.connect(self._handover_path()) if self.take_over else None
        if self.take_over and successor is None:
            self.log.info(
                "jupyter_tool_terminal: no running server to take over from at %s; starting "
                "as usual",
                self._handover_path(),
            )
        inheritance = None if successor is None else self._inherit(successor)
        self._server().io_loop.add_callback(self._start_handover, successor, inheritance)

    def _inherit(self, successor: Successor) -> Inheritance:
        """Receive the running server's sessions (suspended there from now on); exit if they
        cannot be served here (the running server then goes on)."""
        assert self.tool_runtime is not None
        assert self.session_manager is not None
        try:
            inheritance = successor.receive()
        except (OSError, ValueError, KeyError, HandoverError) as error:
            self.log.critical("jupyter_tool_terminal: cannot take over: %s", error)
            sys.exit(FAILED)
        reason = inheritance.refusal(self.tool_runtime, self.session_manager.tool_types)
        if reason is not None:
            successor.refuse(reason)
            self.log.critical(
                "jupyter_tool_terminal: not taking over (the running server goes on): %s", reason
            )
            sys.exit(FAILED)
        self.tool_runtime.take_over(inheritance.message["server"])
        # This server serves on the predecessor's listening sockets once it let go of them,
        # never on a port of its own (the configured one is the predecessor's).
        if inheritance.listening:
            serve_only_on_inherited(self._server(), inheritance.listening)
        return inheritance

    async def _start_handover(
        self, successor: Successor | None, inheritance: Inheritance | None
    ) -> None:
        manager, runtime = self.session_manager, self.tool_runtime
        assert manager is not None
        assert runtime is not None
        serverapp = self._server()
        if successor is not None and inheritance is not None:
            try:
                await adopt(inheritance, manager, runtime, self.log)
                await successor.finish()
            except Exception:
                self.log.critical(
                    "jupyter_tool_terminal: the take-over failed; the running server goes on",
                    exc_info=True,
                )
                # At once and without clean-up: what this server holds is the predecessor's.
                os._exit(FAILED)
            serverapp.http_server.add_sockets(inheritance.listening)
            self.log.info(
                "jupyter_tool_terminal: took over %d tool terminal(s)", len(manager.sessions)
            )
        predecessor = Predecessor(
            self._handover_path(),
            manager=manager,
            runtime=runtime,
            http_server=lambda: getattr(serverapp, "http_server", None),
            on_handed_over=serverapp.stop,
            log=self.log,
        )
        try:
            predecessor.start()
        except OSError as error:
            self.log.warning(
                "jupyter_tool_terminal: no successor can take over from this server (%s): %s",
                predecessor.path,
                error,
            )
        else:
            self.predecessor = predecessor

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
        return bool(self.session_manager and self.session_manager.sessions)

    async def stop_extension(self) -> None:
        """Kill every session's processes before the server exits."""
        if self.predecessor is not None:
            self.predecessor.close()
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
