"""A scripted ACP agent and the Jupyter AI persona that runs it (tests only)."""
