"""What agents read.

``exports`` is the quoting rule and the Markdown both the MCP server and the
site's agent exports are made of; ``mcp_server`` the MCP server over stdio
(``mcp_sdk`` its tools for the optional SDK); ``memos`` the MemOS diary import.
"""
