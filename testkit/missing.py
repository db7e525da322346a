"""A real service the test needs is not installed: skip, or under CI fail."""
from __future__ import annotations

import os

import pytest

from testkit.services import INSTALL_COMMAND


def missing_service(reason: str) -> None:
    """Skip (or, under CI, fail) because a service is not installed."""
    if INSTALL_COMMAND not in reason:
        reason = f"{reason}; run: {INSTALL_COMMAND}"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}\n(CI is set, so a missing service fails instead of skipping)",
                    pytrace=False)
    pytest.skip(reason)
