"""decodeloop's MCP client against the official Python SDK's client, on the same servers, in one run.

    pip install mcp        # the SDK, for its client (decodeloop's own client needs nothing)
    python3 bench/mcp_client.py [--calls 2000] [--megabytes 20] [--repeat 3] [--wire 2026-07-28 ...]

On each MCP wire (the stateless 2026-07-28 revision and the 2025-11-25
handshake; both clients are pinned to it), over stdio and over Streamable HTTP,
each client makes sequential tools/call
round trips to an `echo` tool and then fetches one large result (over HTTP,
once as a JSON answer and once as a single SSE event), then reads a resource
of as many megabytes as one base64 blob (`resources/read` of `blob://big`; over
HTTP as a JSON answer: the SDK refuses an SSE event over 1 MB). The servers are
standard-library scripts, each in its own process: over stdio
bench/prebuilt_server.py, whose large result and blob are encoded once at start-up so
that their time is the client's; over HTTP tests/servers/http_faulty.py --stateless
--blob-megabytes N, whose blob answer is too.
Both speak both wires. The CPU measured here
(time.process_time of this process over the call loop: every thread of the
client, none of the server's) is the client's alone. Figures are the best of
--repeat runs; calls/s and the wall times are wall-clock and include the
server's time, which for the large result is most of it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import provenance

from decodeloop.mcp import McpClient

STDIO_SERVER = [sys.executable, os.path.join(ROOT, "bench", "prebuilt_server.py")]
HTTP_SERVER = [sys.executable, os.path.join(ROOT, "tests", "servers", "http_faulty.py"), "--stateless"]
WARMUP = 100
BLOB = {"read": "blob://big"}  # a variant that reads the blob resource instead of calling `big`
WIRES = ("2026-07-28", "2025-11-25")
SDK_MODE = {"2026-07-28": "2026-07-28", "2025-11-25": "legacy"}  # the SDK client's name for each wire

try:
    from mcp import Client as SdkClient
    from mcp.client.stdio import StdioServerParameters
except ImportError:
    print("bench/mcp_client.py compares against the official MCP Python SDK: pip install mcp", file=sys.stderr)
    sys.exit(1)


class Figures:
    def __init__(self) -> None:
        self.calls_per_s = 0.0
        self.cpu_us = float("inf")
        self.big: dict[str, tuple[float, float] | str] = {}  # variant -> (best wall s, best client CPU s) or error

    def loop(self, wall: float, cpu: float, calls: int) -> None:
        self.calls_per_s = max(self.calls_per_s, calls / wall)
        self.cpu_us = min(self.cpu_us, cpu / calls * 1e6)

    def big_result(self, variant: str, wall: float, cpu: float) -> None:
        best = self.big.get(variant)
        if not isinstance(best, tuple):
            best = (float("inf"), float("inf"))
        self.big[variant] = (min(best[0], wall), min(best[1], cpu))


def blob_chars(megabytes: int) -> int:
    """The length of the blob's base64: that many megabytes of bytes, 4 characters for each 3."""
    return (megabytes * 1024 * 1024 + 2) // 3 * 4


def sdk_text(result) -> str:
    return "".join(getattr(item, "text", "") for item in result.content)


# -- decodeloop ----------------------------------------------------------------------------------


