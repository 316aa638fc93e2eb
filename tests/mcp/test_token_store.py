"""The token store (decodeloop/mcp/auth/store.py) on a real file system: modes, names, URLs, refusals."""

from __future__ import annotations

import json
import os
import stat

import pytest

from decodeloop.mcp.auth.store import TOKEN_DIR_ENV, StoredToken, TokenStore, TokenStoreError, default_directory

URL_A, URL_B = "http://127.0.0.1:1/mcp", "http://127.0.0.1:2/mcp"


def token(server: str = "svc", url: str = URL_A, **kw) -> StoredToken:
    return StoredToken(server=server, url=url, access_token="at-secret", refresh_token="rt-secret", **kw)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_saved_file_is_0600_in_a_0700_directory_and_reads_back(tmp_path):
    store = TokenStore(str(tmp_path / "tokens"))
    path = store.save(token(expires_at=4_102_444_800, client_id="cid", issuer="http://as"))
    assert os.path.dirname(path) == str(tmp_path / "tokens")
    assert mode(tmp_path / "tokens") == 0o700 and mode(path) == 0o600
    assert os.listdir(tmp_path / "tokens") == ["svc.json"]  # no temporary file left behind
    back = store.load("svc", URL_A)
    assert back == token(expires_at=4_102_444_800, client_id="cid", issuer="http://as")


def test_a_token_for_one_url_is_not_given_for_another(tmp_path):
    warnings: list[str] = []
    store = TokenStore(str(tmp_path), warn=warnings.append)
    store.save(token(url=URL_A))
    assert store.load("svc", URL_B) is None
    assert len(warnings) == 1 and URL_A in warnings[0] and URL_B in warnings[0] and "not sent" in warnings[0]
    assert "secret" not in warnings[0]
    assert store.get("svc") is not None  # logout and status still find it


def test_group_or_other_permission_bits_refuse_the_file(tmp_path):
    warnings: list[str] = []
    store = TokenStore(str(tmp_path), warn=warnings.append)
    path = store.save(token())
    os.chmod(path, 0o644)
    assert store.load("svc", URL_A) is None
    assert "readable or writable by others (mode 644)" in warnings[0] and "chmod 600" in warnings[0]
    assert mode(path) == 0o644  # refused, not repaired
    os.chmod(path, 0o600)
    assert store.load("svc", URL_A) is not None


def test_a_symbolic_link_is_refused(tmp_path):
    warnings: list[str] = []
    store = TokenStore(str(tmp_path / "store"), warn=warnings.append)
    real = TokenStore(str(tmp_path / "elsewhere")).save(token())
    os.makedirs(store.directory)
    os.symlink(real, store.path("svc"))
    assert store.load("svc", URL_A) is None and "not used" in warnings[0]


