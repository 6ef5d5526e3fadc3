"""Anchor for the memory benchmark: an idle MCP server built with the official Python SDK,
serving one tool on stdio. Its resident memory is what a typical MCP server costs at rest."""

try:
    from mcp.server.mcpserver import MCPServer as Server  # SDK 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as Server  # SDK 1.x

server = Server("anchor")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run()
