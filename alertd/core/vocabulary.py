"""The words alertd's stages, rule files and schemas share, each declared once: the signal kinds (with what
each kind means to ranking, titles and summaries), their details and categories, the timeline's event kinds,
the actions, the verdict kinds, the engine's own correlation groups, a remediation's kinds, steps and states,
and the labels that name a node or carry an Xid. A stage that needs a word, a set of them or a word's wording
reads it from here; the JSON Schemas that list them are tested equal to the sets below
(tests/unit/test_vocabulary.py), and tests/unit/test_vocabulary_once.py fails when another module writes
two or more of one concept's words as a literal again."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Mapping

from alertd.core.matchers import one_of


class SignalKind(StrEnum):
    """What kind of problem an alert reports (``Signal.kind``), decided by the signals rules."""

    XID = "xid"
    SXID = "sxid"
    THERMAL = "thermal"
    ECC = "ecc"
    ROW_REMAP = "row_remap"
    NVLINK = "nvlink"
    GPU_CHECK = "gpu_check"
    METRICS_MISSING = "metrics_missing"
    NODE_CORDONED = "node_cordoned"
    NODE_NOT_READY = "node_not_ready"
    WATCHDOG = "watchdog"
    JOB_STALLED = "job_stalled"
    STRAGGLER = "straggler"
    GPU_QUIET = "gpu_quiet"
    LINK_DEGRADED = "link_degraded"
    DOMAIN = "domain"  # the primary signal of a bad failure domain's incident (engine/domains.py)
    OTHER = "other"  # what alertd cannot classify


class Nature(Enum):
    """What a kind says of a node, which decides the sets a stage skips (they nest, pipeline innermost)."""

    FAULT = "fault"  # something broke
    JOB = "job"  # a job's symptom (a stall, a slow GPU): no fault of the node by itself
    REPAIR = "repair"  # what people do to a node (a cordon): a response, not a fault
    UNCLASSIFIED = "unclassified"  # alertd cannot say
    PIPELINE = "pipeline"  # the alerting pipeline's heartbeat, about no node


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One kind's data: ``rank`` breaks severity ties (the highest best explains a node's trouble and names
    its incident), ``title`` is the incident title when the alert gives none, ``word`` names it among a stalled
    job's suspects, ``short`` in a fleet's counts."""

    rank: int
    nature: Nature = Nature.FAULT
    title: str = ""
    word: str = ""
    short: str = ""


K = SignalKind
KINDS: Mapping[SignalKind, KindSpec] = {
    K.XID: KindSpec(90, title="Xid (code unknown)", word="Xid", short="Xid (code unknown)"),
    K.SXID: KindSpec(85, title="NVSwitch SXid (line unknown)", word="NVSwitch SXid"),
    K.THERMAL: KindSpec(50, title="GPU clocks throttled", word="throttle", short="thermal"),
    K.ECC: KindSpec(80, title="GPU uncorrectable ECC errors", short="ECC"),
    K.ROW_REMAP: KindSpec(70, title="GPU memory row remapping", short="row remap"),
    K.NVLINK: KindSpec(60, title="NVLink errors", short="NVLink"),
    K.GPU_CHECK: KindSpec(55, title="GPU health check failed", short="health check"),
    K.METRICS_MISSING: KindSpec(40, title="GPU metrics missing", word="node or exporter down", short="exporter down"),
    K.NODE_CORDONED: KindSpec(20, Nature.REPAIR, title="Node cordoned", short="cordoned"),
    K.NODE_NOT_READY: KindSpec(30, title="Node not ready", word="NotReady", short="NotReady"),
    K.WATCHDOG: KindSpec(10, Nature.PIPELINE, title="Alerting pipeline heartbeat"),
    # What degrades a job without a GPU error: a link, a GPU whose telemetry went quiet, a slow GPU, a hang
    K.JOB_STALLED: KindSpec(33, Nature.JOB, title="Job stalled: its GPUs idle after being busy"),
    K.STRAGGLER: KindSpec(35, Nature.JOB, title="GPU straggler: well below its job's median", word="straggler"),
    K.GPU_QUIET: KindSpec(45, title="GPU telemetry quiet: its series stopped while its peers report",
                          word="quiet GPU", short="GPU quiet"),
    K.LINK_DEGRADED: KindSpec(58, title="Link degraded", word="link", short="link degraded"),
    K.DOMAIN: KindSpec(0),
    K.OTHER: KindSpec(0, Nature.UNCLASSIFIED),
}


