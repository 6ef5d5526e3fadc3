"""Drives `computer mcp` with the official MCP Python SDK: a client nobody here wrote.

Usage: python_mcp_client.py COMPUTER_BIN
Prints one JSON object: the negotiated protocol version, the listed tools and the tool's output
schema, a shell call's structured result, a failed call's and a `help` call's. The environment (COMPUTER_SOCKET, ...) is passed through to the bridge.
"""

import asyncio
import json
import os
import sys

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def field(obj, snake: str, camel: str):
    """The SDK renamed its model fields to snake_case in 2.x; accept either spelling."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main(binary: str) -> None:
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            result = await session.call_tool(
                "COMPUTER",
                {"surface": "shell", "command": "run", "args": {"argv": ["echo", "from python"]}},
            )
            # A failed call and `help`: the SDK checks each structuredContent against the tool's
            # outputSchema (a mismatch raises).
            failed = await session.call_tool(
                "COMPUTER", {"surface": "shell", "command": "run", "args": {"argv": "true"}}
            )
            reference = await session.call_tool("COMPUTER", {"surface": "shell", "command": "help"})
            print(
                json.dumps(
                    {
                        "protocol_version": str(field(init, "protocol_version", "protocolVersion")),
                        "server": field(init, "server_info", "serverInfo").name,
                        "tools": [tool.name for tool in tools.tools],
                        "is_error": bool(field(result, "is_error", "isError")),
                        "structured": field(result, "structured_content", "structuredContent"),
                        "output_schema": field(tools.tools[0], "output_schema", "outputSchema"),
                        # Both schemas are valid JSON Schema 2020-12 (this raises otherwise).
                        "schemas_valid": all(
                            jsonschema.Draft202012Validator.check_schema(schema) is None
                            for schema in (
                                field(tools.tools[0], "input_schema", "inputSchema"),
                                field(tools.tools[0], "output_schema", "outputSchema"),
                            )
                        ),
                        "failed": field(failed, "structured_content", "structuredContent"),
                        "help": field(reference, "structured_content", "structuredContent"),
                    }
                )
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
