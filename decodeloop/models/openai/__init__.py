"""OpenAI-compatible engines (`openai:URL`): engine.py, the Engine protocol over a server's streamed
completions; wire.py, its HTTP and event stream, which knows no tokens."""

from decodeloop.errors import RemoteError
from decodeloop.models.openai.engine import OpenAIEngine, load_openai
from decodeloop.models.openai.wire import Endpoint

__all__ = ["Endpoint", "OpenAIEngine", "RemoteError", "load_openai"]
