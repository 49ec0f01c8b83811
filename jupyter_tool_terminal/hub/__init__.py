"""The JupyterHub side of the extension, together as jupyter-server-proxy keeps its
``standalone/``: the service (``jupyter-tool-terminal-service``), what it asks of the Hub's
REST API (activity, user names), its landing and login pages, and the hub-login route."""
