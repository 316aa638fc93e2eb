"""The mcpServers config file, the --mcp-url/--mcp-header/--mcp-config options, and tool namespacing."""

from __future__ import annotations

import json
import sys

import pytest
from test_cli import ANSWER, run

from decodeloop.errors import ConfigError
from decodeloop.tools.config import ServerSpec, load_config, parse_config, parse_header, url_spec
from decodeloop.tools.router import namespaced


def test_claude_desktop_cursor_and_vs_code_forms(tmp_path):
    specs = parse_config(
        {
            "mcpServers": {
                "weather": {"command": "python3", "args": ["-m", "decodeloop.servers.weather"], "env": {"A": "1"}},
                "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
                "old": {"type": "sse", "url": "http://localhost:3001/sse"},
                "off": {"command": "nothing", "disabled": True},
            }
        },
        "mcp.json",
    )
    assert specs == [
        ServerSpec("weather", ["python3", "-m", "decodeloop.servers.weather"], {"A": "1"}, None, transport="stdio"),
        ServerSpec("remote", url="https://example.com/mcp", headers={"Authorization": "Bearer x"}),
        ServerSpec("old", url="http://localhost:3001/sse", transport="sse"),
    ]
    vs_code = parse_config(
        {
            "servers": {
                "s": {"type": "http", "url": "http://h/mcp"},
                "t": {"type": "stdio", "command": "srv", "cwd": "sub"},
            },
            "inputs": [],
        },
        "settings.json",
        base=str(tmp_path),
    )
    assert [(s.transport, s.cwd) for s in vs_code] == [("http", None), ("stdio", str(tmp_path / "sub"))]


@pytest.mark.parametrize(
    "data, message",
    [
        ({"mcpServers": {"w": {"comand": "x"}}}, 'mcp.json: server "w": unknown key(s) comand'),
        ({"mcpServers": {"w": {"args": ["x"]}}}, 'mcp.json: server "w": needs exactly one of "command"'),
        ({"mcpServers": {"w": {"command": "x", "url": "http://h"}}}, 'server "w": needs exactly one of'),
        ({"mcpServers": {"w": {"url": "ftp://h/mcp"}}}, 'server "w": bad MCP server URL'),
        (
            {"mcpServers": {"w": {"url": "http://h", "type": "websocket"}}},
            'server "w": "type" must be stdio, http or sse',
        ),
        ({"mcpServers": {"w": {"command": "x", "args": "-m y"}}}, 'server "w": "args" must be a list of strings'),
        ({"mcpServers": {"w": {"command": "x", "env": {"A": 1}}}}, 'server "w": "env" must be an object of strings'),
        ({"mcpServers": {"w": {"url": "http://h", "headers": {"Bad Name": "v"}}}}, "bad header"),
        ({"mcpServers": {"w": {"url": "http://h", "env": {}}}}, '"env" is for stdio servers'),
        ({"mcpServers": {}, "servers": {}}, 'exactly one of "mcpServers" or "servers"'),
        ({"mcpServer": {}}, 'exactly one of "mcpServers" or "servers"'),
        ([], "expected a JSON object"),
        ({"mcpServers": {"w": {"command": "x", "roots": "/tmp"}}}, 'server "w": "roots" must be a list of paths'),
        ({"mcpServers": {"w": {"url": "http://h", "roots": [""]}}}, 'server "w": "roots" must be a list of paths'),
        ({"mcpServers": {"w": {"command": "x", "roots": ["/no/such/dir"]}}}, "server \"w\": root '/no/such/dir'"),
    ],
)
def test_config_mistakes_name_the_file_and_the_server(data, message):
    with pytest.raises(ConfigError) as excinfo:
        parse_config(data, "mcp.json")
    assert message in str(excinfo.value) and str(excinfo.value).startswith("mcp.json")


def test_bad_json_and_duplicate_servers_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {"w": {"command": "x"},}}')
    with pytest.raises(ConfigError, match=f"{bad}: not valid JSON"):
        load_config(str(bad))
    twice = tmp_path / "twice.json"
    twice.write_text('{"mcpServers": {"w": {"command": "x"}, "w": {"command": "y"}}}')
    with pytest.raises(ConfigError, match="key 'w' appears twice"):
        load_config(str(twice))
    with pytest.raises(ConfigError, match="cannot read MCP config"):
        load_config(str(tmp_path / "missing.json"))


