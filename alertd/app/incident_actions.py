"""What people do to an incident, whichever door they come through: one use case each, taking the principal.

Acknowledge, resolve, silence (an Alertmanager silence scoped to the incident's alerts: their alertnames and
Xids, its nodes, cluster and GPU; previewed by alertd/app/silence_preview.py, refused with SilenceOverlap when
it would mute another open incident unless forced; recorded on the incident as annotation ``silence``),
unsilence, the remediation verbs (approve, override, cancel, stop: alertd/app/remediate.py) and the RMA
handoff (``rma_handoff``: a ticket per GPU with its evidence, once approved: alertd/app/rma_handoff.py). Slack,
the web UI and the API (and the CLI, through the API) are adapters: each reads its own input, calls
``perform``, and turns the answer into its own.

Each verb is carried out as alertd/core/verbs.py declares it: the engine command it builds (``svc.run``: an
engine step here, or forwarded to the leader) or one of the handlers below (``VerbHandlers``). Every outcome
is audited here, with the principal and any name it stated (alertd.core.actor), so no door can forget to; a
verb whose handler audits with its own record (remediation, the RMA handoff) is audited there. ``perform``
answers "" when done, or why nothing was done; Alertmanager's failures raise AlertmanagerError, and an
action forwarded to a leader that does not answer raises CommandTimeout, both audited before they
propagate.
"""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Callable, Protocol, cast

from alertd.core.findings import SILENCE, SilenceFinding
from alertd.core.incident_commands import Annotate
from alertd.core.verbs import VERBS, Declared, VerbCall, declared
from alertd.core.json_types import JSONObject
from alertd.alertmanager.silences import AlertmanagerClient, AlertmanagerError, silence_duration
from alertd.app.silence_preview import PreviewStore, SilenceOverlap, SilencePreview, preview_silence
from alertd.app.remediate import RemediationRunner
from alertd.config.settings import Config
from alertd.core.actor import Actor
from alertd.core.model import CLOSED, Incident
from alertd.core.vocabulary import EventKind
from alertd.ha.commands import CommandRunner

log = logging.getLogger(__name__)



class IncidentStore(PreviewStore, Protocol):
    async def get_incident(self, incident_id: str) -> Incident | None: ...


class IncidentActionHost(CommandRunner, Protocol):
    """The service as the use cases see it (alertd/app/service.py): its configuration (Alertmanager settings,
    labels for silences), the engine's commands (CommandRunner), remediation, and the audit trail."""

    @property
    def cfg(self) -> Config: ...

    @property
    def store(self) -> IncidentStore: ...

    @property
    def remediation(self) -> RemediationRunner: ...

    async def audit(self, actor: str, action: str, target: str, via: str, outcome: str = "ok",
                    detail: str = "") -> None: ...


class IncidentActions:
    def __init__(self, svc: IncidentActionHost, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self.svc, self.clock = svc, clock
        self.am = AlertmanagerClient(svc.cfg.alertmanager)

    async def perform(self, verb: str, incident_id: str, who: Actor, via: str, *, duration: str = "",
                      kind: str = "", force: bool = False) -> str:
        """One verb declared in alertd/core/verbs.py on the incident, as its declaration says; ``duration`` for
        silence (``force``: even when it would mute another open incident; else SilenceOverlap), ``kind`` for a
        remediation verb."""
        spec = declared(verb)
        if spec is None:
            return f"unknown action {verb!r}; one of {', '.join(VERBS)}"
        call = VerbCall(spec.name, incident_id, who, via, duration, kind, force)
        if spec.audits_itself:  # audited where it is decided, with the remediation's own record
            return await self._carry_out(spec, call)
        action = spec.audit_name(duration)
        try:
            why = await self._carry_out(spec, call)
        except Exception as exc:
            await self.svc.audit(who.shown, action, incident_id, via, f"refused: {exc}")
            raise
        await self.svc.audit(who.shown, action, incident_id, via, f"refused: {why}" if why else "ok")
        return why

    async def _carry_out(self, spec: Declared, call: VerbCall) -> str:
        """The declared handler, or the declared engine command (forwarded to the leader where none runs here)."""
        if spec.handler is not None:
            return await spec.handler(self, call)
        assert spec.command is not None  # Declared holds exactly one
        changed = await self.svc.run(spec.command(call.incident_id, call.who.shown))
        return "" if changed else await self._unchanged(call.incident_id, spec.name)

    # ----- the handlers (VerbHandlers) -----

    async def remediate(self, call: VerbCall) -> str:
        return await self.svc.remediation.act(call.incident_id, call.verb, call.who, call.via, kind=call.kind)

    async def rma_handoff(self, call: VerbCall) -> str:
        return await self.svc.remediation.rma_handoff(call.incident_id, call.who, call.via)

    async def _unchanged(self, incident_id: str, verb: str) -> str:
        inc = await self.svc.store.get_incident(incident_id)
        return f"no incident {incident_id}" if inc is None else f"incident is {inc.status}: nothing to {verb}"

    async def preview(self, incident_id: str) -> SilencePreview | str:
        """What a silence of the incident would match and mute now, or why there is none to make."""
        inc = await self.svc.store.get_incident(incident_id)
        if inc is None or inc.status == CLOSED:
            return f"{incident_id} is not open."
        return await preview_silence(self.svc.store, self.am, self.svc.cfg, inc)

    async def silence(self, call: VerbCall) -> str:
        incident_id, choice, actor, force = call.incident_id, call.duration, call.who.shown, call.force
        if isinstance(duration := silence_duration(choice), str):  # Slack's 1h/4h/24h, the API's any
            return duration
        inc = await self.svc.store.get_incident(incident_id)
        if inc is None or inc.status == CLOSED:
            return f"{incident_id} is not open."
        preview = await preview_silence(self.svc.store, self.am, self.svc.cfg, inc)
        if preview.overlap and not force:
            raise SilenceOverlap(preview, choice)
        old = inc.findings.silence
        made = SilenceFinding.from_json(cast(JSONObject, await self.am.silence_incident(
            inc, preview.matchers, duration, actor, self.clock(), alertd_url=self.svc.cfg.external_url)))
        if old is not None and old.id != made.id:
            try:
                await self.am.expire_silence(old.id)
            except AlertmanagerError as exc:
                log.info("could not expire the previous silence %s of %s: %s", old.id, incident_id, exc)
        until = made.ends_at.replace("T", " ").replace("Z", " UTC")
        changes = await self.svc.run(Annotate(
            incident_id, SILENCE, made.to_json(), EventKind.SILENCED,
            f"silenced for {choice} by {actor} until {until} (Alertmanager silence {made.id}): {preview.summary()}",
            actor))
        return "" if changes else f"Silence {made.id} created, but {incident_id} closed meanwhile."

    async def unsilence(self, call: VerbCall) -> str:
        incident_id, actor = call.incident_id, call.who.shown
        inc = await self.svc.store.get_incident(incident_id)
        if inc is None:
            return f"No incident {incident_id}."
        silence = inc.findings.silence
        if silence is None:
            return f"{incident_id} has no silence."
        try:
            await self.am.expire_silence(silence.id)
        except AlertmanagerError as exc:
            if "expired" not in str(exc) and "404" not in str(exc):
                raise
        changes = await self.svc.run(Annotate(incident_id, SILENCE, None, EventKind.SILENCE_REMOVED,
                                              f"unsilenced by {actor} (Alertmanager silence {silence.id} expired)", actor))
        return "" if changes else f"Silence {silence.id} expired; {incident_id} is closed."

    async def close(self) -> None:
        await self.am.close()


__all__ = ["IncidentActions"]
