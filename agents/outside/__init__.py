"""Outside agents: agents openbell does not write, trading over MCP through the same toolbox, rules
and budgets as the built-in agent (the open-cycle hub, the MCP server, the `mcp` agent kind)."""
