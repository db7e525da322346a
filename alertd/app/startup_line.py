"""The one line a start logs: where alertd listens, with which store and which rules.

The first thing an operator reads after ``alertd serve``: the address to point Alertmanager at, the store
(the SQLite file, or the PostgreSQL server without its credentials) and the rules (``shipped``, then the
site's directories), so a wrong config file or a forgotten ``rules.site`` shows at a glance.
"""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from alertd.config.settings import Config
from alertd.core.version import version
from alertd.rules.shipped import shipped_rules


def _store(cfg: Config) -> str:
    if cfg.storage.backend == "sqlite":
        return f"sqlite {cfg.storage.sqlite_path or cfg.data_dir / 'alertd.sqlite3'}"
    parts = urlsplit(cfg.storage.postgres_dsn) if "://" in cfg.storage.postgres_dsn else None
    where = f" {parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}" if parts and parts.hostname else ""
    return f"postgres{where}"  # never the user or password of the DSN


def _rules(paths: list[str]) -> str:
    shipped = shipped_rules().resolve()
    return ", ".join("shipped" if Path(p).resolve() == shipped else p for p in paths)


def start_line(cfg: Config, *, tls: bool, receivers: int = 0) -> str:
    host, port = cfg.host_port
    shown = f"[{host}]" if ":" in host else host
    who = f"; {receivers} receiver process{'es' if receivers != 1 else ''} beside the engine" if receivers else ""
    return (f"alertd {version()} listening on {'https' if tls else 'http'}://{shown}:{port}{who}; "
            f"store: {_store(cfg)}; rules: {_rules(cfg.rule_paths)}")
