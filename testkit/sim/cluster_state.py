"""What the simulated cluster is made of: nodes, their GPUs and what each GPU exposes to dcgm-exporter."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Clock-event reasons of a healthy GPU: idle when nothing runs, otherwise none
# (a busy GPU often shows 0x4 power cap, which is just as benign).
CLOCKS_IDLE = 0x1
CLOCKS_BUSY = 0x0


@dataclass
class PodRef:
    namespace: str
    pod: str
    container: str


@dataclass
class GPU:
    index: int
    uuid: str
    pci_bus_id: str
    pod: PodRef | None = None
    present: bool = True
    xid: int = 0
    xid_events: list[tuple[float, int]] = field(default_factory=list)
    temp: float = 38.0
    clocks_event_reasons: int | None = None  # None = healthy baseline (idle/busy)
    ecc_dbe_vol_total: int = 0
    row_remap_failure: int = 0
    row_remap_pending: int = 0
    nvlink_crc_flit_total: int = 0

    @property
    def device(self) -> str:
        return f"nvidia{self.index}"

    def reasons(self) -> int:
        if self.clocks_event_reasons is not None:
            return self.clocks_event_reasons
        return CLOCKS_BUSY if self.pod else CLOCKS_IDLE

    def util(self) -> int:
        return 97 if self.pod else 0

    def reset(self) -> None:
        """What a driver reload does: volatile state and the sticky Xid go back to 0."""
        self.present = True
        self.xid = 0
        self.xid_events.clear()
        self.temp = 38.0
        self.clocks_event_reasons = None
        self.ecc_dbe_vol_total = 0
        self.row_remap_failure = 0
        self.row_remap_pending = 0
        self.nvlink_crc_flit_total = 0


@dataclass
class Node:
    name: str
    index: int
    exporter_pod: str
    gpus: list[GPU]
    internal_ip: str
    exporter_down: bool = False
    node_down: bool = False
    cordoned: bool = False
    ready: str = "true"  # Ready condition: "true" | "false" | "unknown"
    marked_for: str | None = None  # cordoned by alertd's remediation for this incident (its taint's value)

    def reset(self) -> None:
        self.exporter_down = False
        self.node_down = False
        self.cordoned = False
        self.marked_for = None
        self.ready = "true"
        for gpu in self.gpus:
            gpu.reset()


class UnknownNode(KeyError):
    pass


# dcgm-exporter field, Prometheus type, help text and how to read it from a GPU.
DCGM_FIELDS: tuple[tuple[str, str, str, Any], ...] = (
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temp),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.util()),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda g: g.xid),
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "gauge",
        "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)",
        lambda g: g.reasons(),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "counter",
        "Total number of double-bit volatile ECC errors.",
        lambda g: g.ecc_dbe_vol_total,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "gauge",
        "Whether remapping of rows has failed",
        lambda g: g.row_remap_failure,
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "gauge",
        "Whether remapping of rows is pending",
        lambda g: g.row_remap_pending,
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        lambda g: g.nvlink_crc_flit_total,
    ),
)
