"""The container's health check: GET /healthz on the listener the configuration names.

``python -m alertd.app.healthcheck --config FILE`` exits 0 when alertd answers 200 there, 1 otherwise.
It reads the same configuration file as ``alertd serve`` (the image's HEALTHCHECK passes the image's
config path), so a changed ``listen`` port or a ``tls`` section is followed: https when alertd serves
TLS (the certificate is not verified: the check asks the process itself, on loopback, not a peer).
A wildcard address (0.0.0.0, ::) is asked on loopback.
"""
from __future__ import annotations

import argparse
import ssl
import sys
import urllib.error
import urllib.request

from alertd.config.settings import load_config

WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def health_url(listen_host: str, port: int, tls: bool) -> str:
    host = WILDCARDS.get(listen_host, listen_host)
    return f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}/healthz"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m alertd.app.healthcheck")
    parser.add_argument("--config", help="the configuration alertd serves with")
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except Exception as exc:  # a broken config is an unhealthy container; say why in `docker inspect`
        print(f"healthcheck: {args.config}: {exc}", file=sys.stderr)
        return 1
    tls = cfg.tls is not None
    url = health_url(*cfg.host_port, tls)
    context = ssl._create_unverified_context() if tls else None  # noqa: S323  the process itself, on loopback
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(url, timeout=args.timeout) as resp:
            return 0 if resp.status == 200 else 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"healthcheck: {url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
