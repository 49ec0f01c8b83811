"""AI agents in tool terminals: credentials, control, the MCP endpoint and run_command."""
