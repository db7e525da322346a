"""The installed alertd's version: ``alertd --version`` and the ``alertd_build_info`` metric say it.

Read from the distribution's metadata (pyproject's version, as pip installed it), so the number the
package was built with is the number reported; a source tree that was never installed says so.
"""
from __future__ import annotations

import platform
from importlib import metadata

UNINSTALLED = "0+unknown"  # a source tree on sys.path without any install (PEP 440 local version)


def version() -> str:
    try:
        return metadata.version("alertd")
    except metadata.PackageNotFoundError:
        return UNINSTALLED


def python_version() -> str:
    return platform.python_version()
