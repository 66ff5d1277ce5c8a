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

- `XRGW_TAP=read` (default): a client that reads the NDJSON stream as fast as it comes
  (a raw socket, attached as soon as the admin port listens), every message of every
  route streamed (filter with `XRGW_TAP_QUERY`, e.g. `sample=0.01`);
- `XRGW_TAP=stalled`: a client that opens `/tap` and never reads: after its queue
  fills, every message is dropped and counted (the drop path);
- `XRGW_TAP=off`: no tap, the same start-up (a baseline through this shim).

`XRGW_TAP_LOG=FILE` appends how many message lines each reading tap saw: the admin
server starts with the routes, so a fast route may move some messages before the tap is
attached.
"""

from __future__ import annotations

import os
import re
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


def reader(port: int, stalled: bool) -> None:
    """Open /tap at once (a raw socket: no start-up time, attached before most of the
    traffic) and read everything into the void, or, `stalled`, read nothing until the
    gateway goes away. With `XRGW_TAP_LOG=FILE`, the message lines seen are appended
    there at the end (how much of the run the tap saw)."""
    sock = socket.socket()
    if stalled:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    query = ENV.get("XRGW_TAP_QUERY", "")
    sock.sendall(f"GET /tap{'?' + query if query else ''} HTTP/1.0\r\nHost: bench\r\n\r\n"
                 .encode())
    seen = 0
    if stalled:
        while wait_listening(port, 1.0):
            time.sleep(1.0)
    else:
        tail = b""
        while chunk := sock.recv(1 << 16):
            seen += (tail + chunk).count(b'{"tap":"message"')
            tail = chunk[-20:]
    sock.close()
    log = ENV.get("XRGW_TAP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{'stalled' if stalled else 'read'} port={port} messages_seen={seen}\n")


def detach(tap: str, port: int) -> None:
    """Start the reader in a grandchild of its own session: not in the bridge's process
    group (the harness stops that) nor its process tree (the harness counts its CPU)."""
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    if wait_listening(port):
        reader(port, stalled=tap == "stalled")
    os._exit(0)


def main(argv: list[str]) -> None:
    real = ENV.get("XRGW_REAL", "xrgw")
    tap = ENV.get("XRGW_TAP", "read")
    if tap not in ("read", "stalled", "off"):
        sys.exit(f"XRGW_TAP={tap!r}: read, stalled or off")
    if len(argv) >= 3 and argv[0] == "run" and argv[1] in ("-c", "--config") and tap != "off":
        port = free_port()
        with_admin_port(argv[2], port)
        detach(tap, port)
    os.execvp(real, [real, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
