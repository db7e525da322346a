"""RMA candidates: which GPUs to return to the vendor, from their incident history (the rules of an
``rma`` section, and the history rules marked ``rma`` in rules/history.yml: alertd/rules/history.py).

Pure: rules and GPU history rows in, candidates with their evidence out.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, ClassVar, Collection, Mapping, Protocol, Sequence, TypedDict

import msgspec
from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.model import iso
from alertd.core.sections import Section, written
from alertd.core.vocabulary import HISTORY_KINDS, SignalKind
from alertd.core.yamlio import Path_
from alertd.rules.checker import Checker
from alertd.rules.declared import TextSpan, decode
from alertd.schemas.declared import in_order, word



def _values(row: JSONObject, key: str) -> list[JSONValue]:
    """A list member of a history row (xids, signals, alertnames); absent is empty."""
    got = row.get(key)
    return got if isinstance(got, list) else []


def _text(row: JSONObject, key: str) -> str:
    return str(row.get(key) or "")


def _seq(row: JSONObject) -> int:
    seq = row.get("seq")
    return seq if isinstance(seq, int) else 0


class ConditionDoc(TypedDict, total=False):
    """A condition as history.schema.json admits it (the history section reads its conditions through it)."""

    xid: int
    signal: str
    alertname: str


HistoryKind = Annotated[str, word(in_order(SignalKind, HISTORY_KINDS))]


# The history rules build conditions and RMA rules of their own (alertd/rules/history.py): to the type checker
# this field is what they pass, a timedelta; msgspec reads it as declared.
if TYPE_CHECKING:
    Window = timedelta
else:
    Window = TextSpan


class Condition(Section, frozen=True, omit_defaults=True):
    """What one incident of the GPU must show: an Xid code, a signal kind, or an alert name (all given keys must
    hold)."""

    SCHEMA: ClassVar[dict[str, object]] = {"minProperties": 1}

    xid: Annotated[int, Meta(ge=1, description="An Xid code reported for this GPU, e.g. 79.")] = 0  # 0: any
    signal: Annotated[HistoryKind, Meta(description="A signal kind reported for this GPU (rules/signals.yml).")] = \
        msgspec.field(default_factory=str)
    alertname: Annotated[str, Meta(min_length=1, description=(
        "An alert of this name fired for this GPU, e.g. GPURowRemapFailure."))] = ""

    def matches(self, row: JSONObject) -> bool:
        return self.matches_facts(_values(row, "xids"), _values(row, "signals"), _values(row, "alertnames"))

    def matches_facts(self, xids: Collection[object], signals: Collection[object],
                      alertnames: Collection[object]) -> bool:
        """Whether an incident showing these Xids, signal kinds and alert names meets the condition."""
        return ((not self.xid or self.xid in xids) and (not self.signal or self.signal in signals)
                and (not self.alertname or self.alertname in alertnames))

    def describe(self) -> str:
        parts = [f"Xid {self.xid}" if self.xid else "", f"signal {self.signal}" if self.signal else "",
                 f"alert {self.alertname}" if self.alertname else ""]
        return " and ".join(p for p in parts if p)


class RmaRule(Section, frozen=True):
    SCHEMA: ClassVar[dict[str, object]] = {"oneOf": [{"required": ["any_of"]}, {"required": ["all_of"]}]}

    name: Annotated[str, Meta(pattern="^[a-z0-9][a-z0-9_.-]*$", description="Identifier, shown on each candidate.")]
    description: Annotated[str, Meta(description=(
        "Why this makes a GPU an RMA candidate (shown in the UI and exports)."))] = ""
    window: Annotated[Window, Meta(description=(
        "Prometheus duration: only incidents opened this long ago or later count (default 30d)."))] = \
        written(TextSpan.from_config, "30d")
    any_of: Annotated[tuple[Condition, ...], Meta(min_length=1, description=(
        "Count the GPU's incidents matching any of these conditions; min_incidents of them make a candidate."))] = ()
    all_of: Annotated[tuple[Condition, ...], Meta(min_length=2, description=(
        "Every condition must be met by some incident of the GPU inside the window (e.g. Xid 48 and Xid 63)."))] = ()
    min_incidents: Annotated[int, Meta(ge=1, description=(
        "With any_of: how many matching incidents it takes (default 1)."))] = 1

    def evidence(self, rows: list[JSONObject], since: str) -> list[JSONObject]:
        """The incidents that make the GPU match, or [] when it does not. ``rows``: GPU history rows (uuid,
        incident, seq, openedAt, xids, signals, alertnames, ...)."""
        recent = [r for r in rows if _text(r, "openedAt") >= since]
        if self.all_of:
            hits = [[r for r in recent if c.matches(r)] for c in self.all_of]
            if not all(hits):
                return []
            return sorted({_text(r, "incident"): r for group in hits for r in group}.values(), key=_seq)
        matching = [r for r in recent if any(c.matches(r) for c in self.any_of)]
        return matching if len(matching) >= self.min_incidents else []


class RmaFile(Section, frozen=True):
    """Rules (rules/rma.yml) that name GPUs to return to the vendor, from their incident history. A GPU matching any
    rule is a candidate; the incidents that made it match are its evidence."""

    rma: Annotated[tuple[RmaRule, ...], Meta(min_length=1, description=(
        "RMA rules; names must be unique across rule files."))]


DEFAULT_WINDOW: timedelta = RmaRule(name="default").window

@dataclass(slots=True)
class Candidate:
    gpu: JSONObject  # the GPU's inventory document (uuid, serial, pci_bus_id, model, cluster, node, ...)
    rules: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    evidence: list[JSONObject] = field(default_factory=list)

    @property
    def uuid(self) -> str:
        return _text(self.gpu, "uuid")

    def to_dict(self) -> JSONObject:
        return {"uuid": self.gpu["uuid"], "gpu": self.gpu, "rules": list(self.rules),
                "reasons": list(self.reasons),
                "evidence": [{k: r.get(k) for k in EVIDENCE_FIELDS} for r in self.evidence]}


EVIDENCE_FIELDS = ("incident", "openedAt", "first", "cluster", "node", "status", "severity", "title", "xids", "signals",
                   "alertnames")


class ProblemSink(Protocol):
    def problem(self, path: Path_, message: str) -> None: ...


def report_duplicate_names(doc: Sequence[Mapping[str, object]], section: str, what: str, check: ProblemSink) -> None:
    """Each entry of a section whose name an earlier entry took, reported at its name."""
    names: set[object] = set()
    for i, entry in enumerate(doc):
        if entry["name"] in names:
            check.problem((section, i, "name"), f"duplicate {what} rule name {entry['name']!r}")
        names.add(entry["name"])


def parse_rma(doc: list[JSONObject], check: Checker) -> tuple[RmaRule, ...]:
    """Schema-valid ``rma`` section -> rules; duplicate names and bad windows are reported with positions."""
    report_duplicate_names(doc, "rma", "RMA", check)
    return decode(RmaFile, {"rma": doc}, (), check).rma


def longest_window(rules: tuple[RmaRule, ...]) -> timedelta:
    return max((r.window for r in rules), default=DEFAULT_WINDOW)


def evaluate(rules: tuple[RmaRule, ...], history: list[JSONObject], gpus: dict[str, JSONObject],
             now: datetime) -> list[Candidate]:
    """Every GPU that matches at least one rule, most evidence first."""
    by_gpu: dict[str, list[JSONObject]] = {}
    for row in history:
        by_gpu.setdefault(_text(row, "uuid"), []).append(row)
    out: list[Candidate] = []
    for uuid, rows in by_gpu.items():
        cand = Candidate(gpus.get(uuid) or {"uuid": uuid})
        seen: dict[str, JSONObject] = {}
        for rule in rules:
            evidence = rule.evidence(rows, iso(now - rule.window) or "")
            if evidence:
                cand.rules.append(rule.name)
                cand.reasons.append(rule.description or rule.name)
                seen.update((_text(r, "incident"), r) for r in evidence)
        if cand.rules:
            cand.evidence = sorted(seen.values(), key=_seq)
            out.append(cand)
    out.sort(key=lambda c: (-len(c.rules), -len(c.evidence), c.uuid))
    return out


CSV_COLUMNS = ("uuid", "serial", "pci_bus_id", "model", "cluster", "node", "rules", "reasons", "incidents", "xids",
               "first_evidence", "last_evidence")


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP "CSV Injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """A cell no spreadsheet runs: text that would start a formula gets a leading ``'`` (OWASP's advice), which
    spreadsheets show as text. Labels come from alerts, so a node named ``=HYPERLINK(...)`` is only text."""
    text = str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def to_csv(candidates: list[Candidate]) -> str:
    """One line per GPU, for a vendor ticket; every cell passes csv_cell."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(CSV_COLUMNS)
    for c in candidates:
        g = c.gpu
        xids = sorted({x for r in c.evidence for x in _values(r, "xids") if isinstance(x, int)})
        w.writerow(map(csv_cell, [g.get("uuid", ""), g.get("serial", ""), g.get("pci_bus_id", ""), g.get("model", ""),
                    g.get("cluster", ""), g.get("node", ""), ";".join(c.rules), "; ".join(c.reasons),
                    ";".join(_text(r, "incident") for r in c.evidence), ";".join(map(str, xids)),
                    c.evidence[0]["openedAt"] if c.evidence else "", c.evidence[-1]["openedAt"] if c.evidence else ""]))
    return buf.getvalue()
