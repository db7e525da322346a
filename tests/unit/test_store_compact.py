"""Member documents are stored without the Xid catalog's text and read back exactly as they were."""
from __future__ import annotations

import json
import zlib

import pytest
from datetime import datetime, timedelta, timezone

from alertd.rules.shipped import SHIPPED_RULES
from alertd.gpu.catalog import XidCatalog
from alertd.core.model import Member, Signal, Subject, iso, parse_iso
from alertd.store import sql
from alertd.store.compact import (BIG_DOC, EVENTS_WITH, MARK, MEMBER_DICT_V1, PACK_WITH, TAGS, compact_incident,
                                  compact_member, expand_member, pack, unpack)

CATALOG = XidCatalog.load(SHIPPED_RULES / "xid-catalog.yml")


def member(signal: Signal) -> Member:
    return Member(fingerprint="9473d0f1cbdde427", alertname="GPUXidError", status="firing", signal=signal,
                  subject=Subject.from_dict({"cluster": "prod-a", "node": "gpu-node-7"}),
                  labels={"alertname": "GPUXidError", "xid": str(signal.xid), "gpu": "3"},
                  starts_at=datetime(2026, 11, 30, 22, 4, 11, tzinfo=timezone.utc))


def roundtrip(m: Member) -> dict:
    stored = json.loads(json.dumps(compact_member(m.to_dict())))
    assert "fingerprint" not in stored  # the row's key column
    return Member.from_dict(expand_member(stored, m.fingerprint)).to_dict()


def test_a_catalog_signal_is_stored_without_its_text_and_read_back_whole():
    m = member(CATALOG.lookup(48).signal(detail="sram", basis="signals rules/signals.yml:47: labels xid=48"))
    stored = compact_member(m.to_dict())
    assert stored["signal"] == {"kind": "xid", "xid": 48, "detail": "sram",
                                "basis": "signals rules/signals.yml:47: labels xid=48", MARK: 1}
    assert CATALOG.lookup(48).meaning not in json.dumps(stored)
    assert roundtrip(m) == m.to_dict()


def test_a_site_catalog_entry_keeps_what_differs_from_the_shipped_one():
    shipped = CATALOG.lookup(79).signal()
    own = Signal(kind="xid", xid=79, severity="warning", category=shipped.category, title=shipped.title,
                 meaning="Our own words for Xid 79.", action=shipped.action, investigate="", drain=False,
                 runbook="https://wiki.example/xid79")
    m = member(own)
    stored = compact_member(m.to_dict())["signal"]
    assert stored["meaning"] == "Our own words for Xid 79." and "title" not in stored
    assert roundtrip(m) == m.to_dict()  # the catalog's investigate text and drain are not put back


def test_unknown_codes_and_other_signals_round_trip():
    for sig in (CATALOG.lookup(99_999).signal(), Signal(kind="thermal", severity="warning", title="GPU too hot",
                                                        meaning="Clocks are throttled.", detail="hw_slowdown")):
        m = member(sig)
        assert roundtrip(m) == m.to_dict()
    assert MARK not in compact_member(member(Signal(kind="thermal", title="hot")).to_dict())["signal"]


def test_documents_written_by_earlier_versions_still_load():
    m = member(CATALOG.lookup(48).signal(basis="old"))
    full = m.to_dict()
    fdict = zlib.compressobj(6, zdict=MEMBER_DICT_V1)
    for raw in (json.dumps(full), zlib.compress(json.dumps(full).encode()),  # PostgreSQL text, SQLite blob
                fdict.compress(json.dumps(full).encode()) + fdict.flush()):  # zlib with the dictionary named
        inc = sql.assemble(json.dumps(incident_doc()), [(m.fingerprint, raw)], [])
        assert inc.members[m.fingerprint].to_dict() == full
    event = {"at": "2026-11-30T22:04:11.000000Z", "kind": "opened", "text": "GPUXidError: Xid 48 (GPU 3)",
             "data": {"fingerprint": m.fingerprint}}
    for raw in (json.dumps(event), sql.packed(event, EVENTS_WITH)):  # timeline rows before and after packing
        assert sql.assemble(json.dumps(incident_doc()), [], [raw]).timeline[0].to_dict() == event


def incident_doc() -> dict:
    now = "2026-11-30T22:04:11Z"
    return {"id": "INC-7", "key": "node|gpu-node-7", "group": "node", "title": "t", "severity": "error",
            "category": "memory", "status": "open", "openedAt": now, "updatedAt": now}


def test_an_incident_is_stored_without_its_primary_signals_text_and_read_back_whole():
    doc = {**incident_doc(), "primary": CATALOG.lookup(79).signal(basis="b").to_dict()}
    stored = compact_incident(json.loads(json.dumps(doc)))
    assert stored["primary"] == {"kind": "xid", "xid": 79, "basis": "b", MARK: 1}
    assert sql.incident_doc(json.dumps(stored)) == doc
    assert sql.incident_doc(json.dumps(doc)) == doc  # written by an earlier version


