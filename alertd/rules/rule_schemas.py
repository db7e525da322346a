"""Every rule file's schema, declared once (alertd/schemas/declared.py's RuleFile), for the generator of the
schema files (``python -m alertd.config.schemafiles`` writes and checks them all with the configuration's)."""
from __future__ import annotations

from alertd.core.sections import Section
from alertd.gpu.catalog import XID_CATALOG
from alertd.gpu.recovery import RECOVERY_ACTIONS_FILE
from alertd.gpu.sxid import SXID_CATALOG
from alertd.rules.correlation_section import Correlation
from alertd.rules.declared import RULE_DEFS
from alertd.rules.evidence import EVIDENCE
from alertd.rules.history import HISTORY
from alertd.rules.kube_health import KUBE_HEALTH
from alertd.rules.remediation import LadderStepRule, PolicyRule, RemediationFile
from alertd.rules.rma import Condition, RmaFile, RmaRule
from alertd.rules.routing_section import ROUTING_DEFS, RoutingSection
from alertd.rules.signals import SIGNALS
from alertd.schemas.declared import RuleFile

# These four keep the declaration's own order of keys: their schemas were first written from it.
CORRELATION = RuleFile("correlation", "alertd correlation rules", Correlation, extra_defs=RULE_DEFS,
                       section="correlation", key_order=None)
ROUTING = RuleFile("routing", "alertd routing rules", RoutingSection, extra_defs={**RULE_DEFS, **ROUTING_DEFS},
                   section="routing", key_order=None)
RMA = RuleFile("rma", "alertd RMA candidate policy", RmaFile, {Condition: "condition", RmaRule: "rule"}, key_order=None)
REMEDIATION = RuleFile("remediation", "alertd remediation policy", RemediationFile,
                       {LadderStepRule: "step", PolicyRule: "policy"}, key_order=None)

# schema file name -> its declaration
RULE_FILES: dict[str, RuleFile[Section]] = {rule_file.name: rule_file for rule_file in (
    XID_CATALOG, RECOVERY_ACTIONS_FILE, SXID_CATALOG, SIGNALS, EVIDENCE, CORRELATION, ROUTING, HISTORY, RMA,
    REMEDIATION, KUBE_HEALTH)}

__all__ = ["CORRELATION", "REMEDIATION", "RMA", "ROUTING", "RULE_FILES"]