class Category(StrEnum):
    """Whose fault a signal is (``Signal.category``): the Xid catalog's and the rules' ``category``."""

    APPLICATION = "application"  # the job's own fault: its GPU is healthy
    DRIVER = "driver"
    MEMORY = "memory"
    NVLINK = "nvlink"
    HARDWARE = "hardware"
    INFORMATIONAL = "informational"
    OTHER = "other"  # what alertd cannot classify (never written in a rule)
    PIPELINE = "pipeline"  # the alerting pipeline's heartbeat missing (engine/watchdog.py; never written in a rule)


C = Category
# What a rule or catalog entry may say (their schemas list them)
RULED_CATEGORIES = frozenset(Category) - {C.OTHER, C.PIPELINE}
FAILURE_CATEGORIES = frozenset({C.HARDWARE, C.MEMORY, C.NVLINK, C.DRIVER})  # a reliability report's failures
# A fault of the GPU itself, for an RMA handoff: a driver fault may be the software's
RMA_CATEGORIES = FAILURE_CATEGORIES - {C.DRIVER}


class Detail(StrEnum):
    """What refines a kind (``Signal.detail``): what is missing, which link, which reading."""

    EXPORTER_DOWN = "exporter_down"
    NODE_DOWN = "node_down"
    GPU_MISSING = "gpu_missing"
    GPU_UNUSABLE = "gpu_unusable"
    TEMPERATURE = "temperature"
    THERMAL_VIOLATION = "thermal_violation"
    POWER_VIOLATION = "power_violation"
    ANY_CLOCK_EVENT_REASON = "any_clock_event_reason"  # a whole-mask clock test: benign and harmful alike
    CORRECTABLE = "correctable"
    POWER_SLOWDOWN = "power_slowdown"
    PCIE_BANDWIDTH = "pcie_bandwidth"
    PCIE_REPLAY = "pcie_replay"
    PCIE_LINK = "pcie_link"
    DIAGNOSTICS = "diagnostics"
    TELEMETRY_FROZEN = "telemetry_frozen"
    DRIVER_SLOW = "driver_slow"
    IB_PORT_DOWN = "ib_port_down"
    IB_PORT_FLAPPING = "ib_port_flapping"
    LINK_COLLAPSED = "link_collapsed"


D = Detail
DETAIL_TITLES: Mapping[str, str] = {
    D.EXPORTER_DOWN: "GPU metrics missing: dcgm-exporter down",
    D.NODE_DOWN: "Node down: no metrics from the node",
    D.GPU_MISSING: "GPU missing from the node",
    D.GPU_UNUSABLE: "GPU unusable: GPU pods rejected on a Ready node",
    D.TEMPERATURE: "GPU temperature high",
    D.THERMAL_VIOLATION: "GPU held back by heat (thermal violation)",
    D.POWER_VIOLATION: "GPU held back at its power limit (power violation)",
    D.ANY_CLOCK_EVENT_REASON: "GPU clocks throttled (any reason)",
    D.CORRECTABLE: "GPU correctable ECC errors (single-bit, fixed by the GPU)",
    D.POWER_SLOWDOWN: "GPU power slowdown: clocks cut at the power limit",
    D.PCIE_BANDWIDTH: "GPU PCIe bandwidth low",
    D.PCIE_REPLAY: "GPU PCIe replays: the link retransmits",
    D.PCIE_LINK: "GPU PCIe link degraded (width or generation)",
    D.DIAGNOSTICS: "GPU diagnostics failed (DCGM)",
    D.TELEMETRY_FROZEN: "GPU telemetry frozen: its readings stopped changing",
    D.DRIVER_SLOW: "GPU driver slow: nvidia-smi answers late",
    D.IB_PORT_DOWN: "InfiniBand port down",
    D.IB_PORT_FLAPPING: "InfiniBand port flapping",
    D.LINK_COLLAPSED: "GPU link traffic collapsed next to its peers",
}
# Details whose title the alert's summary gives, because it counts something ("GPU unusable: 12 GPU pods
# rejected on a Ready node", alertd/sources/admission.py).
COUNTED_DETAILS = frozenset({D.GPU_UNUSABLE})
# What a metrics_missing rule must say is missing (rules/signals.yml)
MISSING_DETAILS = frozenset({D.EXPORTER_DOWN, D.NODE_DOWN, D.GPU_MISSING, D.GPU_UNUSABLE, D.TELEMETRY_FROZEN})
# ... and what evidence may (rules/evidence.yml): an unusable GPU is only seen by alertd's admission source
EVIDENCE_MISSING_DETAILS = MISSING_DETAILS - {D.GPU_UNUSABLE}
IB_PORT_DETAILS = frozenset({D.IB_PORT_DOWN, D.IB_PORT_FLAPPING})