def test_members_are_packed_with_a_dictionary_and_earlier_rows_still_unpack():
    doc = compact_member(member(CATALOG.lookup(48).signal()).to_dict())
    raw = json.dumps(doc).encode()
    fdict = zlib.compressobj(6, zdict=MEMBER_DICT_V1)
    earlier = fdict.compress(raw) + fdict.flush()  # zlib, the dictionary named by its Adler-32
    assert unpack(pack(raw)) == raw and unpack(zlib.compress(raw)) == raw and unpack(earlier) == raw
    assert len(pack(raw)) == len(earlier) - 9  # a tag byte instead of zlib's header and checksums
    assert len(earlier) < len(zlib.compress(raw, 6))
    unknown = bytearray(earlier)
    unknown[2:6] = b"\0\0\0\1"
    with pytest.raises(ValueError, match="unknown zlib dictionary"):
        unpack(bytes(unknown))
    with pytest.raises(ValueError, match="unknown dictionary tag 3"):
        unpack(b"\x03" + pack(raw)[1:])


def test_gpu_history_rows_leave_out_empty_fields_and_read_back_with_all_of_them():
    from alertd.store.history import history_doc
    full = {"xids": [48], "signals": ["xid"], "alertnames": ["GPUXidError"], "index": "0", "serial": "",
            "pci_bus_id": "0000:18:00", "first": "2026-11-30T22:04:11Z", "last": "2026-11-30T22:05:11Z"}
    assert history_doc({k: v for k, v in full.items() if v}) == full
    assert history_doc(dict(full)) == full  # rows written by earlier versions
    assert history_doc({})["xids"] == [] and history_doc({})["xids"] is not history_doc({})["xids"]


def test_gpu_history_rows_are_written_with_short_keys_and_last_seen_from_the_row():
    from alertd.store.history import Sighting, history_doc, history_row_doc
    s = Sighting("GPU-1", pci_bus_id="0000:18:00", index="0", first="2026-11-30T22:04:11Z",
                 last="2026-11-30T22:05:11Z", xids={48}, signals={"xid"}, alertnames={"GPUXidError"})
    full = {"xids": [48], "signals": ["xid"], "alertnames": ["GPUXidError"], "index": "0", "serial": "",
            "pci_bus_id": "0000:18:00", "first": "2026-11-30T22:04:11Z", "last": "2026-11-30T22:05:11Z"}
    stored = history_row_doc(s, updated_at=s.last)
    assert stored == {"x": [48], "s": ["xid"], "a": ["GPUXidError"], "i": "0", "p": "0000:18:00",
                      "f": "2026-11-30T22:04:11Z"}  # "last" is the row's updated_at
    assert history_doc(json.loads(json.dumps(stored)), s.last) == full
    later = history_row_doc(s, updated_at="2026-11-30T22:09:00Z")  # the incident moved on: "last" is kept
    assert later["l"] == s.last and history_doc(later, "2026-11-30T22:09:00Z") == full
    empty = history_row_doc(Sighting("GPU-2"), updated_at="")
    assert history_doc(empty, "")["last"] == "" and history_doc(empty, "")["xids"] == []


def test_a_packed_incident_document_reads_back_whole():
    doc = {**incident_doc(), "primary": CATALOG.lookup(48).signal().to_dict(),
           "gpus": [{"uuid": f"GPU-{i}", "index": str(i), "model": "NVIDIA H100 80GB HBM3"} for i in range(8)]}
    stored = sql.packed(compact_incident(json.loads(json.dumps(doc))))
    assert isinstance(stored, bytes) and len(stored) < len(json.dumps(doc)) / 2
    assert sql.incident_doc(stored) == doc


def test_a_fleet_document_listing_thousands_of_nodes_is_packed_fast_and_reads_back_whole():
    doc = {**incident_doc(), "fleet": True, "nodes": [f"gpu-node-{i:05d}" for i in range(3000)],
           "children": [f"INC-{i + 10}" for i in range(3000)]}
    raw = json.dumps(doc).encode()
    assert len(raw) > BIG_DOC
    packed = pack(raw)
    assert unpack(packed) == raw and sql.incident_doc(packed) == doc
    slow = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=TAGS[PACK_WITH])
    level6 = slow.compress(raw) + slow.flush()
    assert len(packed) <= (len(level6) + 1) * 1.25  # level 1 on such lists: a little larger, never much
    small = json.dumps(incident_doc()).encode()
    fast = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=TAGS[PACK_WITH])
    assert pack(small) == bytes([PACK_WITH]) + fast.compress(small) + fast.flush()  # small ones: level 6 as ever


@pytest.mark.parametrize("ts", [
    datetime(2026, 11, 30, 22, 4, 11, tzinfo=timezone.utc),  # no fraction: still six digits
    datetime(2026, 11, 30, 22, 4, 11, 7, tzinfo=timezone.utc),
    datetime(2026, 11, 30, 23, 4, 11, 250000, tzinfo=timezone(timedelta(hours=1))),  # another offset: to UTC
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
])
def test_timestamps_are_stored_in_utc_with_six_digit_fractions(ts):
    utc = ts.astimezone(timezone.utc)
    assert iso(ts) == (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
                       f"{utc.second:02d}.{utc.microsecond:06d}Z")
    assert parse_iso(iso(ts)) == ts and iso(None) is None


def test_stored_timestamps_sort_as_text():
    times = [datetime(2026, 11, 30, 22, 4, 11, us, tzinfo=timezone.utc) for us in (0, 1, 10, 999999)]
    assert sorted(iso(t) for t in times) == [iso(t) for t in times]
