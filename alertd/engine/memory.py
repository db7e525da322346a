"""What the engine holds in memory per open incident, and the budget past which it holds them summarised.

An open incident is held with its members (each alert's labels, subject and signal), the indexes that find it
(its key, its alerts' fingerprints, its node, its fleet's node) and its latest timeline events: at most
``DETAILED_EVENTS`` after each committed step, every event being in the store from that commit on.

Past ``processing.detailed_incidents`` open incidents, the node incidents of a storm (folded into a fleet
incident, which tells their story) are held summarised as their steps commit: no timeline in memory (the API,
the UI and the notifiers read it from the store, where all of it is) and their members' signals shared with
the identical ones already held (a storm's thousands of Xid 79 alerts hold one), as is what their fleet counted
of them. Nothing is dropped: a summarised incident takes alerts, folds, resolves and reopens as before, and one
that leaves its fleet is held in detail again. ``EngineState.summarised`` names them
(``alertd_incidents_summarised_open``).
"""
from __future__ import annotations

from typing import Iterable

from alertd.core.json_types import as_object, strings, text
from alertd.core.model import Incident, Signal
from alertd.engine.storm import COUNTED
from alertd.engine.state import EngineState

DETAILED_EVENTS = 20  # timeline events kept in memory per detailed incident
SIGNAL_POOL = 4096  # distinct values of each kind shared at most (a storm's alerts have a handful)


def hold(state: EngineState, incidents: Iterable[Incident], budget: int) -> int:
    """After a step committed: trim what the step's incidents hold, and summarise the storm's node incidents
    while more than ``budget`` incidents are open. Returns how many it summarised now."""
    over = len(state.incidents) > budget
    summarised = 0
    for inc in incidents:
        if over and inc.is_open and inc.parent_id and inc.id in state.incidents:
            summarised += _summarise(state, inc)
        else:
            state.summarised.pop(inc.id, None)  # resolved, or left its fleet: held in detail again
            del inc.timeline[:-DETAILED_EVENTS]
    return summarised


def _summarise(state: EngineState, inc: Incident) -> int:
    inc.timeline.clear()
    if inc.primary is not None:
        inc.primary = _shared(state, inc.primary)
    for m in inc.members.values():
        m.signal = _shared(state, m.signal)
    counted = as_object(inc.annotations.get(COUNTED))
    if counted:  # what its fleet counted of it: the same few values across a storm's nodes
        key = (text(counted, "fleet"), *strings(counted.get("keys")))
        pool = state.counted_pool
        if key in pool or len(pool) < SIGNAL_POOL:
            inc.annotations[COUNTED] = pool.setdefault(key, counted)
    if inc.id in state.summarised:
        return 0
    state.summarised[inc.id] = None
    return 1


def _shared(state: EngineState, sig: Signal) -> Signal:
    """The one held signal equal to ``sig`` (signals are frozen values)."""
    pool = state.signal_pool
    shared = pool.get(sig)
    if shared is None and len(pool) < SIGNAL_POOL:
        shared = pool[sig] = sig
    return shared or sig


__all__ = ["DETAILED_EVENTS", "hold"]