def _of_nature(*natures: Nature) -> frozenset[str]:
    return frozenset(k.value for k, spec in KINDS.items() if spec.nature in natures)


SIGNAL_KINDS = frozenset(SignalKind)
NEVER_STORM = _of_nature(Nature.PIPELINE)  # no fleet event, whatever the storm rules say
NEVER_CAUSE = _of_nature(Nature.PIPELINE, Nature.UNCLASSIFIED)  # never the fault a repair responds to
NEVER_FAULT = _of_nature(Nature.PIPELINE, Nature.UNCLASSIFIED, Nature.REPAIR)  # what a repair shows, not a fault
NOT_FAULTS = _of_nature(Nature.PIPELINE, Nature.UNCLASSIFIED, Nature.REPAIR, Nature.JOB)  # no bad node by itself

# Keyed by the plain word: a signal's kind is read from rule files, and str-only dicts look it up fastest
KIND_PRIORITY: Mapping[str, int] = {k.value: s.rank for k, s in KINDS.items()}
KIND_TITLES: Mapping[str, str] = {k.value: s.title for k, s in KINDS.items() if s.title}
KIND_WORDS: Mapping[str, str] = {k.value: s.word for k, s in KINDS.items() if s.word}
KIND_SHORT: Mapping[str, str] = {k.value: s.short for k, s in KINDS.items() if s.short}

# Node incidents of these kinds, in this order, are a stalled job's suspects (then by time: the nearest to
# the stall first). A link or an Xid explains a hang better than a node that went NotReady after it.
SUSPECT_KINDS = (K.XID, K.SXID, K.LINK_DEGRADED, K.METRICS_MISSING, K.NODE_NOT_READY, K.GPU_QUIET, K.ECC,
                 K.ROW_REMAP, K.NVLINK, K.GPU_CHECK, K.THERMAL, K.STRAGGLER)

# The kinds each rule file may name (their JSON Schemas list them; tests/unit/test_vocabulary.py checks)
RULED_KINDS = SIGNAL_KINDS - {K.DOMAIN}  # rules/signals.yml: every kind but the engine's own domain
EVIDENCE_KINDS = frozenset({K.XID, K.THERMAL, K.ECC, K.ROW_REMAP, K.NVLINK, K.GPU_CHECK, K.METRICS_MISSING,
                            K.NODE_CORDONED, K.NODE_NOT_READY})  # rules/evidence.yml
HISTORY_KINDS = EVIDENCE_KINDS | {K.SXID}  # rules/history.yml and rules/rma.yml
REMEDIATION_KINDS = HISTORY_KINDS | {K.GPU_QUIET, K.LINK_DEGRADED, K.DOMAIN}  # rules/remediation.yml policies
SUSPECT_CHOICES = HISTORY_KINDS | {K.GPU_QUIET, K.LINK_DEGRADED, K.STRAGGLER}  # correlation.job.kinds
# What a GPU health check's CloudEvent may say it found (receive/cloudevents.py): a kind, or a detail of one, in
# the order its refusal lists them
HEALTH_EVENT_WORDS: tuple[str, ...] = (K.XID, K.ECC, K.ROW_REMAP, K.NVLINK, K.THERMAL, D.GPU_MISSING, D.GPU_UNUSABLE,
                                       K.OTHER)
