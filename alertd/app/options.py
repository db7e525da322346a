"""What ``alertd serve`` runs with: its flags and the configuration they override, resolved once.

The flags win over the configuration (``--listen``, ``--data-dir``, ``--log-format``); the role and the
number of receiver processes default from the store (alertd/app/receiver_processes.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import msgspec

from alertd.app.receiver_processes import default_receivers
from alertd.config.settings import Config
from alertd.core.vocabulary import PROCESS_ROLES

ROLES = PROCESS_ROLES


class Flags(Protocol):
    """The parsed ``serve`` flags (argparse's namespace, or anything with these attributes)."""

    config: str | None
    listen: str | None
    data_dir: str | None
    log_format: str | None
    insecure_no_auth: bool
    record: str | None
    receivers: int | None
    role: str | None


@dataclass(frozen=True)
class ServeOptions:
    config_path: str | None
    listen: str
    data_dir: Path
    log_format: str
    insecure_no_auth: bool
    record: str | None
    role: str  # engine | replica | receiver
    receivers: int  # receiver processes this process starts beside its engine (0: none, it listens itself)
    backend: str  # sqlite | postgres
    database: Path  # the SQLite database (also named in messages about it)

    @classmethod
    def from_flags(cls, flags: Flags, cfg: Config) -> ServeOptions:
        backend = cfg.storage.backend
        role = flags.role or ("replica" if backend == "postgres" else "engine")
        if flags.receivers is None and flags.role is None:  # the default depends on the store (and the cores)
            receivers = default_receivers(backend)
        else:
            receivers = flags.receivers or 0
        data_dir = Path(flags.data_dir) if flags.data_dir else cfg.data_dir
        return cls(config_path=flags.config, listen=flags.listen or cfg.listen, data_dir=data_dir,
                   log_format=flags.log_format or cfg.log.format, insecure_no_auth=flags.insecure_no_auth,
                   record=flags.record, role=role, receivers=receivers if role != "receiver" else 0,
                   backend=backend,
                   database=Path(cfg.storage.sqlite_path) if cfg.storage.sqlite_path else data_dir / "alertd.sqlite3")

    def apply(self, cfg: Config) -> None:
        """The flags that override the configuration, written into it (the service reads them there)."""
        cfg.listen, cfg.data_dir = self.listen, self.data_dir
        cfg.log = msgspec.structs.replace(cfg.log, format=self.log_format)

    @property
    def leads_group(self) -> bool:
        """This process is the engine of ``serve --receivers N``: it binds nothing, its receivers listen."""
        return self.receivers > 0

    @property
    def shared_inbox(self) -> bool:
        """Other processes append to the inbox this engine reads (a receiver group, replicas)."""
        return self.leads_group or self.role != "engine"

    def receiver_argv(self) -> list[str]:
        """The command line of each receiver process: the same store and port, the same recording (each
        appends whole lines)."""
        argv = ["serve", "--role", "receiver", "--listen", self.listen, "--data-dir", str(self.data_dir),
                "--log-format", self.log_format]
        if self.config_path:
            argv += ["--config", self.config_path]
        if self.insecure_no_auth:
            argv.append("--insecure-no-auth")
        if self.record:
            argv += ["--record", self.record]
        return argv
