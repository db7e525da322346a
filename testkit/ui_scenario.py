"""A small fleet history for the UI, API and CLI tests: one GPU that failed three times on two nodes.

GPU ``MOVED_UUID`` (serial ``SERIAL``) falls off the bus (Xid 79) twice in slot 3
of gpu-a01 (each incident resolved by hand), is then moved to slot 5 of gpu-b07
and reports a double-bit ECC error with a row-remapping event (Xid 48 + Xid 63).
Around it: a thermal warning on gpu-c02 and an ECC alert on a training cluster.
Alerts are shaped like dcgm-exporter's (testkit.webhooks) with the UUID and
serial labels of the moved board.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from testkit.notify_harness import Harness, hook, wait_for
from testkit.webhooks import gpu_alert

MOVED_UUID = "GPU-5f3e9c1a-0b7d-4c52-9e61-2a8f4d7b3c10"
SERIAL = "1654922018827"
MOVED_PCI_B07 = "00000000:BA:00.0"


def _board(xid: str | None = None, **more: str) -> dict[str, str]:
    labels = {"UUID": MOVED_UUID, "serial": SERIAL, **more}
    if xid:
        labels.update(xid=xid, severity="critical")
    return labels


async def _settle(h: Harness, count: int) -> list[dict[str, Any]]:
    return await wait_for(lambda: _at_least(h, count))


async def _at_least(h: Harness, count: int) -> list[dict[str, Any]] | None:
    rows = await h.incidents(sort="newest")  # the one just made first
    return rows if len(rows) >= count else None


async def build(h: Harness) -> dict[str, str]:
    """Post the history; returns the incident ids by role."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    ids: dict[str, str] = {}
    for n, hours in ((1, 50), (2, 26)):
        await h.post(hook(gpu_alert("prod", "gpu-a01", 3, 0, starts_at=now - timedelta(hours=hours), extra=_board("79")),
                          node="gpu-a01"))
        rows = await _settle(h, n)
        ids[f"a01_{n}"] = rows[0]["id"]
        resp = await h.client.post(f"/api/v1/incidents/{rows[0]['id']}/resolve", params={"by": "ops"})
        assert resp.status == 200, await resp.text()
    moved = [gpu_alert("prod", "gpu-b07", 5, 0, starts_at=now - timedelta(hours=3),
                       extra=_board("48", pci_bus_id=MOVED_PCI_B07)),
             gpu_alert("prod", "gpu-b07", 5, 3, starts_at=now - timedelta(hours=3),
                       extra=_board(None, pci_bus_id=MOVED_PCI_B07))]
    await h.post(hook(*moved, node="gpu-b07"))
    ids["b07"] = (await _settle(h, 3))[0]["id"]
    await h.post(hook(gpu_alert("prod", "gpu-c02", 1, 4, starts_at=now - timedelta(hours=1)), node="gpu-c02"))
    ids["c02"] = (await _settle(h, 4))[0]["id"]
    await h.post(hook(gpu_alert("train", "gpu-t11", 0, 6, starts_at=now - timedelta(minutes=30)),
                      node="gpu-t11", cluster="train"))
    ids["t11"] = (await _settle(h, 5))[0]["id"]
    return ids
