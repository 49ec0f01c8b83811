"""Agents (``agents/``, ``acp/``): the MCP endpoint, the agent shell, their REST routes and Jupyter
AI's ACP agents.
"""