HEALTH_EVENT_KINDS = frozenset(HEALTH_EVENT_WORDS)


def signal_is(*kinds: SignalKind, negate: bool = False) -> str:
    """The matcher text on field ``signal`` that accepts these kinds (all but them when ``negate``)."""
    return one_of("signal", *kinds, negate=negate)


def detail_is(*details: Detail | str) -> str:
    """The matcher text on field ``detail`` that accepts these details ("" among them: none)."""
    return one_of("detail", *details)


class EventKind(StrEnum):
    """What one line of an incident's timeline tells (``Event.kind``); routing reads them from each change."""

    OPENED = "opened"
    REOPENED = "reopened"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"
    ALERT_JOINED = "alert_joined"
    ALERT_FOLDED = "alert_folded"
    ALERT_REFIRED = "alert_refired"
    ALERT_RESOLVED = "alert_resolved"
    ALL_ALERTS_RESOLVED = "all_alerts_resolved"
    SEVERITY_CHANGED = "severity_changed"
    CLASSIFICATION_UPGRADED = "classification_upgraded"
    EVIDENCE = "evidence"
    OWNERS = "owners"
    NODE_UPDATED = "node_updated"
    INCIDENT_JOINED = "incident_joined"
    FOLDED_INTO_FLEET = "folded_into_fleet"
    LEFT_FLEET = "left_fleet"
    NODES_JOINED = "nodes_joined"
    NODES_LEFT = "nodes_left"
    NODES_RESOLVED = "nodes_resolved"
    STORM_PENDING = "storm_pending"
    STORM_COUNTED = "storm_counted"
    STORM_DOUBLED = "storm_doubled"  # the node count reached twice the last milestone (a thread reply)
    STORM_GREW = "storm_grew"  # pagers are told the new count (rate-limited by the engine)
    READING_CHANGED = "reading_changed"  # a storm's member alert reads a new value (a temperature)
    DOMAIN_BAD = "domain_bad"
    DOMAIN_MEMBER = "domain_member"
    SUSPECTS = "suspects"
    SUSPECT_OF_JOB = "suspect_of_job"
    RETITLED = "retitled"
    SILENCED = "silenced"
    SILENCE_REMOVED = "silence_removed"
    ESCALATED = "escalated"
    ROUTED = "routed"
    VERDICT = "verdict"
    REPAIR_FAILED = "repair_failed"
    TICKET_OPENED = "ticket_opened"
    REMEDIATION_PROPOSED = "remediation_proposed"
    REMEDIATION_NOT_PROPOSED = "remediation_not_proposed"
    REMEDIATION_STARTED = "remediation_started"
    REMEDIATION_UPDATED = "remediation_updated"
    REMEDIATION_SUPERSEDED = "remediation_superseded"
    REMEDIATION_APPROVE = "remediation_approve"
    REMEDIATION_OVERRIDE = "remediation_override"
    REMEDIATION_CANCEL = "remediation_cancel"
    REMEDIATION_STOP = "remediation_stop"


