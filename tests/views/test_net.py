"""The server's sockets without Nagle's algorithm (views/net.py): the listening socket, the connections it accepts
afterwards, and, when asked, connections already open."""

from __future__ import annotations

import socket

from views.net import no_nagle


def nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_listening_sockets_and_what_they_accept_send_without_delay():
    with socket.socket(family=socket.AF_INET) as listener:  # protocol 0, as Streamlit's server binds it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as _, listener.accept()[0] as before:
            assert nodelay(listener) == 0 and nodelay(before) == 0
            assert no_nagle() >= 1
            assert nodelay(listener) == 1 and nodelay(before) == 0  # an open connection keeps its option
            with socket.create_connection(listener.getsockname()) as _, listener.accept()[0] as after:
                assert nodelay(after) == 1  # inherited from the listener
            assert no_nagle(connected=True) >= 2
            assert nodelay(before) == 1
