"""`decodeloop studio` as a user runs it: the URL it prints, --open handing that URL to the browser while the
page is served, and Ctrl-C stopping it and its MCP servers with exit status 0. A real process."""

from __future__ import annotations

import http.cookiejar
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUARD = 60  # seconds any one wait may take before the process is declared stuck (not a measurement)

# what $BROWSER runs with the URL: it opens the page as a browser would (the token's redirect, the cookie),
# asks the session for its state, and writes both down
BROWSER = """
import http.cookiejar, json, os, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
page = opener.open(sys.argv[1], timeout=30).read().decode()
state = json.loads(opener.open(sys.argv[1].split("?")[0] + "api/state", timeout=30).read())
with open(sys.argv[2] + ".part", "w") as f:
    json.dump({"page": "<title>decodeloop studio</title>" in page, "state": state}, f)
os.replace(sys.argv[2] + ".part", sys.argv[2])  # whole or not there: the test reads it as soon as it is
"""


def test_open_hands_the_url_to_the_browser_and_ctrl_c_stops_the_studio_and_its_servers(tmp_path):
    browser, seen = tmp_path / "browser.py", tmp_path / "seen.json"
    browser.write_text(BROWSER)
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s {seen}", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "decodeloop", "studio", "--open"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # Ctrl-C as a terminal delivers it, whatever this process inherited (a shell's background job starts with
        # SIGINT ignored, and so would the studio)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("decodeloop studio: http://127.0.0.1:") and "/?token=" in first
        url = first.split(": ", 1)[1].strip()
        servers = subprocess.run(
            ["pgrep", "-f", "-s", str(proc.pid), "decodeloop.servers"], capture_output=True, text=True
        )
        assert len(servers.stdout.split()) == 1  # the table model's one server: the bundled weather server
        for _ in range(GUARD * 10):  # the browser's visit
            if seen.exists():
                break
            time.sleep(0.1)
        visit = json.loads(seen.read_text())
        assert visit == {"page": True, "state": visit["state"]} and visit["state"]["phase"] == "idle"
        # the token is the key: without it, the same server refuses
        jar = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        try:
            jar.open(url.split("?")[0] + "api/state", timeout=30)
            raise AssertionError("served without the token")
        except urllib.error.HTTPError as e:
            assert e.code == 403
        os.kill(proc.pid, signal.SIGINT)  # to the studio alone: closing its servers is its own work
        _, err = proc.communicate(timeout=GUARD)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0 and "stopped." in err and "Traceback" not in err
    for _ in range(GUARD * 10):  # a server it stopped may take a moment to be gone from /proc
        if not in_session(proc.pid):
            break
        time.sleep(0.1)
    assert in_session(proc.pid) == []  # nothing of it is left running: its MCP servers went with it


def in_session(session: int) -> list[str]:
    """The command lines of the processes in a session (from /proc: no tool needed)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the name: state, ppid, pgrp, session
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(command)
    return found
