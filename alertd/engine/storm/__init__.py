"""The storm: node incidents of one fleet event folded into ONE fleet incident, as one state machine.

Its callers use this package, never its parts: ``Storms`` (the correlator's one entry point: settle a
step's incidents, a child or a fleet closing) and the few names read elsewhere. The parts:

* ``events``: which event a node incident belongs to (its key, from ``correlation.storm.events``);
* ``fleets``: forming, folding, merging, growing and leaving fleets (``Storms``, the ``StormHost`` it needs);
* ``summary``: what a fleet says of its nodes: signal counts, title, headline, shared labels;
* ``extent``: what its GPUs read and how far it reaches (its severity);
* ``growth``: a growing storm's news for threads and pagers.
"""
from __future__ import annotations

from alertd.engine.storm.extent import EXTENT, GPUS, reading_of
from alertd.engine.storm.events import EVENT_FIELDS, event_key
from alertd.engine.storm.fleets import StormHost, Storms
from alertd.engine.storm.summary import COUNTED, fleet_title

__all__ = ["COUNTED", "EVENT_FIELDS", "EXTENT", "GPUS", "StormHost", "Storms", "event_key", "fleet_title",
           "reading_of"]
