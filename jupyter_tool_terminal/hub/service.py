"""``jupyter-tool-terminal-service``: tool terminals as a JupyterHub-managed service.

A jupyter server holding only this extension (and JupyterHub's authentication) runs beside the
Hub, alone with access to the container engine; users' own servers (and their kernels) have
none. Users reach it at ``/services/<name>/``, authenticated by the Hub: OAuth for browsers,
tokens for API clients, the scope ``access:services!service=<name>`` to get in at all. Instances
are owned by the Hub user name. The server is kernel-less for real: :class:`ServiceAuthorizer`
refuses every resource but this extension's, so nobody can start a kernel, open a general
terminal, read a file or change config on the machine that holds the engine.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import typing as t

from jupyterhub.singleuser.extension import JupyterHubAuthorizer, JupyterHubSingleUser

from ..base import AUTH_RESOURCE

#: What a Hub-managed service is started with (JupyterHub sets them; the server needs them all
#: to authenticate users through the Hub).
HUB_SERVICE_ENVIRONMENT = (
    "JUPYTERHUB_SERVICE_NAME",
    "JUPYTERHUB_API_TOKEN",
    "JUPYTERHUB_API_URL",
    "JUPYTERHUB_SERVICE_PREFIX",
    "JUPYTERHUB_SERVICE_URL",
    "JUPYTERHUB_CLIENT_ID",
    "JUPYTERHUB_OAUTH_CALLBACK_URL",
)

#: The server extensions the service loads: JupyterHub's authentication and this one.
SERVICE_EXTENSIONS = frozenset({"jupyterhub", "jupyter_tool_terminal"})

#: The only jupyter_server resources a service user may act on.
ALLOWED_RESOURCES = frozenset({AUTH_RESOURCE})


class ServiceAuthorizer(JupyterHubAuthorizer):  # type: ignore[misc]
    """Allows this extension's resource to Hub users with access to the service, nothing else.

    Kernels, sessions, general terminals, contents, files, nbconvert, kernelspecs, config,
    events, the server's status and shutdown: all 403 before anything starts.
    """

    def is_authorized(self, handler: t.Any, user: t.Any, action: str, resource: str) -> bool:
        """Whether ``user`` may do ``action`` on ``resource`` (only this extension's)."""
        if resource not in ALLOWED_RESOURCES:
            self.log.info(
                "Tool terminal service: refused %s %s to %s", action, resource, user.username
            )
            return False
        return bool(super().is_authorized(handler, user, action, resource))


class _ServiceLauncher(JupyterHubSingleUser):  # type: ignore[misc]
    """Starts a server with JupyterHub's authentication and this extension, nothing else.

    Only the class methods that build the server are used; the extensions loaded are
    JupyterHub's own single-user extension and :class:`~.app.ToolTerminalApp`.
    """

    load_other_extensions = False
    serverapp_config: t.ClassVar[dict[str, t.Any]] = {
        "jpserver_extensions": dict.fromkeys(SERVICE_EXTENSIONS, True)
    }

    @classmethod
    def get_extension_package(cls) -> str:
        """The package whose extension this launcher starts: JupyterHub's single-user one."""
        return "jupyterhub"


def external_service_environment(
    *, name: str, url: str, api_url: str, api_token: str, base_url: str = "/"
) -> dict[str, str]:
    """The environment of the service run as an *external* Hub service.

    A Hub sets these for the services it manages; a service under its own process manager
    (the systemd unit in docs/source/howto/jupyterhub-service.md) gets them from its unit
    instead, with the ``api_token`` of its entry in ``c.JupyterHub.services``. The service
    then survives the Hub's restarts, and its terminals with it.

    Args:
        name: the service's name in ``c.JupyterHub.services``.
        url: where the service listens (its entry's ``url``), e.g. ``http://127.0.0.1:10101``.
        api_url: the Hub's API as the service reaches it, e.g. ``http://127.0.0.1:8081/hub/api``.
        api_token: the entry's ``api_token``.
        base_url: the Hub's base URL (``c.JupyterHub.base_url``).
    """
    prefix = f"{base_url.rstrip('/')}/services/{name}/"
    return {
        "JUPYTERHUB_SERVICE_NAME": name,
        "JUPYTERHUB_API_TOKEN": api_token,
        "JUPYTERHUB_API_URL": api_url,
        "JUPYTERHUB_BASE_URL": base_url,
        "JUPYTERHUB_SERVICE_PREFIX": prefix,
        "JUPYTERHUB_SERVICE_URL": url,
        "JUPYTERHUB_CLIENT_ID": f"service-{name}",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": f"{prefix}oauth_callback",
        "JUPYTERHUB_OAUTH_ACCESS_SCOPES": json.dumps([f"access:services!service={name}"]),
    }


def missing_environment(environ: t.Mapping[str, str]) -> list[str]:
    """The Hub service variables that ``environ`` lacks."""
    return [name for name in HUB_SERVICE_ENVIRONMENT if not environ.get(name)]


def same_site_cookie_options(options: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The login cookie's options, with ``SameSite=Lax`` unless the operator chose a policy.

    The service's login cookie opens shells: a request another site makes the browser send
    (a link, a form post) must not carry it. Lax still sends it on the Hub's own redirects and
    on the same-origin requests and WebSockets of the user's JupyterLab.
    """
    if any(key.lower() == "samesite" for key in options):
        return dict(options)
    return {**options, "samesite": "Lax"}


#: The service's own option: take over the terminals of the service running on its port
#: (an upgrade or a configuration change that ends none; see the ``handover`` package).
TAKE_OVER_OPTION = "--take-over"


def server_arguments(argv: list[str]) -> list[str]:
    """The server's command line: the operator's arguments, then what the service enforces.

    Command-line arguments override config files, so the enforced ones come last.
    ``--take-over`` stands for ``--ToolTerminalApp.take_over=True``.
    """
    return [
        *(
            "--ToolTerminalApp.take_over=True" if argument == TAKE_OVER_OPTION else argument
            for argument in argv
        ),
        f"--ServerApp.authorizer_class={ServiceAuthorizer.__module__}.ServiceAuthorizer",
        "--ServerApp.default_url=/tool-terminal/",
        "--ServerApp.terminals_enabled=False",
        "--ToolTerminalApp.service_url=",
        f"--ServerApp.root_dir={tempfile.mkdtemp(prefix='jupyter-tool-terminal-service-')}",
    ]


def main(argv: list[str] | None = None) -> None:
    """Run the service; exits non-zero outside a Hub, never serving unauthenticated."""
    missing = missing_environment(os.environ)
    if missing:
        sys.stderr.write(
            "jupyter-tool-terminal-service must be started by JupyterHub as a managed service "
            "(an entry of c.JupyterHub.services with a 'url' and this 'command'); the Hub's "
            f"service environment is missing: {', '.join(missing)}. Not starting.\n"
        )
        sys.exit(2)
    arguments = server_arguments(sys.argv[1:] if argv is None else argv)
    serverapp = _ServiceLauncher.initialize_server(argv=arguments)
    hub_auth = getattr(serverapp.identity_provider, "hub_auth", None)
    if hub_auth is not None:
        hub_auth.cookie_options = same_site_cookie_options(hub_auth.cookie_options)
    # Fail closed if anything (a config file, an extension) changed what the service enforces.
    loaded = set(serverapp.extension_manager.extension_apps)
    if not isinstance(serverapp.authorizer, ServiceAuthorizer) or loaded != SERVICE_EXTENSIONS:
        serverapp.log.critical(
            "jupyter-tool-terminal-service: refusing to serve with authorizer %s and extensions %s",
            type(serverapp.authorizer).__name__,
            sorted(loaded),
        )
        sys.exit(3)
    serverapp.start()


if __name__ == "__main__":
    main()
