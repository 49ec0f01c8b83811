"""JupyterHub (``hub/``): service mode and per-user servers behind a real Hub."""
