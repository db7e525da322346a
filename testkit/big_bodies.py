"""Clients that send large request bodies, and the server's peak memory meanwhile (bench/body_limits.py and
tests/integration/test_security_process.py)."""
from __future__ import annotations

import asyncio

from testkit.alertd_proc import AlertdProcess

CHUNK = 64 * 1024


async def one_client(port: int, path: str, size: int, chunked: bool, deadline: float) -> int:
    """The status the server answered (0: none, the connection was closed first)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    writer.write(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                 f"{length}\r\n\r\n".encode())
    answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
    try:
        async with asyncio.timeout(deadline):
            sent = 0
            while sent < size and not answer.done():
                piece = b"t" * CHUNK
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += CHUNK
                await writer.drain()
            head = await answer
        return int(head.split(b" ", 2)[1])
    except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, asyncio.CancelledError):
        return int((answer.result() if answer.done() and not answer.exception() else b"x 0").split(b" ", 2)[1])
    finally:
        answer.cancel()
        writer.close()


async def measure(proc: AlertdProcess, clients: int, size: int, chunked: bool, path: str = "/ui/login") -> dict:
    before = proc.proc_status("VmHWM")
    statuses = await asyncio.gather(*(one_client(proc.port, path, size, chunked, 30.0) for _ in range(clients)))
    await asyncio.sleep(0.2)
    return {"before_kb": before, "peak_kb": proc.proc_status("VmHWM"), "rss_kb": proc.proc_status("VmRSS"),
            "answered_413": sum(1 for s in statuses if s == 413), "statuses": sorted(set(statuses))}
