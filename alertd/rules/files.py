"""Every rule-file section declared once (alertd/schemas/declared.py), for the generator of their schema
files (alertd/config/schemafiles.py): one command regenerates them all."""
from __future__ import annotations

from alertd.core.sections import Section
from alertd.gpu.catalog import XID_CATALOG
from alertd.gpu.recovery import RECOVERY_ACTIONS_FILE
from alertd.gpu.sxid import SXID_CATALOG
from alertd.rules.evidence import EVIDENCE
from alertd.rules.history import HISTORY
from alertd.rules.kube_health import KUBE_HEALTH
from alertd.rules.signals import SIGNALS
from alertd.schemas.declared import RuleFile

RULE_FILES: tuple[RuleFile[Section], ...] = (XID_CATALOG, RECOVERY_ACTIONS_FILE, SXID_CATALOG, SIGNALS, EVIDENCE, HISTORY, KUBE_HEALTH)

__all__ = ["RULE_FILES"]