@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", "..", ".hidden", "a/b", "a\\b", "\x1b[2J", "é"])
def test_server_names_stay_inside_the_directory(tmp_path, name):
    store = TokenStore(str(tmp_path / "tokens"))
    path = store.save(token(server=name))
    assert os.path.dirname(path) == store.directory
    assert not os.path.basename(path).startswith(".")
    assert store.load(name, URL_A) is not None
    assert sorted(os.listdir(tmp_path)) == ["tokens"]


def test_names_that_sanitize_alike_get_different_files(tmp_path):
    store = TokenStore(str(tmp_path))
    store.save(token(server="a/b"))
    store.save(StoredToken(server="a_b", url=URL_B, access_token="other"))
    assert store.path("a/b") != store.path("a_b")
    assert store.load("a/b", URL_A).access_token == "at-secret"
    assert store.load("a_b", URL_B).access_token == "other"
    assert [t.server for t in store.entries()] == ["a/b", "a_b"]


def test_a_file_naming_another_server_is_not_used(tmp_path):
    warnings: list[str] = []
    store = TokenStore(str(tmp_path), warn=warnings.append)
    path = store.save(token(server="svc"))
    os.replace(path, store.path("other"))
    assert store.load("other", URL_A) is None and "not 'other'" in warnings[0]


def test_dpop_tokens_are_refused(tmp_path):
    with pytest.raises(TokenStoreError, match="DPoP-bound token needs its private key"):
        TokenStore(str(tmp_path)).save(token(token_type="DPoP"))
    assert os.listdir(tmp_path) == []


def test_a_damaged_file_is_skipped_with_a_warning(tmp_path):
    warnings: list[str] = []
    store = TokenStore(str(tmp_path), warn=warnings.append)
    fd = os.open(store.path("svc"), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps({"server": "svc", "url": URL_A, "access_token": 5}).encode())
    os.close(fd)
    assert store.load("svc", URL_A) is None and "not a stored token" in warnings[0]


def test_delete_and_repr(tmp_path):
    store = TokenStore(str(tmp_path))
    store.save(token(client_secret="cs-secret"))
    assert "secret" not in repr(store.load("svc", URL_A))
    assert store.delete("svc") and not store.delete("svc")
    assert store.entries() == []


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_DIR_ENV, str(tmp_path / "t"))
    assert default_directory() == str(tmp_path / "t")
    monkeypatch.delenv(TOKEN_DIR_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert default_directory() == str(tmp_path / "cfg" / "decodeloop" / "tokens")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == str(tmp_path / "home" / ".config" / "decodeloop" / "tokens")


def test_restore_takes_bearer_tokens_only():
    from decodeloop.mcp.auth.oauth import OAuth

    oauth = OAuth(login_message="log in first")
    with pytest.raises(ValueError, match="only a bearer token"):
        oauth.restore(access_token="x", token_type="DPoP")
    oauth.restore(access_token="x", expires_at=946_684_800, refresh_token=None)
    assert oauth.expired() and oauth.header() == "Bearer x"  # no refresh token: sent as it is, the server decides
    oauth.restore(access_token="y", expires_at=4_102_444_800)
    assert not oauth.expired()


def test_a_server_wanting_a_login_raises_login_required_and_registers_nothing(tmp_path):
    from test_auth import AuthServer

    from decodeloop.mcp import McpClient
    from decodeloop.mcp.auth.oauth import LoginRequired
    from decodeloop.mcp.auth.store import stored_oauth

    srv = AuthServer()
    try:
        logs: list[str] = []
        auth = stored_oauth(TokenStore(str(tmp_path)), "svc", srv.mcp, "log in first", logs.append)
        with pytest.raises(LoginRequired, match="the server wants authorization; log in first"):
            McpClient.connect_url(srv.mcp, auth=auth, timeout=30, name="svc")
        assert not srv.seen("/register") and not srv.seen("/authorize") and not srv.seen("/token")
    finally:
        srv.stop()


def test_the_loopback_listener_takes_the_first_redirect_only():
    import urllib.error

    from test_auth import NO_PROXY

    from decodeloop.mcp.auth.loopback import LoopbackRedirect

    with LoopbackRedirect() as redirect:
        assert redirect.redirect_uri.startswith("http://127.0.0.1:") and redirect.redirect_uri.endswith("/callback")
        base = redirect.redirect_uri.rsplit("/", 1)[0]
        with pytest.raises(urllib.error.HTTPError):  # another path, or no code: not the redirect
            NO_PROXY.open(base + "/other?code=1", timeout=10)
        with pytest.raises(urllib.error.HTTPError):
            NO_PROXY.open(redirect.redirect_uri + "?state=1", timeout=10)
        assert not redirect.offer_line("code=1&state=2")  # not a URL
        assert redirect.wait(0) is None
        NO_PROXY.open(redirect.redirect_uri + "?code=abc&state=s1", timeout=10).close()
        with NO_PROXY.open(redirect.redirect_uri + "?code=def&state=s2", timeout=10) as page:
            assert b"already arrived" in page.read()
        assert not redirect.offer_line(redirect.redirect_uri + "?code=ghi&state=s3")
        assert redirect.wait(10) == redirect.redirect_uri + "?code=abc&state=s1"
