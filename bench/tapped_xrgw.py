#!/usr/bin/env python3
"""`xrgw run` with an `xrgw tap` attached: what a tap costs a route, measured by an
external passthrough harness (see README.md: "Against the raw-client passthrough
harness").

Not a test. Give this file as `XRGW` to a bridge command that execs `$XRGW run -c
CONFIG` (`bench/catalog_bridge.py`, the harness's `peers/xrgw_bridge.py`); it puts the
admin server on a free loopback port, starts a tap reader outside the bridge's process
tree (its CPU is not the gateway's), then execs the real gateway:

    T="XRGW=bench/tapped_xrgw.py XRGW_REAL=.venv/bin/xrgw"
    --bridge "plain=XRGW=.venv/bin/xrgw python3 peers/xrgw_bridge.py" \\
    --bridge "tap=$T python3 peers/xrgw_bridge.py" \\
    --bridge "stalled=$T XRGW_TAP=stalled python3 peers/xrgw_bridge.py"

- `XRGW_TAP=read` (default): `xrgw tap URL --format json > /dev/null`, every message
  of every route streamed (add filters with `XRGW_TAP_ARGS`, e.g. `--sample 0.01`);
- `XRGW_TAP=stalled`: a client that opens `/tap` and never reads: after its queue
  fills, every message is dropped and counted (the drop path);
- `XRGW_TAP=off`: no tap, the same start-up (a baseline through this shim).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
import time

ENV = os.environ


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def with_admin_port(config: str, port: int) -> None:
    with open(config, encoding="utf-8") as f:
        text = f.read()
    admin = f'admin: {{listen: "127.0.0.1:{port}"}}'
    text, found = re.subn(r"(?m)^admin:.*$", admin, text)
    if not found:
        text += f"\n{admin}\n"
    with open(config, "w", encoding="utf-8") as f:
        f.write(text)


def wait_listening(port: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def stalled_reader(port: int) -> None:
    """Open /tap, read the response head, then nothing until the gateway goes away."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET /tap HTTP/1.0\r\nHost: bench\r\n\r\n")
    while wait_listening(port, 1.0):
        time.sleep(1.0)
    sock.close()


def detach(tap: str, real: str, port: int) -> None:
    """Start the reader in a grandchild of its own session: not in the bridge's process
    group (the harness stops that) nor its process tree (the harness counts its CPU)."""
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    if not wait_listening(port):
        os._exit(1)
    if tap == "stalled":
        stalled_reader(port)
        os._exit(0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    args = [real, "tap", f"http://127.0.0.1:{port}", "--format", "json",
            *shlex.split(ENV.get("XRGW_TAP_ARGS", ""))]
    os.execvp(real, args)


def main(argv: list[str]) -> None:
    real = ENV.get("XRGW_REAL", "xrgw")
    tap = ENV.get("XRGW_TAP", "read")
    if tap not in ("read", "stalled", "off"):
        sys.exit(f"XRGW_TAP={tap!r}: read, stalled or off")
    if len(argv) >= 3 and argv[0] == "run" and argv[1] in ("-c", "--config") and tap != "off":
        port = free_port()
        with_admin_port(argv[2], port)
        detach(tap, real, port)
    os.execvp(real, [real, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