E = EventKind
# What each timeline event is, in words (the UI's timeline, the CLI): never the event's internal name.
EVENT_WORDS: Mapping[str, str] = {
    E.OPENED: "Opened", E.REOPENED: "Reopened", E.ACKNOWLEDGED: "Acknowledged", E.RESOLVED: "Resolved",
    E.ALERT_JOINED: "Alert joined", E.ALERT_FOLDED: "Fallout alert joined", E.ALERT_REFIRED: "Alert firing again",
    E.ALERT_RESOLVED: "Alert resolved", E.ALL_ALERTS_RESOLVED: "All alerts resolved",
    E.SEVERITY_CHANGED: "Severity changed", E.CLASSIFICATION_UPGRADED: "Classification upgraded",
    E.EVIDENCE: "Kernel-log evidence", E.OWNERS: "Owners found", E.NODE_UPDATED: "Node changed",
    E.INCIDENT_JOINED: "Node incident joined", E.FOLDED_INTO_FLEET: "Folded into a fleet",
    E.LEFT_FLEET: "Left the fleet", E.NODES_JOINED: "Nodes joined", E.NODES_LEFT: "Nodes left",
    E.NODES_RESOLVED: "Nodes resolved", E.STORM_PENDING: "Storm pending", E.STORM_COUNTED: "Storm counted",
    E.STORM_DOUBLED: "Storm doubled", E.STORM_GREW: "Pages updated", E.READING_CHANGED: "Reading changed",
    E.SILENCED: "Silenced", E.SILENCE_REMOVED: "Silence removed", E.ESCALATED: "Escalated",
    E.ROUTED: "Routed", E.VERDICT: "History verdict", E.REPAIR_FAILED: "Repair failed",
    E.TICKET_OPENED: "RMA ticket opened", E.REMEDIATION_PROPOSED: "Remediation proposed",
    E.REMEDIATION_NOT_PROPOSED: "No remediation proposed", E.REMEDIATION_STARTED: "Remediation started",
    E.REMEDIATION_UPDATED: "Remediation step", E.REMEDIATION_SUPERSEDED: "Remediation superseded",
    E.REMEDIATION_APPROVE: "Remediation approved", E.REMEDIATION_OVERRIDE: "Breaker overridden",
    E.REMEDIATION_CANCEL: "Remediation cancelled", E.REMEDIATION_STOP: "Remediation stopped",
}
REMEDIATION_EVENT = "remediation_"  # + a remediation's verb or end state: the event kinds remediation writes


class GpuAction(StrEnum):
    """What to do about a fault: the Xid and SXid catalogs' actions and the history ladder's steps."""

    RESTART_APP = "restart_app"
    RESET_GPU = "reset_gpu"
    REBOOT_NODE = "reboot_node"
    CONTACT_SUPPORT = "contact_support"
    DRAIN_P2P = "drain_p2p"
    DRAIN_RESET = "drain_reset"
    DRAIN_AND_HANDOFF = "drain_and_handoff"
    REPLACE_GPU = "replace_gpu"
    WATCH = "watch"
    IGNORE = "ignore"


A = GpuAction
# The action ladder, mildest first: a history verdict only ever climbs it (rules/history.yml, remediation.yml).
LADDER = (A.REBOOT_NODE, A.RESET_GPU, A.DRAIN_AND_HANDOFF, A.REPLACE_GPU)
LADDER_WORDS: Mapping[str, str] = {A.REBOOT_NODE: "reboot node", A.RESET_GPU: "reset GPU",
                                   A.DRAIN_AND_HANDOFF: "drain and hand off", A.REPLACE_GPU: "replace GPU"}
