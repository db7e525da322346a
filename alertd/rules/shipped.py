"""Where the shipped rules live: package data, found through importlib.resources.

The repository's top-level ``rules/`` is their source; ``alertd/rules/shipped_rules`` links to it, so a
source checkout and an installed wheel (which holds copies of the files, pyproject's package-data) read the
same files by the same means, wherever alertd is installed and whatever the current directory is.

A service reads the shipped rules unless its configuration says otherwise, explicitly: ``rules.paths``
replaces them, ``rules.site`` adds a site's rule directories after them (a site file with the same name
as a shipped one replaces it: ruleset.rule_files). A ``rules/`` folder in the current directory is never
picked up by itself.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE, FOLDER = "alertd.rules", "shipped_rules"


def shipped_rules() -> Path:
    """The shipped rules directory (a real directory: the wheel is installed unpacked, not zipped)."""
    return Path(str(resources.files(PACKAGE) / FOLDER))


SHIPPED_RULES = shipped_rules()


def default_rule_paths() -> list[str]:
    """The shipped rules; named relative to the current directory when they lie under it (a source checkout's
    ``rules/``), so findings read ``rules/evidence.yml:62`` there rather than a long absolute path."""
    real, here = shipped_rules().resolve(), Path.cwd()
    return [str(real.relative_to(here)) if real.is_relative_to(here) else str(shipped_rules())]
