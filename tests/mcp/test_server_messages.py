"""Messages a real server process starts on its own: pings to the client, notifications."""

from conftest import FAULTY

from decodeloop.mcp.client import McpClient


def test_client_answers_a_server_ping_mid_call():
    with McpClient.start_stdio(FAULTY, name="faulty", timeout=5) as client:
        result = client.call_tool("ping_client", {})
    assert result.text() == 'client answered: {"id": "server-ping-1", "jsonrpc": "2.0", "result": {}}'


def test_notifications_are_delivered_and_never_fatal():
    seen = []
    with McpClient.start_stdio(
        FAULTY, name="faulty", timeout=5, on_notification=lambda method, params: seen.append((method, params))
    ) as client:
        assert client.call_tool("chatty", {}).text() == "finished"
        assert client.call_tool("echo", {"text": "still here"}).text() == "still here"
    assert ("notifications/message", {"level": "info", "data": "working"}) in seen
    assert ("notifications/unknown_kind", {"x": 1}) in seen