CATALOG_ACTIONS = frozenset({A.RESTART_APP, A.RESET_GPU, A.REBOOT_NODE, A.CONTACT_SUPPORT, A.IGNORE, A.WATCH})
SXID_ACTIONS = CATALOG_ACTIONS - {A.RESTART_APP}  # an NVSwitch fault is never the application's
DRAINED_ACTIONS = frozenset({A.RESET_GPU, A.REBOOT_NODE})  # their GPU's work must be drained first
# What the driver's recovery action (Xid 154) asks of an incident (rules/recovery-actions.yml)
RECOVERY_ACTIONS = frozenset({A.IGNORE, A.RESET_GPU, A.REBOOT_NODE, A.DRAIN_P2P, A.DRAIN_RESET, A.CONTACT_SUPPORT})
# Actions that leave the GPU in service (never drained): the job's fault, or nothing to replace
NOT_HARDWARE_ACTIONS = frozenset({A.RESTART_APP, A.WATCH, A.IGNORE})
# What each action asks of a person, in a sentence (Slack, PagerDuty, Opsgenie, the UI)
ACTION_ADVICE: Mapping[str, str] = {
    A.RESTART_APP: "Restart the job: the application faulted; the GPU is healthy.",
    A.RESET_GPU: "Drain the GPU and reset it (nvidia-smi -r), then run diagnostics before returning it.",
    A.REBOOT_NODE: "Drain and reboot the node (often a power cycle); save dmesg and the BMC log first.",
    A.CONTACT_SUPPORT: "Drain the GPU and open a case with the hardware vendor.",
    A.DRAIN_P2P: "Stop peer-to-peer (NVLink) work on the GPU: let multi-GPU jobs finish, start no new ones.",
    A.DRAIN_RESET: "Let the GPU's work finish, take no new work, then reset the GPU (nvidia-smi -r).",
    A.DRAIN_AND_HANDOFF: "Drain the node and hand it off for hardware inspection; the same repair again will not hold.",
    A.REPLACE_GPU: "Drain the GPU and return it to the vendor (RMA).",
    A.WATCH: "Nothing now; repeats need a look.",
    A.IGNORE: "No action needed.",
}


class RemediationAction(StrEnum):
    """What a remediation policy has alertd do to the node (rules/remediation.yml)."""

    CORDON = "cordon"
    DRAIN = "drain"
    DRAIN_GPU = "drain-gpu"
    HANDOFF = "handoff"
    DRAIN_HANDOFF = "drain-handoff"
    RMA = "rma"  # open a ticket to return the incident's GPU(s) to the vendor (alertd/app/rma_handoff.py)
    NONE = "none"


R = RemediationAction
REMEDIATION_ACTIONS = tuple(R)
STEP_ACTIONS = frozenset(R) - {R.NONE}  # what a ladder step's policy may do
CORDONING = (R.CORDON, R.DRAIN, R.DRAIN_GPU, R.DRAIN_HANDOFF)  # actions that cordon the node first
DRAINING = (R.DRAIN, R.DRAIN_GPU, R.DRAIN_HANDOFF)  # actions that evict pods after the cordon
HANDING_OFF = (R.HANDOFF, R.DRAIN_HANDOFF)  # actions that label/annotate the node for an external remediator


class HistoryScope(StrEnum):
    """What a repeat_offender history rule counts faults of (rules/history.yml ``scope``)."""

    GPU = "gpu"  # one GPU, by its UUID, across the nodes it moved between
    NODE = "node"  # one node, whichever of its GPUs


class RemediationKind(StrEnum):
    """What a remediation does (``Remediation.kind``); an incident has at most one of each."""

    QUARANTINE = "quarantine"  # take its nodes out (a policy's action)
    UNCORDON = "uncordon"  # give them back once the incident resolved
    RMA_HANDOFF = "rma"  # hand its GPUs back to the vendor, asked by a person (the ladder's RMA step is a quarantine)


class RemediationStep(StrEnum):
    """What one line of a remediation's results did to a node (the UI's and the API's ``results[].step``)."""

    CORDON = "cordon"
    EVICT = "evict"  # one pod of a drain
    DRAIN = "drain"
    HANDOFF = "handoff"
    UNCORDON = "uncordon"
    TICKET = "ticket"  # an RMA handoff's ticket, one per GPU and target


class RemediationState(StrEnum):
    """Where a remediation is (``Remediation.state``, the proposal the UI and Slack show)."""

    PROPOSED = "proposed"
    HELD = "held"  # by the breaker: an override approves it
    APPROVED = "approved"
    RUNNING = "running"
    STOPPING = "stopping"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    CANCELLED = "cancelled"
    SUPERSEDED = "superseded"


RS = RemediationState
WAITING_STATES = (RS.PROPOSED, RS.HELD)  # not approved yet: may be approved, overridden or cancelled
FINAL_STATES = (RS.DONE, RS.FAILED, RS.STOPPED, RS.CANCELLED, RS.SUPERSEDED)


