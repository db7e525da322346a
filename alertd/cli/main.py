"""Command line: serve | check | test | replay | explain | audit; incidents | gpus | rma (alertd.cli.api_client)."""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import signal
import sqlite3
import sys
import urllib.error
import urllib.request
from urllib.parse import quote
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from alertd.core.errors import InvalidDocument

if TYPE_CHECKING:
    from alertd.app.receiver_group import GroupDir
    from alertd.config.settings import Config

log = logging.getLogger("alertd")
_held: list[object] = []  # what the process holds until it ends (the SQLite engine lock)


def _config(path: str | None):
    """The configuration, or None after saying on stderr what is wrong with it."""
    from alertd.config.settings import load_config

    try:
        return load_config(path)
    except InvalidDocument as exc:
        print(f"invalid configuration:\n{exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    """With receivers, the engine process first makes the group's directory, and sets the metrics variable in
    its environment before anything imports prometheus_client (alertd/app/receiver_group.py, alertd/core/service_metrics.py)."""
    from alertd.app.receiver_group import GroupDir
    from alertd.app.receiver_processes import default_receivers

    if (cfg := _config(args.config)) is None:  # (the config module does not import prometheus_client)
        return 2
    if args.receivers is None and args.role is None:  # the default depends on the store (and the cores)
        receivers = default_receivers(cfg.storage_backend)
    else:
        receivers = args.receivers or 0
    group = GroupDir.create() if receivers > 0 and args.role != "receiver" else None
    if group is not None:
        group.enter()
    try:
        return _serve_in(args, cfg, group, receivers if group is not None else 0)
    finally:
        if group is not None:
            group.remove()


def _serve_in(args: argparse.Namespace, cfg: "Config", group: "GroupDir | None", receivers: int) -> int:
    from aiohttp import web

    from alertd.config.settings import load_config
    from alertd.cli.logging_setup import setup_logging
    from alertd.app.recording_rules import with_site_recordings
    from alertd.rules.ruleset import load_rules
    from alertd.app.preflight import sqlite_problem
    from alertd.store import open_store
    from alertd.web.app import build_app
    from alertd.web.auth import Authenticator, exposure_problem
    from alertd.web.keys import RELOAD
    from alertd.web.tls import ListenerTLS, TLSError

    if args.listen:
        cfg.listen = args.listen
    if args.data_dir:
        cfg.data_dir = Path(args.data_dir)
    if args.log_format:
        cfg.log_format = args.log_format
    setup_logging(cfg.log_format, cfg.log_level)
    try:
        rules = with_site_recordings(load_rules(cfg.rule_paths), cfg)
    except InvalidDocument as exc:
        print(f"invalid rules:\n{exc}", file=sys.stderr)
        return 2
    auth = Authenticator.from_config(cfg, insecure_no_auth=args.insecure_no_auth)
    if problem := exposure_problem(cfg.host_port[0], auth):
        print(f"alertd: {problem}", file=sys.stderr)
        return 2
    listener_tls = ListenerTLS.from_config(cfg.raw, Path(args.config).resolve().parent if args.config else None)
    try:
        ssl_context = listener_tls.context() if listener_tls else None
    except TLSError as exc:
        print(f"alertd: {exc}", file=sys.stderr)
        return 2
    database = Path(cfg.sqlite_path) if cfg.sqlite_path else cfg.data_dir / "alertd.sqlite3"
    if cfg.storage_backend == "sqlite" and (problem := sqlite_problem(database)):
        print(f"alertd: {problem}", file=sys.stderr)
        return 2
    if cfg.storage_backend == "sqlite" and (args.role or "engine") == "engine":
        from alertd.ha import engine_lock

        try:  # held until the process ends (docs/ha.md "One engine per SQLite database")
            _held.append(engine_lock.acquire(database, cfg.data_dir.resolve()))
        except (engine_lock.EngineLocked, OSError) as exc:
            print(f"alertd: {exc}", file=sys.stderr)
            return 2
    store = open_store(cfg.storage_backend, data_dir=cfg.data_dir, sqlite_path=cfg.sqlite_path,
                       synchronous=cfg.synchronous, dsn=cfg.postgres_dsn, password=cfg.postgres_password,
                       checkpoints=args.role != "receiver")
    from alertd.app.assemble import build_service

    from alertd.enrich import Enricher

    from alertd.app import receiver_group as group_control
    from alertd.app.receiver_processes import ReceiverPool

    role = args.role or ("replica" if cfg.storage_backend == "postgres" else "engine")
    enricher = Enricher.from_config(cfg.raw.get("enrich")) if role != "receiver" else None
    svc = build_service(cfg, store, rules, enricher=enricher, role=role, shared_inbox=True if receivers or role != "engine" else False)
    if enricher is not None:
        enricher.bind(svc)
    auth.failures = svc.metrics.auth_failures
    from alertd.alertmanager.reconcile_loop import build_reconciler

    svc.reconciler = build_reconciler(svc)  # runs on the leader; any process fetches truncated groups
    app = build_app(svc, auth)
    pool: ReceiverPool | None = None
    if group is not None:
        if problem := _port_problem(*cfg.host_port):  # the receivers bind it: say so here, not in a restart loop
            print(f"alertd: could not start: {problem}", file=sys.stderr)
            return 2
        child = ["serve", "--role", "receiver", "--listen", cfg.listen, "--data-dir", str(cfg.data_dir),
                 "--log-format", cfg.log_format] + (["--config", args.config] if args.config else []) + \
            (["--insecure-no-auth"] if args.insecure_no_auth else []) + \
            (["--record", args.record] if args.record else [])  # they take the webhooks: each appends whole lines
        pool = ReceiverPool(receivers, child, env=group.environ())
        background: list[Any] = []

        async def start_receivers(_: web.Application) -> None:  # after the engine migrated the store
            assert pool is not None and group is not None
            background.append(await group_control.serve_control(group.control, reload_group))
            reporting = group_control.HealthReport(group.health, svc.health.failure)
            reporting.write()  # before any receiver asks: the receivers answer /readyz for the group
            pool.start()
            background.append(asyncio.get_running_loop().create_task(reporting.run()))

            async def supervise() -> None:
                while True:
                    await asyncio.sleep(5)
                    pool.restart_dead()
                    svc.metrics.publish()  # the engine's collector-kept counters (enrichment) into the group's files

            background.append(asyncio.get_running_loop().create_task(supervise()))

        async def stop_receivers(_: web.Application) -> None:
            assert pool is not None
            for item in background:
                if isinstance(item, asyncio.Task):
                    item.cancel()
                else:
                    item.close()
            pool.stop()

        app.on_startup.append(start_receivers)
        app.on_shutdown.append(stop_receivers)
    elif role == "receiver" and (joined := group_control.GroupDir.joined()) is not None:
        app[RELOAD] = lambda: group_control.ask_reload(str(joined.control))  # POST /-/reload reaches the engine
        svc.health.engine_report = lambda: group_control.engine_failure(joined.health)  # /readyz answers for it
    if args.record:
        from alertd.authoring.record import attach_recorder

        attach_recorder(app, svc, args.record)

    def reload_group() -> tuple[bool, str]:
        """Rules, and the credentials (token files are re-read: rotation without a restart); the receiver
        processes too. SIGHUP, and POST /-/reload on a receiver (through the control socket)."""
        ok, error = svc.reload_rules()
        try:
            auth.replace(Authenticator.from_config(load_config(args.config)))
            log.info("credentials reloaded")
        except InvalidDocument as exc:
            ok, error = False, error or str(exc)
            log.error("credentials not reloaded, keeping the running ones:\n%s", exc)
        if listener_tls is not None and ssl_context is not None and not listener_tls.reload(ssl_context):
            ok, error = False, error or f"TLS certificate {listener_tls.cert_file} not reloaded"
        if pool is not None:  # the receiver processes re-read their rules and credentials too
            pool.signal(signal.SIGHUP)
        return ok, error

    forwarded = RELOAD in app  # a group's receiver: its engine process reloads the group
    if not forwarded:  # POST /-/reload: rules, credentials and certificate, as SIGHUP does

        async def reload_here() -> tuple[bool, str]:
            return reload_group()

        app[RELOAD] = reload_here

    def on_sighup() -> None:
        ok, error = reload_group()
        if role != "receiver" or not forwarded:  # a group's reload is recorded once, by its engine process
            asyncio.get_running_loop().create_task(svc.audit("SIGHUP", "reload", "rules", "signal",
                                                             "ok" if ok else "failed", error))

    async def on_startup(_: web.Application) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, on_sighup)

    app.on_startup.append(on_startup)
    host, port = cfg.host_port
    log.info("alertd %s on %s://%s:%d (store: %s, rules: %s)",
             f"engine process; its {receivers} receiver processes listen" if group is not None else "listening",
             "https" if ssl_context else "http", host, port, cfg.storage_backend, ", ".join(cfg.rule_paths))
    # Everything loaded so far lives as long as the process: keep it out of the cyclic collector,
    # and collect less often (the engine allocates many small, acyclic objects per alert).
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)
    # With receivers the engine process binds nothing (an empty socket list: no site at all), so an engine
    # step never holds up a webhook that the kernel would have handed to this process's event loop.
    listen: dict[str, Any] = {"sock": []} if group is not None else {
        "host": host, "port": port, "reuse_port": role == "receiver", "ssl_context": ssl_context}
    try:
        web.run_app(app, print=None, access_log=None, shutdown_timeout=10, handle_signals=True, **listen)
    except Exception as exc:  # e.g. the database went away between the check and the start, a port in use
        log.debug("start-up failed", exc_info=True)
        from alertd.app.preflight import damaged  # a page read only now (the state, the inbox) may be the damaged one

        problem = damaged(database) if cfg.storage_backend == "sqlite" and isinstance(exc, sqlite3.DatabaseError) else ""
        print(f"alertd: {problem}" if problem else
              f"alertd: could not start: {type(exc).__name__}: {exc} (run with log.level debug for the traceback)",
              file=sys.stderr)
        return 2
    return 0


def _port_problem(host: str, port: int) -> str | None:
    """Whether the receivers will be able to bind HOST:PORT (bound and closed, never listened on)."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                                            flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
    except OSError as exc:
        return f"{host}:{port}: {exc}"
    return None


def _api(args: argparse.Namespace, path: str) -> dict:
    headers = {"Accept": "application/json"}
    token = args.token or os.environ.get("ALERTD_API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(args.url.rstrip("/") + path, headers=headers)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def _calling_api(args: argparse.Namespace, call: Callable[[], int]) -> int:
    """Run a command that talks to a running alertd; its HTTP and network errors become a message and exit 1."""
    try:
        return call()
    except urllib.error.HTTPError as exc:
        print(f"{exc.code}: {exc.read().decode(errors='replace')}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(f"cannot reach alertd at {args.url}: {exc}", file=sys.stderr)
        return 1


def _audit(args: argparse.Namespace) -> int:
    """Print the audit trail straight from the store (works while alertd runs, and when it does not)."""
    from datetime import datetime, timezone

    from alertd.core.durations import parse_duration
    from alertd.core.model import parse_iso
    from alertd.store import open_store

    if (cfg := _config(args.config)) is None:
        return 2
    since = None
    if args.since:
        try:
            since = (datetime.now(timezone.utc) - parse_duration(args.since)) if args.since[-1].isalpha() \
                else parse_iso(args.since)
        except (ValueError, OverflowError):
            print(f"--since {args.since!r}: give a duration (24h) or an RFC 3339 time", file=sys.stderr)
            return 2
    data_dir = Path(args.data_dir) if args.data_dir else cfg.data_dir
    db = Path(cfg.sqlite_path) if cfg.sqlite_path else data_dir / "alertd.sqlite3"
    if cfg.storage_backend == "sqlite" and not db.exists():
        print(f"alertd: no store at {db} (give --config or --data-dir of the alertd to audit)", file=sys.stderr)
        return 2
    store = open_store(cfg.storage_backend, data_dir=data_dir, sqlite_path=cfg.sqlite_path, dsn=cfg.postgres_dsn,
                       password=cfg.postgres_password)

    async def read() -> list:
        await store.open()
        try:
            return await store.list_audit(since=since, actor=args.actor, action=args.action, limit=args.limit)
        finally:
            await store.close()

    entries = asyncio.run(read())
    for e in reversed(entries):  # oldest first, like a log
        if args.json:
            print(json.dumps(e.to_dict()))
        else:
            outcome = "" if e.outcome == "ok" else f"  [{e.outcome}]"
            print(f"{e.to_dict()['at']}  {e.actor:30} {e.action:12} {e.target:14} via {e.via}{outcome}")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from alertd.authoring import explain

    def fetch(incident_id: str) -> dict:
        return _api(args, f"/api/v1/incidents/{quote(incident_id, safe='')}")

    return _calling_api(args, lambda: explain.main(
        file=args.file, incident=args.incident, rule_paths=args.rules, config=args.config,
        out=sys.stdout, err=sys.stderr, fetch=fetch))


def _authoring(command: str, args: argparse.Namespace) -> int:
    from alertd.authoring import check, replay, ruletest

    try:
        if command == "check":
            return check.main(args.paths, sys.stdout, runbooks=args.runbooks, strict=args.strict,
                              prometheus_rules=args.prometheus_rules)
        if command == "test":
            return ruletest.main(args.files, args.run, sys.stdout)
        return replay.main(args.file, rule_paths=args.rules, config=args.config, as_json_output=args.json,
                           tail=args.tail, until=args.until, out=sys.stdout, err=sys.stderr)
    except BrokenPipeError:  # e.g. `alertd replay FILE | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="alertd", description="GPU-aware incident correlation for Alertmanager.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the receiver, engine and notifiers")
    serve.add_argument("--config", help="YAML config file (see examples/alertd.yml)")
    serve.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:9095)")
    serve.add_argument("--data-dir", help="directory for the embedded SQLite store (default ./data)")
    serve.add_argument("--log-format", choices=["text", "json"])
    serve.add_argument("--insecure-no-auth", action="store_true",
                       help="serve a non-loopback address without API authentication (refused otherwise)")
    serve.add_argument("--record", metavar="FILE", help="append every accepted webhook to FILE (JSON lines) for `alertd replay`")
    serve.add_argument("--receivers", type=int, metavar="N",
                       help="receiver processes beside the engine on the same port (SO_REUSEPORT); "
                            "default: 1 on SQLite with two or more cores, else 0")
    serve.add_argument("--role", choices=["engine", "replica", "receiver"],
                       help="engine: always run the engine; replica: run it while holding the lease (the default on "
                            "PostgreSQL); receiver: only receive (started by --receivers)")
    serve.set_defaults(func=_serve)

    check = sub.add_parser("check", help="validate rule and config files (like promtool check)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="rule/config files or directories (default: rules/)")
    check.add_argument("--runbooks", metavar="DIR", help="runbook pages to check references against (default: runbooks/ next to the rules)")
    check.add_argument("--strict", action="store_true", help="warnings fail too")
    check.add_argument("--prometheus-rules", nargs="+", metavar="FILE",
                       help="Prometheus rule files of the site: say which signal each alerting rule maps to")
    check.set_defaults(func=lambda a: _authoring("check", a))

    test = sub.add_parser("test", help="run rule unit tests (default: rules/tests/*.test.yml)")
    test.add_argument("files", nargs="*", metavar="FILE")
    test.add_argument("--run", metavar="REGEX", help="only tests whose name matches")
    test.set_defaults(func=lambda a: _authoring("test", a))

    replay = sub.add_parser("replay", help="run recorded webhooks through the rules on a virtual clock, no network")
    replay.add_argument("file", metavar="FILE", help="JSON lines of {received_at, body}, e.g. from serve --record")
    replay.add_argument("--rules", action="append", metavar="PATH", help="rule file or directory (repeatable; default: rules/)")
    replay.add_argument("--config", help="config file: its rule paths, normalization and notifiers")
    replay.add_argument("--json", action="store_true", help="machine-readable output")
    replay.add_argument("--tail", metavar="DURATION", help="keep the clock running this long after the last webhook (default: the hold-down)")
    replay.add_argument("--until", metavar="RFC3339", help="stop the clock at this time")
    replay.set_defaults(func=lambda a: _authoring("replay", a))

    exp = sub.add_parser("explain", help="why each alert gets its signal, node, GPU and group (which rule, which evidence)")
    exp.add_argument("file", nargs="?", metavar="FILE", help="an Alertmanager webhook (JSON) or a recording (serve --record)")
    exp.add_argument("--incident", metavar="ID", help="explain the members of a stored incident (from a running alertd)")
    exp.add_argument("--rules", action="append", metavar="PATH", help="rule file or directory (repeatable; default: rules/)")
    exp.add_argument("--config", help="config file: its rule paths and normalization")
    exp.add_argument("--url", default=os.environ.get("ALERTD_URL", "http://127.0.0.1:9095"), help="alertd for --incident")
    exp.add_argument("--token", help="API bearer token (or ALERTD_API_TOKEN)")
    exp.set_defaults(func=_explain)

    from alertd.cli import api_client as remote
    remote.add_parsers(sub)

    audit = sub.add_parser("audit", help="who acknowledged, resolved, silenced or reloaded what, and when")
    audit.add_argument("--config", help="the YAML config alertd serves with (finds the store)")
    audit.add_argument("--data-dir", help="directory of the embedded SQLite store (default: the config's)")
    audit.add_argument("--since", help="a duration back from now (24h) or an RFC 3339 time")
    audit.add_argument("--actor")
    audit.add_argument("--action", help="ack, resolve, silence_1h, unsilence, reload, ...")
    audit.add_argument("--limit", type=int, default=100)
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    audit.set_defaults(func=_audit)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
