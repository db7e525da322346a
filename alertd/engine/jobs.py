"""The job as an incident subject: the one definition of it in the engine.

A job's own symptoms (rules: ``correlation.job``; a stall, a straggler) fold into ONE incident per job, keyed
by its cluster, namespace and top owner, whatever node or GPU each alert names. The incident lists the job's
nodes (``nodes``) and GPUs, and keeps what its alerts told beyond their labels in its ``job`` annotation: when
each node's GPUs went idle (``stalled_since``) and each straggler's gap (``value`` against ``job_median``).

A stalled job looks for its culprit after each step: the node incidents on its nodes that began shortly before
the stall (``correlation.job.suspects``), ranked by kind, then by time, nearest the stall first. Its title
names the first ("Job llm/llama (512 GPUs) stalled since 13:58; suspect gpu-b-0117: InfiniBand port mlx5_2
down at 13:57"), or says that none was found and what was looked at. A suspect's own page is taken over by the
job's (it is marked ``job_suspect``; routing treats it as a fleet's child, and the job's first page takes
over an alert it already paged), so a hang pages once. The incident resolves like any other when its alerts
do: the job busy again, or gone.

Its size is what its alerts name (a per-GPU alert's GPU, each alert's node) and, where the service reads the
Kubernetes API, the job's pods there (``job_size``, written by enrichment: their nodes and ``nvidia.com/gpu``
requests), whichever says more: a hang's alerts name nodes only, the API its 512 GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterable, Protocol

from alertd.core.durations import format_duration
from alertd.core.instants import parse_iso
from alertd.core.json_types import JSONObject, JSONValue, as_object, as_text, integer, string_map, strings
from alertd.core.matchers import match_all
from alertd.core.model import FIRING, JOB_SUSPECT, Alert, Event, Incident, Member
from alertd.core.vocabulary import IB_PORT_DETAILS, KIND_WORDS, Detail, EventKind, Group, SignalKind
from alertd.engine.state import EngineState
from alertd.rules.jobs import JobRule
from alertd.rules.ruleset import CorrelationRules

GROUP = Group.JOB.value  # the correlation group of job incidents
FOR_GRACE = timedelta(minutes=5)  # a suspect's alert starts after its rule's for: (5m at most in the shipped rules)
FACTS = "job"  # job incident annotation: {"stalls": {node: since}, "stragglers": {fingerprint: {...}}}
SUSPECTS = "job_suspects"  # job incident annotation: its suspects, first the culprit named in its title
SUSPECT_OF = JOB_SUSPECT  # node incident annotation: the stalled job whose page speaks for it
SIZE = "job_size"  # job incident annotation, from the Kubernetes API: {"gpus": n, "pods": n, "nodes": [...]}
METRICS = {"tensor_active": "tensor activity", "sm_clock": "SM clock", "power": "power", "nvlink": "NVLink traffic",
           "pcie": "PCIe traffic"}
UNITS = {"sm_clock": " MHz", "power": " W", "nvlink": "B/s", "pcie": "B/s"}
CLOCK_REASONS = {"hw_slowdown": "HW slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
                 "sw_thermal_slowdown": "SW thermal slowdown", "hw_power_brake_slowdown": "HW power brake"}


class JobHost(Protocol):
    """What the job logic needs of the correlator (declared here, implemented by engine/correlate.py)."""

    state: EngineState
    rules: CorrelationRules

    def record(self, inc: Incident, event: Event, *, member: str = "", urgent: bool = False) -> None: ...


@dataclass(frozen=True, slots=True)
class Suspect:
    node: str
    incident: str
    kind: str
    began: datetime
    what: str  # "InfiniBand port mlx5_2 down", "Xid 79: GPU fell off the bus (GPU 3)"

    def text(self) -> str:
        return f"{self.node}: {self.what} at {_hhmm(self.began)}"

    def to_json(self) -> JSONObject:
        return {"node": self.node, "incident": self.incident, "kind": self.kind, "began": self.began.isoformat(),
                "what": self.what}

    @classmethod
    def from_json(cls, doc: JSONValue) -> "Suspect | None":
        d = as_object(doc)
        began = parse_iso(as_text(d.get("began")))
        if began is None:
            return None
        return cls(as_text(d.get("node")), as_text(d.get("incident")), as_text(d.get("kind")), began,
                   as_text(d.get("what")))


def is_job(inc: Incident) -> bool:
    return inc.group == GROUP


def _hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


def _when(text: str) -> datetime | None:
    """An annotation's instant: Unix seconds (``{{ $value }}`` of a timestamp()), RFC 3339, or Go's
    ``time.Time`` form that ``humanizeTimestamp`` prints ("2026-12-07 13:58:00 +0000 UTC")."""
    text = text.strip()
    try:
        return datetime.fromtimestamp(float(text), tz=timezone.utc)
    except (ValueError, OverflowError):
        pass
    if text.endswith(" UTC") and "+0000" in text:
        text = text[:-4].replace(" +0000", "+00:00").replace(" ", "T", 1)
    try:
        return parse_iso(text)
    except ValueError:
        return None


def _amount(metric: str, raw: str) -> str:
    """A straggler's reading as people say it: activity in percent, clocks in MHz, traffic in B/s."""
    try:
        value = float(raw)
    except ValueError:
        return raw
    if metric == "tensor_active":
        return f"{value * 100 if value <= 1 else value:.0f} %"
    unit = UNITS.get(metric, "")
    if unit == "B/s":
        for prefix, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if value >= size:
                return f"{value / size:.1f} {prefix}B/s"
        return f"{value:.0f} B/s"
    return f"{value:.0f}{unit}"


