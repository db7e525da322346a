"""Disk use stays bounded through an 80,000-alert storm (10,000 nodes x 8 GPU alerts) on a real
``alertd serve``: the WAL and the data directory are sampled every 0.5 s from the first post until the
engine has taken every alert, and alertd_store_bytes reports what is on disk."""
from __future__ import annotations

from testkit.alertd_proc import AlertdProcess, open_readonly
from testkit.disk_storm import run_storm

NODES = 10_000
WAL_LIMIT = 64 * 1024 * 1024
# Measured 1,437 bytes per alert (docs/performance.md): a member (catalog text and fingerprint left out,
# packed with a preset dictionary) ~0.45 KB, a GPU's row and history row with their indexes ~0.55 KB, the
# incident, inbox key, timeline and outbox shares ~0.35 KB, the WAL (at most ~7 MB) ~0.09 KB; the inbox log
# (each webhook's body until the engine took it) gives its pages back once drained. The bound is the 1.5 KB
# goal; it catches a regression.
BYTES_PER_ALERT_LIMIT = 1536


def test_storm_keeps_the_wal_and_the_data_dir_bounded(tmp_path):
    server = AlertdProcess(tmp_path / "storm", {"log": {"level": "warning"}})
    server.start()
    try:
        sizes = run_storm(server, NODES, timeout=240)
        print("\n" + sizes.summary())
        assert sizes.errors == 0
        assert len(sizes.samples) >= 20, "sampled every 0.5 s through the storm"
        assert sizes.peak_wal <= WAL_LIMIT, sizes.summary()
        assert sizes.per_alert() <= BYTES_PER_ALERT_LIMIT, sizes.summary()
        with server.db() as conn:
            assert conn.execute("SELECT count(*) FROM members").fetchone()[0] == NODES * 8
        with open_readonly(f"{server.db_path}-inbox") as log:  # each body stored once, and gone once taken
            assert log.execute("SELECT count(*) FROM inbox_log").fetchone()[0] == 0
            assert log.execute("PRAGMA freelist_count").fetchone()[0] == 0  # its pages given back
        gauge = server.metrics().get("alertd_store_bytes", 0)
        assert 0 < gauge <= sizes.final_dir * 1.1
    finally:
        server.stop()
