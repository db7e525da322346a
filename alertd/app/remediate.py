"""Remediation in the running service: proposals after each engine step, approvals from Slack, the UI and
the API, and the elected engine's executor.

Proposals are made by the leader after a step commits (off the step's path): an incident a policy matches
gets one proposal with its blast radius; a node incident folded into a fleet incident gives its waiting
proposal up; a resolved incident whose nodes alertd cordoned gets an uncordon proposal. Approvals are
compare-and-set writes to the store from whichever replica the click reached. The executor runs on the
leader only: it claims an approved remediation with a fenced write (the lease token must still hold), acts,
and records the result with another fenced write; a new leader finds a remediation a dead leader left
``running`` and runs it again, which the idempotent writes (alertd/remediation/kube.py) make harmless.
Every transition is on the incident's timeline (same transaction) and in the audit log, with its actor.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from datetime import datetime
from typing import Callable, Iterable, Protocol

from alertd.core.incident_commands import Annotate, IncidentCommand
from alertd.core.verbs import remediation_verbs
from alertd.core.findings import RemediationFinding
from alertd.core.json_types import JSONObject, text
from alertd.core.actor import Actor
from alertd.core.model import CLOSED, Change, Event, Incident
from alertd.core.vocabulary import REMEDIATION_EVENT, EventKind
from alertd.enrich.settings import KubeSettings
from alertd.ha.commands import CommandTimeout
from alertd.remediation import decide
from alertd.remediation.blast import summary
from alertd.app.remediate_run import execute
from alertd.remediation.kube import ApiError, KubeRemediator
from alertd.remediation.model import (APPROVED, DONE, FAILED, PROPOSED, QUARANTINE, RMA_HANDOFF, RUNNING, STOPPED,
                                      STOPPING, UNCORDON, WAITING, Remediation)
from alertd.rules.remediation import LADDER_POLICY, RMA, RemediationPolicy
from alertd.app.rma_handoff import RmaHandoff

log = logging.getLogger(__name__)
POLL = 1.0  # seconds between the executor's looks for approved work
MAX_ATTEMPTS = 3  # an unreachable API server is tried this many times before the remediation fails


class RemediationStore(Protocol):
    """The store as remediation uses it: the remediations (alertd/store/remediations.py) and the incidents."""

    async def get_incident(self, incident_id: str) -> Incident | None: ...

    async def get_remediation(self, rem_id: str) -> JSONObject | None: ...

    async def list_remediations(self, *, incident_id: str | None = None, states: tuple[str, ...] = (),
                                cluster: str | None = None, limit: int = 500) -> list[JSONObject]: ...

    async def put_remediation(self, doc: JSONObject, expect: int | None, event: JSONObject | None = None,
                              *, fenced: bool = False) -> bool: ...


class HasRemediationPolicy(Protocol):
    """The rules as loaded now (a reload replaces them): the remediation policies."""

    @property
    def remediation(self) -> RemediationPolicy: ...


class RemediationHost(Protocol):
    """The service as remediation sees it: its store, clock and rules, whether it leads, and the two writes
    every transition makes besides its row (the audit entry, the incident's ``remediation`` annotation)."""

    @property
    def store(self) -> RemediationStore: ...

    @property
    def rules(self) -> HasRemediationPolicy: ...

    @property
    def leading(self) -> bool: ...

    def clock(self) -> datetime: ...

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None: ...

    async def run(self, command: IncidentCommand) -> list[Change]: ...


class RemediationRunner:
    def __init__(self, svc: RemediationHost, kube: KubeRemediator | None, *, holder: str = "engine",
                 monotonic: Callable[[], float] | None = None, tickets: RmaHandoff | None = None):
        self.svc, self.kube, self.holder, self.tickets = svc, kube, holder, tickets
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self.monotonic = monotonic or (lambda: asyncio.get_running_loop().time())
        self._attempts: dict[str, int] = {}
        self._wake = asyncio.Event()  # an approval on this replica: look at once rather than at the next poll
        self._said_no_kube = False
        self._running: set[str] = set()  # remediations this process runs now

    @classmethod
    def from_config(cls, svc: RemediationHost, kube: KubeSettings | None, holder: str = "engine",
                    tickets: RmaHandoff | None = None) -> "RemediationRunner":
        """``kube``: the ``enrich.kube`` section (None: absent or disabled); alertd acts with the credentials
        enrichment reads with. ``tickets``: where an approved RMA step opens its tickets (section ``rma``)."""
        return cls(svc, KubeRemediator(kube) if kube is not None else None, holder=holder, tickets=tickets)

    @property
    def policy(self) -> RemediationPolicy:
        return self.svc.rules.remediation

    # ----- writes, each with its timeline event and audit entry -----

    async def _write(self, rem: Remediation, expect: int | None, kind: str, text: str, actor: str, via: str,
                     *, fenced: bool = False) -> bool:
        """One compare-and-set transition, its timeline event and its audit entry. The event of an open
        incident goes through the engine with the ``remediation`` annotation (what Slack and the UI show);
        a resolved incident's is written with the row."""
        rem = dataclasses.replace(rem, version=(expect or 0) + 1, updated_at=self.svc.clock())
        inc = await self.svc.store.get_incident(rem.incident_id)
        open_ = inc is not None and inc.status != CLOSED
        event = None if open_ else Event(self.svc.clock(), kind, text, actor, {"remediation": rem.id}).to_dict()
        ok = bool(await self.svc.store.put_remediation(rem.to_dict(), expect, event, fenced=fenced))
        await self.svc.audit(actor, kind, rem.incident_id, via, "ok" if ok else "refused: changed meanwhile", text)
        if ok and open_:
            shown = RemediationFinding(id=rem.id, kind=rem.kind, action=rem.action, state=rem.state,
                                       nodes=tuple(rem.nodes[:20]), dry_run=rem.dry_run, text=text,
                                       approvals=tuple(a["actor"] for a in rem.approvals),
                                       approvals_needed=rem.approvals_needed).to_json()
            try:
                await self.svc.run(Annotate(rem.incident_id, "remediation", shown, kind, text, actor))
            except CommandTimeout as exc:  # the command stays queued: the next leader writes the event
                log.warning("timeline event %s of %s deferred: %s", kind, rem.id, exc)
        return ok

    # ----- proposals (leader, after each step) -----

    def why_none(self, inc: Incident) -> str:
        """Why an incident a policy matches has no proposal: alertd has no Kubernetes API to act through."""
        chosen = decide.policy_for(inc, self.policy, decide.escalation_of(inc))
        if self.kube is not None or chosen is None:
            return ""
        return (f"Policy {chosen.name!r} ({chosen.action}) matches this incident, but alertd has no Kubernetes API "
                "to act through: enrich.kube is not configured, so nothing is proposed (docs/remediation.md).")

    def submit(self, changes: Iterable[Change]) -> None:
        batch = list(changes)
        for inc in (c.incident for c in batch if self.kube is None and not self._said_no_kube):
            why = self.why_none(inc)
            if why:  # said once: every later incident would say the same
                self._said_no_kube = True
                log.info("no remediation proposed for %s: %s", inc.id, why)
        if self.kube is None or not self.policy.proposes or not batch:
            return
        task = asyncio.get_running_loop().create_task(self._propose_all(batch), name="alertd-remediation-propose")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propose_all(self, changes: list[Change]) -> None:
        async with self._lock:
            for change in changes:
                try:
                    await self._propose_one(change)
                except Exception:  # one incident's failure must not stop the others'
                    log.exception("remediation proposal for %s failed", change.incident.id)

    async def _propose_one(self, change: Change) -> None:
        inc, store, now = change.incident, self.svc.store, self.svc.clock()
        assert self.kube is not None
        if taker := decide.taken_by(inc):
            doc = await store.get_remediation(decide.remediation_id(inc.id, QUARANTINE))
            prior = Remediation.from_dict(doc) if doc else None
            gone = decide.supersede(prior, taker, now) if prior is not None else None
            if gone is not None and prior is not None:
                await self._write(gone, prior.version, EventKind.REMEDIATION_SUPERSEDED, gone.reason, "alertd", "engine")
            return
        if inc.status == CLOSED:
            await self._propose_uncordon(inc.id, now)
            return
        escalation = decide.escalation_of(inc)
        chosen = decide.policy_for(inc, self.policy, escalation)
        if chosen is None or not self.kube.applies_to(inc.cluster):
            return  # no policy, or another cluster than the one alertd's credentials reach
        old_doc = await store.get_remediation(decide.remediation_id(inc.id, QUARANTINE))
        old = Remediation.from_dict(old_doc) if old_doc is not None else None
        nodes = decide.target_nodes(inc)
        if old is not None and not (old.state in WAITING and sorted(old.nodes) != nodes):
            return  # proposed already; only a waiting fleet proposal follows its fleet as nodes fold in
        try:
            view = await self.kube.view(now)
            blast = await self.kube.blast(chosen.action, nodes)
        except ApiError as exc:
            view, blast = decide.ClusterView(), {"error": f"cluster not readable: {exc}"}
        rem = decide.propose(inc, chosen, self.policy, view, blast, now)
        text = (f"{'dry run: ' if rem.dry_run else ''}proposes {rem.action} of {len(rem.nodes)} node(s) "
                f"{', '.join(rem.nodes[:10])}{' and more' if len(rem.nodes) > 10 else ''} (policy {rem.policy}): "
                f"{summary(blast)}" + (f"; HELD: {rem.reason}" if rem.reason else "")
                + (f"; needs {rem.approvals_needed} approvers" if rem.approvals_needed > 1 else "")
                + (f"; ladder: {escalation.line}" if escalation is not None and rem.policy.startswith(LADDER_POLICY) else ""))
        if old is None:
            if await self._write(rem, None, EventKind.REMEDIATION_PROPOSED, text, "alertd", "engine") and rem.state == APPROVED:
                self._wake.set()
        else:  # the fleet grew: what was approved for fewer nodes does not count for more
            await self._write(rem, old.version, EventKind.REMEDIATION_UPDATED, text + "; approvals reset", "alertd", "engine")

    async def _propose_uncordon(self, incident_id: str, now: datetime) -> None:
        assert self.kube is not None
        doc = await self.svc.store.get_remediation(decide.remediation_id(incident_id, QUARANTINE))
        if doc is None or doc["state"] != DONE or doc.get("dryRun"):
            return
        if await self.svc.store.get_remediation(decide.remediation_id(incident_id, UNCORDON)):
            return
        rem, why = decide.propose_uncordon(Remediation.from_dict(doc), await self.kube.view(now), self.policy, now)
        if rem is not None:
            await self._write(rem, None, EventKind.REMEDIATION_PROPOSED,
                              f"proposes uncordon of {', '.join(rem.nodes)} (cordoned by alertd for {incident_id})"
                              + (f"; {why}" if why else ""), "alertd", "engine")
        elif why:
            await self.svc.audit("alertd", EventKind.REMEDIATION_NOT_PROPOSED, incident_id, "engine", "ok", why)

    # ----- people (Slack, UI, API) -----

    async def act(self, incident_id: str, verb: str, who: Actor, via: str, *, kind: str = "") -> str:
        """approve / override / cancel / stop the incident's remediation; "" when done, else why not.

        ``who``: the authenticated principal, which approvals count, and any name it stated."""
        if verb not in remediation_verbs():
            return f"unknown remediation action {verb!r}"
        rem = await self._current(incident_id, kind)
        if rem is None:
            return f"{incident_id} has no remediation waiting"
        now, actor = self.svc.clock(), who.shown
        if verb in ("approve", "override"):
            new, why = decide.approve(rem, who, via, now, override=verb == "override")
            text = (f"{verb}d by {actor} ({len(new.approvals)} of {new.approvals_needed} approvals)"
                    + (" (dry run: nothing will be done)" if new.dry_run and new.state == APPROVED else ""))
        elif verb == "cancel":
            new, why = decide.cancel(rem, now, reason=f"cancelled by {actor}")
            text = f"cancelled by {actor}"
        elif verb == "stop":
            new, why = decide.stop(rem, now, reason=f"stopped by {actor}")
            text = f"stop asked by {actor}"
        else:  # declared in alertd/core/verbs.py, but not decided here
            return f"remediation action {verb!r} is not carried out by this version"
        if why:
            await self.svc.audit(actor, REMEDIATION_EVENT + verb, incident_id, via, f"refused: {why}")
            return why
        ok = await self._write(new, rem.version, REMEDIATION_EVENT + verb, f"{rem.kind} {rem.action}: {text}", actor, via)
        if ok and new.state == APPROVED:
            self._wake.set()
        return "" if ok else f"{rem.id} changed meanwhile; look again"

    @property
    def rma_targets(self) -> list[str]:
        """Where an RMA handoff opens its tickets; [] when no ticket target is configured."""
        return self.tickets.targets if self.tickets is not None and self.tickets.systems else []

    async def rma_handoff(self, incident_id: str, who: Actor, via: str) -> str:
        """A person hands the incident's GPU(s) over for RMA: the waiting RMA proposal is approved, or one is
        proposed with this principal's approval. The policy's approvals and dry run hold as for any step."""
        inc = await self.svc.store.get_incident(incident_id)
        if inc is None:
            return f"no incident {incident_id}"
        rems = [Remediation.from_dict(d) for d in await self.svc.store.list_remediations(incident_id=incident_id)]
        waiting = next((r for r in rems if r.action == RMA and r.waiting), None)
        if waiting is not None:
            return await self.act(incident_id, "approve", who, via, kind=waiting.kind)
        if (ran := next((r for r in rems if r.action == RMA), None)) is not None:
            return f"{incident_id} was handed over for RMA already ({ran.id} is {ran.state})"
        if not (targets := self.rma_targets):
            return "no ticket target is configured for RMA handoffs (section rma, docs/remediation.md)"
        if why := decide.rma_refusal(inc):
            return why
        nodes, now = decide.target_nodes(inc) if (inc.node or inc.fleet) else [], self.svc.clock()
        rem = Remediation(id=decide.remediation_id(incident_id, RMA_HANDOFF), incident_id=incident_id,
                          cluster=inc.cluster, nodes=nodes, kind=RMA_HANDOFF, action=RMA, policy="rma-handoff",
                          state=PROPOSED, created_at=now, updated_at=now, dry_run=self.policy.dry_run,
                          approvals_needed=decide.approvals_needed(self.policy, nodes, {}))
        new, why = decide.approve(rem, who, via, now)
        if why:
            return why
        text = (f"RMA handoff asked by {who.shown} to {', '.join(targets)} "
                f"({len(new.approvals)} of {new.approvals_needed} approvals)" + (" (dry run)" if new.dry_run else ""))
        ok = await self._write(new, None, EventKind.REMEDIATION_PROPOSED, text, who.shown, via)
        if ok and new.state == APPROVED:
            self._wake.set()
        return "" if ok else f"{rem.id} changed meanwhile; look again"

    async def _current(self, incident_id: str, kind: str) -> Remediation | None:
        docs = await self.svc.store.list_remediations(incident_id=incident_id)
        rems = [Remediation.from_dict(d) for d in docs if not kind or d["kind"] == kind]
        live = [r for r in rems if r.state in (*WAITING, APPROVED, RUNNING)]
        return next(iter(live or rems), None)

    async def for_incident(self, incident_id: str) -> list[JSONObject]:
        return list(await self.svc.store.list_remediations(incident_id=incident_id))

    # ----- the executor (leader only) -----

    async def run(self) -> None:
        while True:
            try:
                if self.svc.leading and (self.kube is not None and self.policy.proposes or self.tickets is not None):
                    await self.run_once()
            except Exception:
                log.exception("remediation executor round failed")
            try:
                await asyncio.wait_for(self._wake.wait(), POLL)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def run_once(self) -> int:
        """Claim and run every approved remediation (and one a dead leader left running); how many ran."""
        ran = 0
        for doc in await self.svc.store.list_remediations(states=(APPROVED, RUNNING, STOPPING)):
            rem = Remediation.from_dict(doc)
            if rem.state != APPROVED and rem.id in self._running:
                continue  # in flight in this process (one left running by a process before it is run again)
            if self.kube is None and rem.action != RMA:
                continue  # a cluster action, and no Kubernetes API to act through
            claimed = dataclasses.replace(rem, state=RUNNING, holder=self.holder)
            if not await self._write(claimed, rem.version, EventKind.REMEDIATION_STARTED,
                                     f"{'dry run of ' if rem.dry_run else ''}{rem.action} of {', '.join(rem.nodes[:10])} "
                                     f"started by {self.holder}", "alertd", "engine", fenced=True):
                continue
            self._running.add(rem.id)
            try:
                run = self._execute_rma if rem.action == RMA else self._execute
                await run(dataclasses.replace(claimed, version=rem.version + 1))
            finally:
                self._running.discard(rem.id)
            ran += 1
        return ran

    async def _execute(self, rem: Remediation) -> None:
        stop = asyncio.Event()
        watcher = asyncio.get_running_loop().create_task(self._watch_stop(rem.id, stop))
        try:
            assert self.kube is not None
            results, state, reason = await execute(self.kube, self.policy, rem, stop.is_set, self.monotonic,
                                                  self.svc.clock)
        finally:
            watcher.cancel()
        await self._finish(rem, results, state, reason)

    async def _execute_rma(self, rem: Remediation) -> None:
        """The RMA step: the incident's tickets (alertd/app/rma_handoff.py), each opened once."""
        inc = await self.svc.store.get_incident(rem.incident_id)
        if self.tickets is None or not self.tickets.systems or inc is None:
            why = "no ticket target is configured (section rma)" if inc is not None else "the incident is gone"
            await self._finish(rem, [], FAILED, why)
            return
        escalation = decide.escalation_of(inc)
        approvers = ", ".join(a["actor"] for a in rem.approvals) or "policy"
        why = (f"{escalation.line}; " if escalation is not None else "") + f"RMA approved by {approvers}"
        results = await self.tickets.open(inc, why, dry_run=rem.dry_run)
        failed = [r for r in results if not r.get("ok")]
        state = DONE if not failed else ("retry" if any(r.get("retry") for r in failed) else FAILED)
        await self._finish(rem, results, state, "; ".join(text(r, "result") for r in failed[:3]))

    async def _finish(self, rem: Remediation, results: list[JSONObject], state: str, reason: str) -> None:
        """Record how a claimed remediation went (fenced); "retry" sends it back to approved, a few times."""
        if state == "retry":
            self._attempts[rem.id] = self._attempts.get(rem.id, 0) + 1
            state = APPROVED if self._attempts[rem.id] < MAX_ATTEMPTS else FAILED
        latest_doc = await self.svc.store.get_remediation(rem.id)
        latest = Remediation.from_dict(latest_doc) if latest_doc is not None else None
        if latest is not None and latest.state == STOPPING and state == DONE:
            state = STOPPED
        version = latest.version if latest is not None else rem.version
        final = dataclasses.replace(rem, state=state, results=results, reason=reason)
        done = sum(1 for r in results if r.get("ok"))
        text = f"{rem.action} {state}: {done} of {len(results)} steps done" + (f"; {reason}" if reason else "")
        await self._write(final, version, REMEDIATION_EVENT + state, text, "alertd", "engine", fenced=True)

    async def _watch_stop(self, rem_id: str, stop: asyncio.Event) -> None:
        """A stop asked on any replica reaches the running drain within a poll."""
        while not stop.is_set():
            await asyncio.sleep(POLL)
            doc = await self.svc.store.get_remediation(rem_id)
            if doc is not None and doc["state"] == STOPPING:
                stop.set()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.tickets is not None:
            await self.tickets.close()
        if self.kube is not None:
            await self.kube.close()


__all__ = ["RemediationRunner"]
