"""Member and incident documents stored without the Xid catalog's text, members packed small.

Every member of an Xid incident carries its Signal (and each incident its primary one), and most of a Signal is the
catalog entry's text (title, meaning, action, what to investigate, runbook): the
same few hundred bytes copied into each of a storm's 80,000 members. Stored, the
signal keeps only what differs from the shipped catalog's entry for its code
(usually nothing but kind, code, detail and basis) plus a mark; on read the text
is rebuilt from the catalog. The encoding is a difference, so it is exact for
signals from any catalog (a site's own entries differ and are kept in full);
documents without the mark (earlier versions) load unchanged.
"""
from __future__ import annotations

import zlib
from functools import lru_cache
from alertd.core.json_types import JSONObject, JSONValue
from alertd.core.vocabulary import SignalKind

from alertd.rules.shipped import SHIPPED_RULES
from alertd.gpu.catalog import XidCatalog

MARK = "fromCatalog"  # the signal's catalog fields were left out where they equal the shipped entry's
CATALOG_FIELDS = ("severity", "category", "title", "meaning", "action", "investigate", "drain", "runbook",
                  "fold_into_previous")


@lru_cache(maxsize=1)
def _catalog() -> XidCatalog | None:
    """The shipped catalog is package data: missing, the installation is broken, and that must not pass
    silently (stored incidents would keep every field, and those stored compacted would read back bare)."""
    return XidCatalog.load(SHIPPED_RULES / "xid-catalog.yml")


@lru_cache(maxsize=512)
def _reference(code: int) -> JSONObject | None:
    catalog = _catalog()
    if catalog is None:
        return None
    sig = catalog.lookup(code).signal()
    return {name: getattr(sig, name) for name in CATALOG_FIELDS}


def _empty(value: JSONValue) -> JSONValue:
    return False if isinstance(value, bool) else ""


def compact_signal(sig: JSONObject) -> JSONObject:
    """Signal.to_dict() -> what is stored (the catalog fields that equal the shipped entry's left out)."""
    code = sig.get("xid")
    ref = _reference(code) if sig.get("kind") == SignalKind.XID and type(code) is int else None
    if ref is None:
        return sig
    out = {k: v for k, v in sig.items() if k not in ref or v != ref[k]}
    for name, value in ref.items():
        if name not in sig and value not in ("", None, False):  # empty here, set in the catalog: say so
            out[name] = _empty(value)
    out[MARK] = 1
    return out


def expand_signal(sig: JSONObject) -> JSONObject:
    """What compact_signal stored -> Signal.to_dict() again (unmarked documents pass unchanged)."""
    if not sig.get(MARK):
        return sig
    code = sig["xid"]  # marked: compact_signal found it an int
    ref = _reference(code) if type(code) is int else None
    if ref is None:  # written by an install that had the catalog; this one has lost it: keep what is stored
        ref = {}
    out: JSONObject = {k: v for k, v in ref.items() if v not in ("", None, False)}
    out.update((k, v) for k, v in sig.items() if k != MARK)
    return {k: v for k, v in out.items() if v not in ("", None, False)}


def compact_member(doc: JSONObject) -> JSONObject:
    """Member.to_dict() -> the document stored (the fingerprint is the row's key column: left out)."""
    sig = doc.get("signal")
    out = {**doc, "signal": compact_signal(sig)} if isinstance(sig, dict) and sig else dict(doc)
    out.pop("fingerprint", None)
    return out


def expand_member(doc: JSONObject, fingerprint: str = "") -> JSONObject:
    """A stored member document and its row's fingerprint -> Member.to_dict() shape."""
    sig = doc.get("signal")
    if isinstance(sig, dict) and sig.get(MARK):
        doc["signal"] = expand_signal(sig)
    if fingerprint:
        doc.setdefault("fingerprint", fingerprint)  # documents written before kept it inside
    return doc


def compact_incident(doc: JSONObject) -> JSONObject:
    """Incident.to_dict(with_members=False) -> the document stored (its primary signal compacted)."""
    sig = doc.get("primary")
    if isinstance(sig, dict) and sig:
        doc["primary"] = compact_signal(sig)
    return doc


def expand_incident(doc: JSONObject) -> JSONObject:
    """A stored incident document -> Incident.to_dict() shape, as the API and Incident.from_dict read it."""
    sig = doc.get("primary")
    if isinstance(sig, dict) and sig.get(MARK):
        doc["primary"] = expand_signal(sig)
    return doc


