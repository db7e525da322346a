"""HTTPS on the listener: one SSLContext, its certificate and key re-read on SIGHUP.

Loading a new chain into the running context changes what new handshakes present;
connections already open keep theirs. A certificate that cannot be loaded on
reload is logged and the running one stays.
"""
from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from alertd.config.service import TlsSettings

log = logging.getLogger(__name__)
VERSIONS = {"TLS1.2": ssl.TLSVersion.TLSv1_2, "TLS1.3": ssl.TLSVersion.TLSv1_3}


class TLSError(ValueError):
    """A certificate or key alertd cannot use: the message names the files."""


@dataclass(slots=True)
class ListenerTLS:
    cert_file: Path
    key_file: Path
    min_version: str

    @classmethod
    def of(cls, settings: TlsSettings | None) -> "ListenerTLS | None":
        """The ``tls`` section (``Config.tls``, its paths resolved against the config file's directory)."""
        if settings is None:
            return None
        return cls(settings.cert_file, settings.key_file, settings.min_version)

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = VERSIONS[self.min_version]
        self.load(ctx)
        return ctx

    def load(self, ctx: ssl.SSLContext) -> None:
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        except (OSError, ssl.SSLError) as exc:
            raise TLSError(f"cannot use TLS certificate {self.cert_file} with key {self.key_file}: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None

    def reload(self, ctx: ssl.SSLContext) -> bool:
        try:
            self.load(ctx)
        except TLSError as exc:
            log.error("%s; keeping the running certificate", exc)
            return False
        log.info("TLS certificate reloaded from %s", self.cert_file)
        return True
