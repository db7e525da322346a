"""Kernel log lines -> incident evidence, and the Xid in them that should classify the incident.

Each line becomes one ``log_evidence`` entry (time, host, the line, and the
parsed NVRM Xid with its GPU when there is one). Lines with an Xid are what
people need, so they are kept first when an incident has more lines than it
may show. An Xid found in the log can upgrade the incident (a missing-metrics
alert that turns out to be an Xid 79), see :func:`upgrade_signal`.
"""
from __future__ import annotations

from typing import Iterable

from alertd.core.findings import EvidenceLine
from alertd.core.model import Incident, Severity, Signal, signal_rank
from alertd.core.vocabulary import SignalKind
from alertd.enrich.logs import LogLine
from alertd.enrich.timestamps import iso_millis
from alertd.gpu.catalog import XidCatalog
from alertd.gpu.nvrm import line_xids, pci_to_uuid
from alertd.gpu.pci import normalize_pci
from alertd.gpu.recovery import XID_RECOVERY
from alertd.gpu.sxid import SxidCatalog, find_sxid


def evidence_from_lines(lines: Iterable[LogLine], node: str, gpus: Iterable[dict[str, str]] = (),
                        limit: int = 50) -> list[EvidenceLine]:
    """Log lines -> evidence entries; Xid lines are kept first when there are more than ``limit``."""
    lines = list(lines)
    uuids = pci_to_uuid((ln.message for ln in lines), gpus)
    out: list[EvidenceLine] = []
    xids = line_xids((ln.host, ln.message) for ln in lines)
    for ln, xid in zip(lines, xids):
        sxid = find_sxid([ln.message]) if xid is None and "SXid" in ln.message else None
        out.append(EvidenceLine(
            time=iso_millis(ln.time) if ln.time else None,  # fixed width: sorts as text
            host=ln.host or node,
            node=node,
            line=ln.message if len(ln.message) <= 500 else ln.message[:499] + "…",
            xid=xid.xid if xid else None,
            pci=xid.pci if xid else None,
            gpu_uuid=uuids.get(xid.pci) if xid and xid.pci else None,
            pid=xid.pid if xid else None,
            process=(xid.process or None) if xid else None,
            gpu_instance=xid.gpu_instance if xid else None,
            compute_instance=xid.compute_instance if xid and xid.gpu_instance is not None else None,
            pod=str(ln.fields.get("kubernetes_pod_name") or ""),
            # an NVSwitch fault: the switch, never a GPU
            sxid=sxid.code if sxid else None, switch=sxid.key if sxid else "", fatal=bool(sxid and sxid.fatal)))
    return cap_evidence(out, limit)


def cap_evidence(entries: list[EvidenceLine], limit: int) -> list[EvidenceLine]:
    """At most ``limit`` entries, Xid and SXid lines first, then in time order."""
    if len(entries) <= limit:
        return entries
    xids = [e for e in entries if e.xid or e.sxid]
    rest = [e for e in entries if not (e.xid or e.sxid)]
    keep = xids[:limit] + rest[: max(0, limit - len(xids))]
    return sorted(keep, key=lambda e: e.time or "")


def upgrade_signal(evidence: Iterable[EvidenceLine], inc: Incident, catalog: XidCatalog,
                   gpus: Iterable[dict[str, str]], sxids: SxidCatalog | None = None) -> Signal | None:
    """The Xid (or, with ``sxids``, the NVSwitch SXid) from the log that should classify the incident, or None.

    ``gpus`` are the GPUs the incident's alerts named on the node: when there are
    any, only Xids of those GPUs count (an SXid is the node's switch: it counts for
    an incident with no Xid). An Xid 154 reads what the GPU asks for from its line.
    A signal the incident already has, or one that does not outrank its current
    primary signal, changes nothing."""
    best: Signal | None = None
    for sig in _log_signals(evidence, catalog, list(gpus), sxids if not inc.xids else None):
        if sig.severity == Severity.INFO:
            continue
        rank = (signal_rank(sig), not sig.fold_into_previous)
        if best is None or rank > (signal_rank(best), not best.fold_into_previous):
            best = sig
    if best is None:
        return None
    if best.kind == SignalKind.SXID and inc.primary is not None and inc.primary.switch == best.switch:
        return None
    if not inc.xids:
        return best
    if best.xid in inc.xids and not (best.xid == XID_RECOVERY and _asks_more(best, inc)):
        return None
    current = inc.primary
    if current is None or signal_rank(best) > signal_rank(current):
        return best
    return None


def _log_signals(evidence: Iterable[EvidenceLine], catalog: XidCatalog, gpus: list[dict[str, str]],
                 sxids: SxidCatalog | None) -> Iterable[Signal]:
    pcis = {normalize_pci(g.get("pci_bus_id", "")) for g in gpus} - {""}
    uuids = {g.get("uuid") for g in gpus} - {None, ""}
    for e in evidence:
        if e.xid:
            # a GPU-specific incident (one naming GPUs): only Xids of its GPUs, or naming none, count
            if not (pcis or uuids) or not e.pci or e.pci in pcis or e.gpu_uuid in uuids:
                yield catalog.signal_for(e.xid, e.line, detail="from kernel log")
        elif sxids is not None and e.sxid:
            line = find_sxid([e.line])  # read again: the stored fatal flag cannot say "the line names none"
            if line is not None:
                yield sxids.signal(line, detail="", basis="kernel log")


def _asks_more(sig: Signal, inc: Incident) -> bool:
    """An Xid 154 line that asks for more than the incident's Xid 154 said (its alert had no value)."""
    current = inc.primary
    return current is None or current.xid != XID_RECOVERY or signal_rank(sig) > signal_rank(current)


__all__ = ["evidence_from_lines", "cap_evidence", "upgrade_signal"]
