"""Decode DCGM_FI_DEV_CLOCKS_EVENT_REASONS (old name ..._CLOCK_THROTTLE_REASONS)."""
from __future__ import annotations

# Bits from NVML's nvmlClocksEventReasons; only the harmful ones raise a signal.
CLOCK_EVENT_BITS: dict[int, tuple[str, bool]] = {
    0x1: ("gpu_idle", False),
    0x2: ("applications_clocks_setting", False),
    0x4: ("sw_power_cap", False),
    0x8: ("hw_slowdown", True),
    0x10: ("sync_boost", False),
    0x20: ("sw_thermal_slowdown", True),
    0x40: ("hw_thermal_slowdown", True),
    0x80: ("hw_power_brake_slowdown", True),
    0x100: ("display_clock_setting", False),
}


def decode_clock_events(value: str | int | float | None) -> tuple[list[str], list[str]]:
    """Return (harmful reasons, benign reasons) named for a bitmask value."""
    if value in (None, ""):
        return [], []
    try:
        mask = int(float(value))  # Prometheus renders gauges as floats, e.g. "72" or "7.2e+01"
    except (TypeError, ValueError):
        return [], []
    harmful, benign = [], []
    for bit, (name, bad) in CLOCK_EVENT_BITS.items():
        if mask & bit:
            (harmful if bad else benign).append(name)
    return harmful, benign
