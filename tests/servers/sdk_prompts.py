"""An MCP server with prompts and completion, written with the official Python SDK (`mcp` on PyPI).

Run as `python3 sdk_prompts.py` (stdio). `trip` (`city` required, `days` optional) answers a user text, an
assistant message and an embedded text resource; `greeting` (no arguments) is one text. A completion handler
suggests `trip`'s `city` from a fixed list, the days chosen as context ignored. The tool `add_prompt` adds a
prompt named as asked and says the list changed (over `subscriptions/listen` on 2026-07-28, as a session
notification before).
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Prompt, UserMessage
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


@server.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Add a prompt called NAME and say the list of prompts changed."""

    def added() -> str:
        return f"The prompt {name}, added at run time."

    server.add_prompt(Prompt.from_function(added, name=name, description="Added at run time."))
    await ctx.notify_prompts_changed()  # the 2026-07-28 listen streams
    try:
        await ctx.session.send_prompt_list_changed()  # the handshake wire's session
    except Exception:
        pass  # no session of that kind on 2026-07-28
    return f"added {name}"


if __name__ == "__main__":
    server.run("stdio")
