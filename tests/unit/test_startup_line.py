"""The start says in one line where alertd listens, with which store and which rules."""
from __future__ import annotations

from alertd.app.startup_line import start_line
from alertd.config.settings import parse_config


def test_one_line_names_the_listener_the_store_and_the_rules():
    cfg = parse_config({"listen": "0.0.0.0:9095", "rules": {"site": ["/etc/alertd/rules.d"]}}, "t")
    line = start_line(cfg, tls=False, receivers=1)
    assert line.startswith("alertd ") and " listening on http://0.0.0.0:9095; 1 receiver process beside the engine;" in line
    assert line.endswith("; store: sqlite data/alertd.sqlite3; rules: shipped, /etc/alertd/rules.d")


def test_postgres_is_named_without_its_credentials():
    cfg = parse_config({"listen": "[::1]:9443", "storage": {
        "backend": "postgres", "postgres_dsn": "postgresql://alertd:s3cret@db.internal:5432/alertd"}}, "t")
    line = start_line(cfg, tls=True)
    assert "https://[::1]:9443;" in line and "store: postgres db.internal:5432/alertd;" in line
    assert "s3cret" not in line and "alertd:" not in line.split("store:")[1]
