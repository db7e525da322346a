"""The partition proxy of the HA tests: forwards, holds every byte while blackholed without resetting
anything, delivers what was held after the heal, and passes a close on."""
from __future__ import annotations

import socket
import socketserver
import threading

import pytest

from testkit.partition_proxy import PartitionProxy


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address
    server.shutdown()
    server.server_close()


def test_blackhole_holds_bytes_and_heal_delivers_them(echo):
    with PartitionProxy(echo) as proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as client:
        client.sendall(b"one")
        assert client.recv(16) == b"one"
        proxy.blackhole()
        client.sendall(b"two")  # accepted by the kernel, goes no further
        client.settimeout(0.5)
        with pytest.raises(socket.timeout):  # silence: no answer, no reset, no close
            client.recv(16)
        late = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)  # accepted, not forwarded
        late.sendall(b"three")
        late.settimeout(0.3)
        with pytest.raises(socket.timeout):
            late.recv(16)
        proxy.heal()
        client.settimeout(5)
        late.settimeout(5)
        assert client.recv(16) == b"two"
        assert late.recv(16) == b"three"
        late.close()


def test_a_close_during_a_blackhole_is_seen_after_the_heal():
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, PartitionProxy(listener.getsockname()[:2]) as proxy:
        client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        server_side, _ = listener.accept()
        proxy.blackhole()
        server_side.close()  # e.g. PostgreSQL ending an idle session
        client.settimeout(0.5)
        with pytest.raises(socket.timeout):
            client.recv(16)
        proxy.heal()
        client.settimeout(5)
        assert client.recv(16) == b""  # the close arrives once the network is back
        client.close()


def test_only_loopback_targets():
    with pytest.raises(ValueError, match="loopback"):
        PartitionProxy(("10.0.0.1", 5432))