class Jobs:
    """Job incidents: their key, what their alerts tell, their suspects and title (see the module doc)."""

    def __init__(self, host: JobHost):
        self.c = host
        self._nodes: dict[tuple[str, str], set[str]] = {}  # (cluster, node) -> open job incidents listing it
        self._named: dict[str, set[str]] = {}  # job key -> nodes whose own incidents' alerts name the job
        self._indexed: EngineState | None = None

    @property
    def rule(self) -> JobRule:
        return self.c.rules.job

    # ----- folding -----

    def key(self, fields: dict[str, str]) -> str | None:
        """The job incident's key for a job symptom (its fields: engine/grouping.py) that names its job, else
        None (it folds by the groups)."""
        rule = self.rule
        if not rule.enabled:
            return None
        if not match_all(rule.match, fields):
            return None
        return self.named(fields)

    def named(self, fields: dict[str, str]) -> str | None:
        """The key of the job an alert's fields name (the rules join it onto node alerts too: an InfiniBand
        port down names the job the node runs), else None."""
        by = self.rule.by
        values = [fields.get(b, "") for b in by]
        if not all(v for b, v in zip(by, values) if b != "cluster"):
            return None
        return GROUP + "|" + "|".join(f"{b}={v}" for b, v in zip(by, values))

    def _names(self, inc: Incident) -> set[str]:
        """The jobs a node incident's alerts name."""
        keys = set()
        own = [b for b in self.rule.by if b not in ("cluster", "node", "namespace")]  # labels, not derived fields
        for m in inc.members.values():
            if not all(m.labels.get(b) for b in own):
                continue  # most node alerts name no job: no fields built for them
            key = self.named({**m.labels, "cluster": m.subject.cluster, "node": m.subject.node,
                              "namespace": m.subject.namespace or m.labels.get("namespace", "")})
            if key is not None:
                keys.add(key)
        return keys

    def saw(self, inc: Incident, alert: Alert) -> None:
        """What a job alert tells beyond its labels, kept on the incident: its node, the stall's start, the
        straggler's gap."""
        node = alert.subject.node
        if node and node not in inc.nodes:
            inc.nodes.append(node)
            self._index().setdefault((alert.subject.cluster, node), set()).add(inc.id)
        facts = dict(as_object(inc.annotations.get(FACTS)))
        notes = alert.annotations
        if self._hung(alert.signal.kind, alert.signal.severity):
            since = _when(notes.get("stalled_since", "")) or alert.starts_at
            stalls = dict(string_map(facts.get("stalls")))
            stalls[node or alert.fingerprint] = since.isoformat()
            facts["stalls"] = dict[str, JSONValue](stalls)
        elif "value" in notes or "job_median" in notes:
            stragglers = dict(as_object(facts.get("stragglers")))
            stragglers[alert.fingerprint] = {"metric": alert.labels.get("metric", ""), "value": notes.get("value", ""),
                                             "median": notes.get("job_median", "")}
            facts["stragglers"] = stragglers
        inc.annotations[FACTS] = facts

    def sized(self, inc: Incident) -> None:
        """The job's pods as the Kubernetes API lists them (``job_size``): their nodes join the job's, so a
        suspect on a node whose own alert has not arrived yet is found."""
        nodes = [n for n in strings(as_object(inc.annotations.get(SIZE)).get("nodes")) if n not in inc.nodes]
        inc.nodes.extend(nodes)
        index = self._index()
        for node in nodes:
            index.setdefault((inc.cluster, node), set()).add(inc.id)

    def gpu_count(self, job: Incident) -> int:
        """The job's GPUs: those its alerts name, or the API's count of its pods' GPUs when that says more."""
        return max(len(job.gpus), integer(as_object(job.annotations.get(SIZE)), "gpus"))

    def _hung(self, kind: str, severity: str) -> bool:
        return match_all(self.rule.hang, {"signal": kind, "severity": severity})

    def hung_members(self, inc: Incident) -> list[Member]:
        """The job's stall alerts firing now; once all resolved, every one it had (its title keeps the stall)."""
        hung = [m for m in inc.members.values() if self._hung(m.signal.kind, m.signal.severity)]
        return [m for m in hung if m.status == FIRING] or hung

    def stalled_since(self, inc: Incident) -> datetime | None:
        hung = self.hung_members(inc)
        if not hung:
            return None
        stalls = string_map(as_object(inc.annotations.get(FACTS)).get("stalls"))
        starts = [parse_iso(stalls.get(m.subject.node or m.fingerprint)) or m.starts_at for m in hung]
        return min(starts)

    # ----- after each step -----

    def _index(self) -> dict[tuple[str, str], set[str]]:
        """(cluster, node) -> the open job incidents listing it; derived, rebuilt for a new engine state."""
        state = self.c.state
        if self._indexed is not state:
            self._indexed, self._nodes, self._named = state, {}, {}
            for inc in state.incidents.values():
                if is_job(inc):
                    for node in inc.nodes:
                        self._nodes.setdefault((inc.cluster, node), set()).add(inc.id)
                elif inc.node and not inc.fleet:
                    for key in self._names(inc):
                        self._named.setdefault(key, set()).add(inc.node)
        return self._nodes

    def settle(self, touched: Iterable[Incident], now: datetime) -> None:
        """Look again for the culprit of every job a step touched, or whose nodes it touched."""
        index, incidents = self._index(), self.c.state.incidents
        jobs: dict[str, Incident] = {}
        for inc in touched:
            if is_job(inc):
                jobs[inc.id] = inc
            elif inc.node and not inc.fleet:
                ids = set(index.get((inc.cluster, inc.node), ()))
                for key in self._names(inc):
                    self._named.setdefault(key, set()).add(inc.node)
                    ids.add(self.c.state.by_key.get(key, ""))
                for job_id in ids:
                    if job_id in incidents:
                        jobs[job_id] = incidents[job_id]
        for job in jobs.values():
            if job.is_open:
                self._culprit(job, now)

    def _culprit(self, job: Incident, now: datetime) -> None:
        """The job's suspects as they are now, and its title: a throttle on a straggler's GPU, an Xid on one
        of its nodes may come after the job's own alerts."""
        since = self.stalled_since(job)
        hung = since is not None and any(m.status == FIRING for m in self.hung_members(job))
        found = self.suspects(job, since) if since is not None and hung else []
        listed = [s.to_json() for s in found]
        title = job.title
        if not hung or listed == job.annotations.get(SUSPECTS, []):  # a stall over keeps what it found
            job.title = self.title(job, now)
            if job.title != title:
                self.c.record(job, job.add_event(now, EventKind.RETITLED, job.title))
            return
        before = {as_text(as_object(s).get("incident")) for s in _list(job.annotations.get(SUSPECTS))}
        job.annotations[SUSPECTS] = list[JSONValue](listed)
        job.title = self.title(job, now)
        if found:
            self.c.record(job, job.add_event(now, EventKind.SUSPECTS, "suspects: " + "; ".join(s.text() for s in found)))
        for suspect in found:
            if suspect.incident not in before:
                self._take_over(job, suspect, now)

    def _take_over(self, job: Incident, suspect: Suspect, now: datetime) -> None:
        """The job's page speaks for its suspect's (a suspect already in a fleet keeps the fleet's)."""
        inc = self.c.state.incidents.get(suspect.incident)
        if inc is None or inc.parent_id or inc.annotations.get(SUSPECT_OF) or suspect.kind == SignalKind.STRAGGLER:
            return
        inc.annotations[SUSPECT_OF] = job.id
        if inc.id not in job.children:
            job.children.append(inc.id)
        self.c.record(inc, inc.add_event(now, EventKind.SUSPECT_OF_JOB, f"suspect of {job.title} ({job.id}): its page "
                                                                "speaks for this node's"))

    def suspects(self, job: Incident, since: datetime) -> list[Suspect]:
        """Node incidents on the job's nodes (or naming it), and its own stragglers, that began within the
        suspects' span of the stall: those that began by the stall first, then by kind (the rule's order), then
        nearest the stall first."""
        rule, state = self.rule, self.c.state
        lo, hi = since - rule.before, since + rule.after
        found: list[Suspect] = []
        named = self._named.get(job.key, set())
        for node in [*job.nodes, *sorted(named.difference(job.nodes))]:
            for inc_id in state.by_node.get((job.cluster, node), ()):
                inc = state.incidents.get(inc_id)
                if inc is not None and not inc.fleet and not is_job(inc):
                    found.extend(self._of(inc, node, inc.members.values(), lo, hi))
        slowed = [m for m in job.members.values() if m.signal.kind == SignalKind.STRAGGLER]
        found.extend(self._of(job, "", slowed, lo, hi))
        order = {kind: i for i, kind in enumerate(rule.kinds)}
        # a suspect found before whose incident has resolved since (its port came back) stays one
        gone = [s for doc in _list(job.annotations.get(SUSPECTS)) if (s := Suspect.from_json(doc)) is not None
                and s.kind in order and s.incident not in state.incidents and s.incident != job.id]
        found.extend(gone)
        # A cause comes before its effect: what began by the stall (its alert's for: allowed) ranks first
        return sorted(found, key=lambda s: (s.began > since + FOR_GRACE, order[s.kind],
                                            abs((s.began - since).total_seconds()), s.node))

    def _of(self, inc: Incident, node: str, members: Iterable[Member], lo: datetime, hi: datetime) -> list[Suspect]:
        """The incident's best member as a suspect (its kind first in the rule's order), if one began in span."""
        order = {kind: i for i, kind in enumerate(self.rule.kinds)}
        out: list[Suspect] = []
        fit = [m for m in members if m.signal.kind in order and not m.response and lo <= m.starts_at <= hi]
        if is_job(inc):  # the job's own stragglers: each GPU apart
            return [Suspect(m.subject.node, inc.id, m.signal.kind, m.starts_at, self._what(m)) for m in fit]
        if fit:
            best = min(fit, key=lambda m: (order[m.signal.kind], m.starts_at))
            out.append(Suspect(node, inc.id, best.signal.kind, best.starts_at, self._what(best)))
        return out

    @staticmethod
    def _what(m: Member) -> str:
        sig, labels = m.signal, m.labels
        gpu = m.subject.gpu.index if m.subject.gpu is not None and m.subject.gpu.index else ""
        if sig.detail in IB_PORT_DETAILS and labels.get("device"):
            port = labels.get("port", "")
            where = labels["device"] + (f" port {port}" if port and port != "1" else "")
            return f"InfiniBand port {where} {'down' if sig.detail == Detail.IB_PORT_DOWN else 'flapping'}"
        if sig.kind == SignalKind.STRAGGLER:
            return f"GPU {gpu} straggling" if gpu else "a GPU straggling"
        return sig.title + (f" (GPU {gpu})" if gpu else "")

    # ----- what the incident says -----

    def title(self, job: Incident, now: datetime | None = None) -> str:
        name = f"{job.namespace}/{_owner(job)}"
        gpus = self.gpu_count(job)
        size = f"{gpus} GPUs" if gpus > 1 else f"{len(job.nodes)} node{'s' * (len(job.nodes) != 1)}"
        since = self.stalled_since(job)
        if since is not None:
            head = f"Job {name} ({size}) stalled since {_hhmm(since)}"
            listed = _list(job.annotations.get(SUSPECTS))
            if not listed:
                span = f"{_hhmm(since - self.rule.before)} to {_hhmm(since + self.rule.after)}"
                looked = ", ".join(KIND_WORDS.get(k, k) for k in self.rule.kinds[:6])
                return f"{head}; no suspect: nothing on its {len(job.nodes)} node(s) from {span} ({looked}, ...)"
            first = as_object(listed[0])
            began = parse_iso(as_text(first.get("began")))
            more = f" (+{len(listed) - 1} more)" if len(listed) > 1 else ""
            return (f"{head}; suspect {as_text(first.get('node'))}: {as_text(first.get('what'))}"
                    f"{' at ' + _hhmm(began) if began else ''}{more}")
        return self._straggler_title(job, name, now or job.updated_at)

    def _straggler_title(self, job: Incident, name: str, now: datetime) -> str:
        stragglers = as_object(as_object(job.annotations.get(FACTS)).get("stragglers"))
        slowed = [m for m in job.members.values() if m.signal.kind == SignalKind.STRAGGLER]
        if not slowed:
            return f"Job {name}: {job.primary.title if job.primary else 'job alerts'}"
        firing = [m for m in slowed if m.status == FIRING]
        slow = min(firing or slowed, key=lambda m: m.starts_at)
        gpu = slow.subject.gpu.index if slow.subject.gpu is not None else ""
        facts = as_object(stragglers.get(slow.fingerprint))
        metric = as_text(facts.get("metric")) or slow.labels.get("metric", "")
        gap = ""
        if facts.get("value") or facts.get("median"):
            gap = (f": {METRICS.get(metric, metric)} {_amount(metric, as_text(facts.get('value')))} against the "
                   f"job's median {_amount(metric, as_text(facts.get('median')))}")
        lasted = now - slow.starts_at
        reason = self._clock_reason(job.cluster, slow)
        others = f" (+{len(firing) - 1} more GPUs)" if len(firing) > 1 else ""
        return (f"GPU {gpu or '?'} on {slow.subject.node or '?'} slows {name}{gap}"
                f"{' for ' + format_duration(lasted) if lasted > timedelta(0) else ''}"
                f"{' (' + reason + ')' if reason else ''}{others}")

    def _clock_reason(self, cluster: str, slow: Member) -> str:
        """The clock-event reason of a throttle alert firing on the straggler's GPU, as people say it."""
        state = self.c.state
        gpu = slow.subject.gpu
        if gpu is None:
            return ""
        for inc_id in state.by_node.get((cluster, slow.subject.node), ()):
            inc = state.incidents.get(inc_id)
            for m in inc.members.values() if inc is not None else ():
                other = m.subject.gpu
                if m.signal.kind == SignalKind.THERMAL and m.status == FIRING and other is not None and \
                        other.key() and (other.key() == gpu.key() or other.index == gpu.index):
                    reasons = [CLOCK_REASONS.get(r, r) for r in m.signal.detail.split(",") if r in CLOCK_REASONS]
                    if reasons:
                        return ", ".join(reasons)
        return ""


def _owner(job: Incident) -> str:
    """The job's name: the last field of its key (owner_name by default)."""
    return job.key.rsplit("=", 1)[-1]


def _list(value: object) -> list[JSONValue]:
    return list(value) if isinstance(value, list) else []


__all__ = ["FACTS", "GROUP", "SIZE", "SUSPECTS", "SUSPECT_OF", "Jobs", "Suspect", "is_job"]
