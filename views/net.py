"""The server's TCP sockets without Nagle's algorithm.

Streamlit's server binds its socket with protocol 0, for which asyncio does not set TCP_NODELAY as it does on the
sockets it creates itself. Each answer to a click is several small WebSocket messages written back to back; with
Nagle's algorithm on, the second waits until the browser acknowledges the first, and browsers delay that
acknowledgement (~40 ms on Linux): every click then took ~40 ms more than the page's own work, however little that
was. ``app.py`` switches it off on the listening socket as the server starts (the connections it accepts inherit
the option on Linux).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

FDS = Path("/proc/self/fd")  # Linux; elsewhere nothing is changed


def no_nagle(connected: bool = False) -> int:
    """Set TCP_NODELAY on this process's listening TCP sockets (and, with ``connected``, on its open connections
    too); returns how many sockets were set."""
    if not FDS.is_dir():
        return 0
    done = 0
    for name in os.listdir(FDS):
        try:
            dup = os.dup(int(name))  # a socket object of our own on the same socket: closing it keeps the server's
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=dup)
        except OSError:  # not a socket
            os.close(dup)
            continue
        with sock:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                continue
            if connected or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                done += 1
    return done
