"""PCI bus ids as dcgm-exporter and the kernel write them, made comparable.

dcgm-exporter: ``00000000:3B:00.0`` (8-digit domain, upper case, function).
Kernel (NVRM):  ``0000:3b:00`` (4-digit domain, no function). Both become
``0000:3b:00`` — function 0 is the only one a GPU exposes to the driver.
"""
from __future__ import annotations

import re
from functools import lru_cache

# A PCI address as a kernel log line writes it (domain always there, function optional): the one pattern the
# NVRM Xid and NVSwitch SXid line parsers embed, so both accept the same addresses.
PCI_ADDRESS = r"[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?"

_PCI = re.compile(
    r"^(?:PCI:)?(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):(?P<dev>[0-9a-fA-F]{1,2})(?:\.(?P<fn>[0-7]))?$"
)


@lru_cache(maxsize=4096)  # every alert of a GPU carries its id, and a fleet has only a few bus numbers
def normalize_pci(value: str | None) -> str:
    """Return ``dddd:bb:dd`` in lower case, or "" when the value is not a PCI address."""
    if not value:
        return ""
    m = _PCI.match(value.strip())
    if not m:
        return ""
    domain = int(m.group("domain") or "0", 16)
    return f"{domain:04x}:{int(m.group('bus'), 16):02x}:{int(m.group('dev'), 16):02x}"


__all__ = ["PCI_ADDRESS", "normalize_pci"]