def test_a_file_that_is_not_utf8_is_named_with_its_first_bad_byte(tmp_path, monkeypatch):
    from decodeloop.errors import Misconfigured
    from decodeloop.tools import config

    data = {"mcpServers": {"météo": {"command": "x"}}}
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="latin-1")
    with pytest.raises(Misconfigured) as excinfo:
        load_config(str(path))
    assert (
        str(excinfo.value) == f"{path}: not UTF-8: byte 0xe9 at offset 18 (expected UTF-8 JSON: save the file as UTF-8)"
    )
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-16")
    with pytest.raises(Misconfigured, match="byte 0xff at offset 0; it starts with a UTF-16 byte-order mark"):
        load_config(str(path))
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8-sig")  # a byte-order mark: read past
    assert [spec.name for spec in load_config(str(path))] == ["météo"]
    monkeypatch.setattr(config, "MAX_CONFIG_BYTES", 2**20)
    path.write_bytes(b" " * (2**20 + 1))  # /dev/zero, or a log named by mistake, is not read to its end
    with pytest.raises(Misconfigured, match="larger than 1 MB; not an MCP config"):
        load_config(str(path))


def test_urls_and_headers():
    assert url_spec("sse+https://h.example/sse") == ServerSpec(
        "h.example", url="https://h.example/sse", transport="sse"
    )
    assert url_spec("http://127.0.0.1:3001/mcp").transport == "auto"
    assert parse_header("Authorization:  Bearer a:b ") == ("Authorization", "Bearer a:b")
    for bad in ("no colon", ": empty", "Bad Name: x"):
        with pytest.raises(ConfigError):
            parse_header(bad)


def test_namespaced_names_keep_to_the_tool_name_rules():
    assert namespaced("my server!", "search") == "my_server___search"
    long = namespaced("s" * 200, "t" * 100)
    assert len(long) == 128 and long.endswith("__" + "t" * 100)


def test_cli_runs_servers_from_a_config_file(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {"mcpServers": {"weather": {"command": sys.executable, "args": ["-m", "decodeloop.servers.weather"]}}}
        )
    )
    p = run(
        "-m", "decodeloop", "run", "-q", "--mcp-config", str(config), "What's the weather in Polson, MT?", no_site=False
    )
    assert (p.returncode, p.stdout.strip()) == (0, ANSWER), p.stderr


def test_cli_config_errors_are_clear(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"weather": {"cmd": "python3"}}}))
    p = run("-m", "decodeloop", "run", "--mcp-config", str(config), "hi", no_site=False)
    assert p.returncode == 78 and "Traceback" not in p.stderr  # a configuration error (docs/cli.md)
    assert f'cannot start: {config}: server "weather": unknown key(s) cmd' in p.stderr
    p = run("-m", "decodeloop", "run", "--mcp-header", "X: y", "hi", no_site=False)
    assert p.returncode == 2 and "--mcp-header applies to --mcp-url servers" in p.stderr


def test_cli_connects_to_a_url_server_with_headers(http_server):
    server = http_server()
    p = run(
        "-m",
        "decodeloop",
        "run",
        "--json",
        "--max-tokens",
        "3",
        "--mcp-url",
        server.url + "/mcp",
        "--mcp-header",
        "Authorization: Bearer t0ken",
        "hi",
        no_site=False,
    )
    assert p.returncode == 0, p.stderr
    [ready] = [json.loads(line) for line in p.stdout.splitlines() if '"event": "server"' in line]
    assert ready["server"] == "127.0.0.1" and ready["server_name"] == "http-faulty" and "echo" in ready["tools"]
    posts = [r for r in server.seen() if r["method"] == "POST"]
    assert posts and all(r["headers"].get("Authorization") == "Bearer t0ken" for r in posts)
    p = run("-m", "decodeloop", "run", "--mcp-url", "http://127.0.0.1:9/mcp", "hi", no_site=False)
    assert p.returncode == 1 and "cannot start: 127.0.0.1: cannot connect" in p.stderr and "Traceback" not in p.stderr


def test_a_servers_own_roots_are_absolute_relative_to_the_file_and_must_exist(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "own": {"command": "srv", "roots": ["data", str(tmp_path / "notes.txt")]},
                    "none": {"url": "http://h/mcp", "roots": []},
                    "global": {"command": "srv"},
                }
            }
        )
    )
    own, none, global_ = load_config(str(config))
    assert own.roots == (str(tmp_path / "data"), str(tmp_path / "notes.txt"))
    assert none.roots == () and global_.roots is None
    config.write_text(json.dumps({"mcpServers": {"own": {"command": "srv", "roots": ["data", "missing"]}}}))
    with pytest.raises(ConfigError) as excinfo:
        load_config(str(config))
    assert str(excinfo.value) == (
        f"{config}: server \"own\": root 'missing': no such file or directory ({tmp_path / 'missing'})"
    )
