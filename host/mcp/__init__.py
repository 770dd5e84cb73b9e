"""``mobagent mcp``: the fleet as a Model Context Protocol server (a client of the bus).

``config`` holds the ``[mcp]`` section, ``link`` the one bus connection and what it has
seen (phones, recent events, the instructions this server sent), ``server`` the MCP tools
and resources on the official SDK, ``cli`` the command (stdio, or streamable HTTP).
"""