class VerdictKind(StrEnum):
    """The three kinds of history rule (rules/history.yml), each a way the past condemns a GPU or node."""

    REPEAT_OFFENDER = "repeat_offender"
    REPAIR_NOT_HELD = "repair_not_held"
    LEMON_NODE = "lemon_node"


class Group(StrEnum):
    """The correlation groups (``Incident.group``) the engine itself relies on; rules/correlation.yml names
    the others. A group's name begins its incidents' keys."""

    JOB = "job"  # a stalled job's incident (engine/jobs.py)
    DOMAIN = "domain"  # a bad failure domain's incident, whose primary signal is of kind domain (engine/domains.py)
    STORM = "storm"  # a fleet incident (engine/storm/fleets.py)
    WATCHDOG = "watchdog"  # the alerting pipeline's heartbeat (engine/watchdog.py)
    OTHER = "other"  # correlation.yml's catch-all, whose incidents never take in a node's alerts


# Labels that name an alert's node, tried in order: the first naming a node wins. Hostname comes after node:
# dcgm-exporter may set it to its own pod's name, which is never taken as a node (exporter_pod_pattern). host
# and source: log alerts (Loki, Graylog). A site sets its own list (normalize.node_labels).
INSTANCE = "instance"  # Prometheus's scrape target, host:port: names a node only through its address
HOSTNAMES = ("Hostname", "hostname")  # dcgm-exporter's, and node-exporter's Compose/Docker form
LOG_HOST_LABELS = ("host", "source")
NODE_LABELS = ("node", "kubernetes_node", *HOSTNAMES, LOG_HOST_LABELS[0], INSTANCE, LOG_HOST_LABELS[1])
WEAK_NODE_LABELS = frozenset({*HOSTNAMES, INSTANCE})  # may name the exporter pod or its address

# What one alertd process does (alertd serve --role; alertd/app/options.py): engine always runs the engine,
# replica runs it while holding the lease, receiver only receives.
PROCESS_ROLES = ("engine", "replica", "receiver")
# Labels an Xid code may arrive under, tried in order: alertd's own rules' and dcgm-exporter's (its
# DCGM_FI_DEV_XID_ERRORS series carries the code as err_code). A site sets its own list (normalize.xid_labels).
XID_LABELS = ("xid", "err_code")

__all__ = ["ACTION_ADVICE", "CATALOG_ACTIONS", "CORDONING", "COUNTED_DETAILS", "Category", "DETAIL_TITLES",
           "DRAINED_ACTIONS", "DRAINING", "Detail", "EVENT_WORDS", "EVIDENCE_KINDS", "EVIDENCE_MISSING_DETAILS",
           "EventKind", "FAILURE_CATEGORIES", "FINAL_STATES", "GpuAction", "Group", "HANDING_OFF", "HEALTH_EVENT_KINDS",
           "HEALTH_EVENT_WORDS",
           "HISTORY_KINDS", "HOSTNAMES", "HistoryScope", "IB_PORT_DETAILS", "INSTANCE", "KINDS", "KIND_PRIORITY",
           "KIND_SHORT", "KIND_TITLES", "KIND_WORDS", "KindSpec", "LADDER", "LADDER_WORDS", "LOG_HOST_LABELS",
           "MISSING_DETAILS", "NEVER_CAUSE", "NEVER_FAULT", "NEVER_STORM", "NODE_LABELS", "NOT_FAULTS",
           "NOT_HARDWARE_ACTIONS", "Nature", "PROCESS_ROLES", "RECOVERY_ACTIONS", "REMEDIATION_ACTIONS", "REMEDIATION_EVENT",
           "REMEDIATION_KINDS", "RMA_CATEGORIES", "RULED_CATEGORIES", "RULED_KINDS", "RemediationAction",
           "RemediationKind", "RemediationState", "RemediationStep", "SIGNAL_KINDS", "STEP_ACTIONS", "SUSPECT_CHOICES",
           "SUSPECT_KINDS", "SXID_ACTIONS", "SignalKind", "VerdictKind", "WAITING_STATES", "WEAK_NODE_LABELS",
           "XID_LABELS", "detail_is", "signal_is"]