def run_decodeloop(connect, calls: int, megabytes: int, repeat: int, variants: dict[str, dict], wire: str) -> Figures:
    figures = Figures()
    with connect() as client:
        assert client.protocol_version == wire, client.protocol_version
        for _ in range(WARMUP):
            client.call_tool("echo", {"text": "warm up"})
        for _ in range(repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            for n in range(calls):
                client.call_tool("echo", {"text": f"call {n}"})
            figures.loop(time.perf_counter() - wall, time.process_time() - cpu, calls)
        for variant, extra in variants.items():
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                if "read" in extra:
                    size = len(client.read_resource(extra["read"]).contents[0]["blob"])
                else:
                    size = len(client.call_tool("big", {"megabytes": megabytes, **extra}).text())
                figures.big_result(variant, time.perf_counter() - wall, time.process_time() - cpu)
                assert size == (blob_chars(megabytes) if "read" in extra else megabytes * 1024 * 1024)
    return figures


# -- the SDK ---------------------------------------------------------------------------------------


def run_sdk(server, calls: int, megabytes: int, repeat: int, variants: dict[str, dict], wire: str) -> Figures:
    async def main() -> Figures:
        figures = Figures()
        async with SdkClient(server, read_timeout_seconds=120, mode=SDK_MODE[wire]) as client:
            for _ in range(WARMUP):
                await client.call_tool("echo", {"text": "warm up"})
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                for n in range(calls):
                    await client.call_tool("echo", {"text": f"call {n}"})
                figures.loop(time.perf_counter() - wall, time.process_time() - cpu, calls)
            for variant, extra in variants.items():
                for _ in range(repeat):
                    wall, cpu = time.perf_counter(), time.process_time()
                    try:
                        if "read" in extra:
                            read = await client.read_resource(extra["read"])
                        else:
                            result = await client.call_tool("big", {"megabytes": megabytes, **extra})
                    except Exception as exc:  # the SDK's own limits: recorded, not fatal
                        figures.big[variant] = f"failed: {' '.join(str(exc).split())[:80]}"
                        break
                    figures.big_result(variant, time.perf_counter() - wall, time.process_time() - cpu)
                    if "read" in extra:
                        assert len(read.contents[0].blob) == blob_chars(megabytes)
                    else:
                        assert len(sdk_text(result)) == megabytes * 1024 * 1024
        return figures

    return asyncio.run(main())


# -- the run ---------------------------------------------------------------------------------------


def start_http_server(megabytes: int) -> tuple[subprocess.Popen, str]:
    command = [*HTTP_SERVER, "--blob-megabytes", str(megabytes)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/mcp"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="round trips per timed loop (default: 2000)")
    parser.add_argument("--megabytes", type=int, default=20, help="size of the large result (default: 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the best counts")
    parser.add_argument("--wire", action="append", choices=WIRES, help="the MCP wire(s) to measure (default: both)")
    args = parser.parse_args()
    args.wire = args.wire or list(WIRES)
    print(provenance.header())

    rows = []
    print(
        f"{args.calls} sequential tools/call round trips, then a {args.megabytes} MB result, then a {args.megabytes} MB "
        f"blob read; best of {args.repeat}",
        file=sys.stderr,
    )
    stdio_variants = {"stdio": {}, "read blob, stdio": BLOB}
    http_variants = {"HTTP, JSON answer": {}, "HTTP, SSE answer": {"sse": True}, "read blob, HTTP": BLOB}
    stdio_server = STDIO_SERVER + [str(args.megabytes)]
    proc, url = start_http_server(args.megabytes)
    try:
        for wire in args.wire:
            ours = run_decodeloop(
                lambda: McpClient.start_stdio(stdio_server, name="stdio", timeout=120, protocol=wire),
                args.calls,
                args.megabytes,
                args.repeat,
                stdio_variants,
                wire,
            )
            sdk = run_sdk(
                StdioServerParameters(command=stdio_server[0], args=stdio_server[1:]),
                args.calls,
                args.megabytes,
                args.repeat,
                stdio_variants,
                wire,
            )
            rows.append((wire, "stdio", ours, sdk))
            ours = run_decodeloop(
                lambda: McpClient.connect_url(url, name="http", timeout=120, protocol=wire),
                args.calls,
                args.megabytes,
                args.repeat,
                http_variants,
                wire,
            )
            sdk = run_sdk(url, args.calls, args.megabytes, args.repeat, http_variants, wire)
            rows.append((wire, "Streamable HTTP", ours, sdk))
    finally:
        proc.terminate()
        proc.wait(5)

    print("\n| wire       | transport       | client     |  calls/s | client CPU µs/call |")
    print("|------------|-----------------|------------|---------:|-------------------:|")
    for wire, transport, ours, sdk in rows:
        for name, f in (("decodeloop", ours), ("MCP SDK", sdk)):
            print(f"| {wire} | {transport:<15} | {name:<10} | {f.calls_per_s:8,.0f} | {f.cpu_us:18,.1f} |")
    print(
        f"\n| wire       | {f'{args.megabytes} MB result/blob':<17} | decodeloop wall | decodeloop CPU | MCP SDK wall |"
        " MCP SDK CPU | wall ratio | CPU ratio |"
    )
    print(
        "|------------|-------------------|----------------:|---------------:|-------------:|------------:|"
        "-----------:|----------:|"
    )
    for wire, _, ours, sdk in rows:
        for variant, (wall, cpu) in ours.big.items():
            theirs = sdk.big.get(variant)
            if isinstance(theirs, tuple):
                cells = f"{theirs[0]:10.3f} s | {theirs[1]:9.3f} s | {theirs[0] / wall:9.1f}x | {theirs[1] / cpu:8.1f}x"
            else:
                cells = f"{theirs} | — | — | —"
            print(f"| {wire} | {variant:<17} | {wall:13.3f} s | {cpu:12.3f} s | {cells} |")
    print()
    for wire, transport, ours, sdk in rows:
        print(f"{wire}, {transport}: decodeloop uses {sdk.cpu_us / ours.cpu_us:.1f}x less client CPU per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