# A preset zlib dictionary: the key names and label names every member document repeats (Alertmanager's alert
# fields, Kubernetes and dcgm-exporter labels), which a few hundred bytes of JSON cannot amortise on their own.
# Rows name their dictionary by its Adler-32 (zlib's FDICT header): NEVER edit this text, add a new one to
# DICTIONARIES and switch PACK_WITH to it, so rows written with the old one stay readable.
MEMBER_DICT_V1 = (
    b'"labels":{"alertname":"","severity":"critical","severity":"warning","cluster":"","namespace":"kube-system",'
    b'"pod":"","instance":"","job":"kubelet","job":"node-exporter","service":"","endpoint":"metrics",'
    b'"prometheus":"monitoring/k8s","container":"","exported_namespace":"","exported_pod":"","exported_container":"",'
    b'"err_code":"","err_msg":"","Hostname":"","hostname":"","UUID":"GPU-","gpu":"","device":"nvidia",'
    b'"modelName":"NVIDIA A100-SXM4-80GB","modelName":"NVIDIA H100 80GB HBM3","DCGM_FI_DRIVER_VERSION":"",'
    b'"pci_bus_id":"00000000:","job":"dcgm-exporter","namespace":"gpu-operator","container":"nvidia-dcgm-exporter",'
    b'"xid":"","startsAt":"","endsAt":null,"lastSeen":"","folded":false,"folded":true,"generatorURL":"http://",'
    b'/graph?g0.expr=&g0.tab=1","summary":"","status":"resolved","signal":{"kind":"other","kind":"thermal",'
    b'"kind":"ecc","kind":"row_remap","kind":"nvlink","kind":"metrics_missing","kind":"node_not_ready",'
    b'"category":"hardware","detail":"","basis":"signals rules/signals.yml: labels alertname=~"; Xid from label xid='
    b'"fromCatalog":1},"subject":{"cluster":"","node":"","namespace":"","pod":"","container":"",'
    b'"gpu":{"uuid":"GPU-","index":"","pci_bus_id":"0000:","serial":"","model":"NVIDIA "}},'
    b'{"fingerprint":"","alertname":"","status":"firing","signal":{"kind":"xid","severity":"error","xid":'
)
# Timeline events: their kinds, key names and the texts the engine writes.
EVENT_DICT_V1 = (
    b'{"at":"2026-","kind":"opened","text":"","data":{"fingerprint":""}}'
    b'{"at":"","kind":"alert_joined","text":" alerts joined, first ","data":{"fingerprints":["",""],"first":""}}'
    b'{"kind":"folded_into_fleet","text":"folded into fleet incident INC-","data":{"fleet":"INC-"}}'
    b'{"kind":"nodes_joined","text":" nodes joined","data":{"nodes":[""]}}'
    b'{"kind":"resolved","kind":"acknowledged","kind":"reopened","kind":"escalated","kind":"enriched"}'
)
DICTIONARIES = {zlib.adler32(d): d for d in (MEMBER_DICT_V1,)}  # zlib rows (FDICT) name theirs by Adler-32
# Raw deflate rows start with a tag byte naming their dictionary: the zlib header (2 bytes), the dictionary's
# Adler-32 (4) and the data's Adler-32 (4) cost 10 bytes a row, some 16 bytes per stored alert. A tag's low
# nibble is never 8, which every zlib stream's first byte has (deflate), so both kinds of rows read.
TAGS = {1: MEMBER_DICT_V1, 2: EVENT_DICT_V1}
PACK_WITH = 1
EVENTS_WITH = 2
# A fleet incident's document lists every node and child incident and is rewritten each time a node joins, so
# its cost grows with the storm: past this size it is packed at level 1 (about 2.5x faster on such lists, some
# 10% larger; a storm has a few of them). Members, events and node incidents stay far below it.
BIG_DOC = 8192


def pack(data: bytes, tag: int = PACK_WITH) -> bytes:
    """Compress a document with a preset dictionary: the tag byte, then raw deflate."""
    c = zlib.compressobj(6 if len(data) <= BIG_DOC else 1, zlib.DEFLATED, -15, zdict=TAGS[tag])
    return bytes([tag]) + c.compress(data) + c.flush()


def unpack(raw: bytes) -> bytes:
    """pack() output, a zlib stream with a preset dictionary (FDICT, earlier rows), or plain zlib."""
    if raw and raw[0] & 0x0F != 8:  # a tag byte, not a zlib header
        zdict = TAGS.get(raw[0])
        if zdict is None:
            raise ValueError(f"document packed with an unknown dictionary tag {raw[0]}")
        d = zlib.decompressobj(-15, zdict=zdict)
        return d.decompress(raw[1:]) + d.flush()
    if len(raw) >= 6 and raw[1] & 0x20:  # FDICT: the dictionary's Adler-32 follows the two header bytes
        zdict = DICTIONARIES.get(int.from_bytes(raw[2:6], "big"))
        if zdict is None:
            raise ValueError("member document packed with an unknown zlib dictionary")
        d = zlib.decompressobj(zdict=zdict)
        return d.decompress(raw) + d.flush()
    return zlib.decompress(raw)
