"""The port of a ``serve --receivers N`` group: one listening socket, bound by the engine process and
inherited by its receivers.

The receivers used to bind the port each with SO_REUSEPORT. The kernel lets any process of the same user
join such a port, so a second, unrelated alertd started on it silently took half the webhooks (and both
called their first incident INC-1). Now the engine process binds the port once, without SO_REUSEPORT, so
any other process's bind fails with "address already in use", and hands the socket to the receivers it
starts (an inherited descriptor, named in their environment): the receivers of one installation share the
port, nobody else can.
"""
from __future__ import annotations

import os
import socket

LISTEN_FD_ENV = "ALERTD_LISTEN_FD"
BACKLOG = 1024  # pending connections while every receiver is busy (aiohttp's own default is 128)


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on HOST:PORT that no other process can join (raises OSError when taken)."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                        flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart need not wait for TIME_WAIT
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def child_environ(sock: socket.socket) -> dict[str, str]:
    return {LISTEN_FD_ENV: str(sock.fileno())}


def inherited_listener(environ: dict[str, str] | None = None) -> socket.socket | None:
    """The group's socket in a receiver process (None outside a group)."""
    fd = (environ if environ is not None else os.environ).get(LISTEN_FD_ENV)
    if not fd or not fd.isdigit():
        return None
    return socket.socket(fileno=int(fd))
