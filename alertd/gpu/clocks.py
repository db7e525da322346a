"""Decode DCGM_FI_DEV_CLOCKS_EVENT_REASONS (old name ..._CLOCK_THROTTLE_REASONS).

Harmful reasons (hardware slowdown, thermal slowdown, power brake) make a thermal
signal; benign ones (idle, application clocks, a power cap the operator set, sync
boost, display clock) are kept apart: an alert that tests only those is
information, not a GPU problem.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from alertd.core.vocabulary import Detail
from alertd.promql.bittest import ClockTest, clock_test
from alertd.promql.expr import expr_of_url
from alertd.promql.recording import EMPTY, RecordedRules

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
    harmful: list[str] = []
    benign: list[str] = []
    for bit, (name, bad) in CLOCK_EVENT_BITS.items():
        if mask & bit:
            (harmful if bad else benign).append(name)
    return harmful, benign


@dataclass(frozen=True, slots=True)
class ClockReasons:
    """The reasons an alert is about, read from its label or from the bits its expression tests."""

    harmful: tuple[str, ...] = ()
    benign: tuple[str, ...] = ()
    basis: str = ""  # where they were read, for `alertd explain`
    tested: bool = False  # read from the bits the expression tests, not from the mask's value

    @property
    def detail(self) -> str:
        """The signal detail: the harmful reasons; ``any_clock_event_reason`` for an expression that fires on
        benign reasons as much as on harmful ones (a whole-mask ``> 0``)."""
        if self.tested and self.harmful and self.benign:
            return Detail.ANY_CLOCK_EVENT_REASON.value
        return ",".join(self.harmful)


@lru_cache(maxsize=4096)
def _tested(generator_url: str, recorded: RecordedRules) -> ClockTest | None:
    """The bits tested by a generatorURL's expression; cached per URL (one per rule in real traffic)."""
    return clock_test(expr_of_url(generator_url), recorded)


def clock_reasons(labels: Mapping[str, str], annotations: Mapping[str, str], generator_url: str,
                  recorded: Mapping[str, str] | None = None) -> ClockReasons:
    """Reasons from the ``clock_event_reasons`` label or annotation (a decimal mask, as the shipped rules set
    it); otherwise from the bit tests of the alert's expression (``floor(X / 32) % 2 == 1``, ``X % 256 >= 128``),
    recording rules expanded. Nothing known gives an empty ClockReasons."""
    raw = labels.get("clock_event_reasons") or annotations.get("clock_event_reasons")
    if raw:
        harmful, benign = decode_clock_events(raw)
        return ClockReasons(tuple(harmful), tuple(benign), f"clock_event_reasons={raw}")
    if not generator_url:
        return ClockReasons()
    if recorded is None or isinstance(recorded, RecordedRules):
        test = _tested(generator_url, recorded or EMPTY)
    else:
        test = clock_test(expr_of_url(generator_url), recorded)
    if test is None or not test.bits:
        return ClockReasons()
    harmful, benign = decode_clock_events(test.mask)
    return ClockReasons(tuple(harmful), tuple(benign), test.describe(), tested=True)
