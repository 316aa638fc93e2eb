"""An MCP server with prompts and completion, written with the official Python SDK (`mcp` on PyPI).

Run as `python3 sdk_prompts.py` (stdio). `trip` (`city` required, `days` optional) answers a user text, an
assistant message and an embedded text resource; `greeting` (no arguments) is one text. A completion handler
suggests `trip`'s `city` from a fixed list, the days chosen as context ignored.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.types import Completion, PromptReference

server = MCPServer("sdk-prompts")
CITIES = ["Boise", "Bozeman", "Burlington", "Polson"]


@server.prompt(description="Plan a trip to a city.")
def trip(city: str, days: str = "3") -> list:
    return [
        UserMessage(f"Plan {days} days in {city}."),
        AssistantMessage("Which season?"),
        UserMessage(
            {
                "type": "resource",
                "resource": {
                    "uri": f"trips://{city}",
                    "mimeType": "text/plain",
                    "text": f"Notes on {city}: bring boots.",
                },
            }
        ),
    ]


@server.prompt(description="Say hello.")
def greeting() -> str:
    return "Hello from the SDK."


@server.completion()
async def complete(ref, argument, context):
    if isinstance(ref, PromptReference) and ref.name == "trip" and argument.name == "city":
        return Completion(values=[c for c in CITIES if c.lower().startswith(argument.value.lower())])
    return None


if __name__ == "__main__":
    server.run("stdio")
