"""Command line: serve | check | test | replay | explain | audit; incidents | gpus | rma (alertd.cli.api_client)."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from datetime import timedelta
from urllib.parse import quote
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alertd.core.vocabulary import PROCESS_ROLES
from alertd.core.json_types import JSONObject, obj
from alertd.core.errors import InvalidDocument

if TYPE_CHECKING:
    from alertd.config.settings import Config

log = logging.getLogger("alertd")


def _config(path: str | None) -> Config | None:
    """The configuration, or None after saying on stderr what is wrong with it."""
    from alertd.config.settings import load_config

    try:
        return load_config(path)
    except InvalidDocument as exc:
        print(f"invalid configuration:\n{exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    """flags -> options -> preflight -> App.run (alertd/cli/serve.py). With receivers, the engine process first
    makes the group's directory and sets the metrics variable in its environment, before the service's
    metrics exist (alertd/app/receiver_group.py, alertd/core/service_metrics.py)."""
    from alertd.app.options import ServeOptions
    from alertd.app.receiver_group import GroupDir
    from alertd.cli import serve

    if (cfg := _config(args.config)) is None:
        return 2
    options = ServeOptions.from_flags(args, cfg)
    group = GroupDir.create() if options.leads_group else None
    if group is not None:
        group.enter()
    try:
        return serve.run(options, cfg, group)
    finally:
        if group is not None:
            group.remove()


def _audit(args: argparse.Namespace) -> int:
    """Print the audit trail straight from the store (works while alertd runs, and when it does not)."""
    from datetime import datetime, timezone

    from alertd.core.durations import parse_duration
    from alertd.core.model import parse_iso
    from alertd.store import open_store
    from alertd.store.base import AuditEntry

    from alertd.cli import api_client

    since = None
    if args.since:
        try:
            since = (datetime.now(timezone.utc) - parse_duration(args.since)) if args.since[-1].isalpha() \
                else parse_iso(args.since)
        except (ValueError, OverflowError):
            print(f"--since {args.since!r}: give a duration (24h) or an RFC 3339 time", file=sys.stderr)
            return 2
    if args.url:  # a running alertd's API: for a store this machine cannot open
        return api_client.audit(args, since.isoformat() if since else "")
    if (cfg := _config(args.config)) is None:
        return 2
    data_dir = Path(args.data_dir) if args.data_dir else cfg.data_dir
    db = Path(cfg.storage.sqlite_path) if cfg.storage.sqlite_path else data_dir / "alertd.sqlite3"
    if cfg.storage.backend == "sqlite" and not db.exists():
        print(f"alertd: no store at {db} (give --config or --data-dir of the alertd to audit)", file=sys.stderr)
        return 2
    store = open_store(cfg.storage.backend, data_dir=data_dir, sqlite_path=cfg.storage.sqlite_path, dsn=cfg.storage.postgres_dsn,
                       password=cfg.storage.postgres_password)

    async def read() -> list[AuditEntry]:
        await store.open()
        try:
            return await store.list_audit(since=since, actor=args.actor, action=args.action, limit=args.limit)
        finally:
            await store.close()

    entries = asyncio.run(read())
    for e in reversed(entries):  # oldest first, like a log
        print(json.dumps(e.to_dict()) if args.json else api_client.audit_line(e.to_dict()))
    return 0


def _explain(args: argparse.Namespace) -> int:
    """``--incident`` reads the stored incident through the one API client (alertd/cli/api_client.py)."""
    from alertd.authoring import explain
    from alertd.cli import api_client

    def fetch(incident_id: str) -> JSONObject:
        return obj(api_client.call(args, "GET", f"/api/v1/incidents/{quote(incident_id, safe='')}"), "the incident")

    try:
        return explain.main(file=args.file, incident=args.incident, rule_paths=args.rules, config=args.config,
                            out=sys.stdout, err=sys.stderr, fetch=fetch)
    except api_client.ApiError as exc:
        print(f"alertd explain: {exc}", file=sys.stderr)
        return 1


def _authoring(command: str, args: argparse.Namespace) -> int:
    from alertd.authoring import check, replay, ruletest
    from alertd.authoring.race import Timing

    try:
        if command == "check":
            return check.main(args.paths, sys.stdout, runbooks=args.runbooks, strict=args.strict,
                              prometheus_rules=args.prometheus_rules, show_all=args.all,
                              timing=Timing(args.group_wait, args.group_interval, args.evaluation_interval))
        if command == "test":
            return ruletest.main(args.files, args.run, sys.stdout)
        return replay.main(args.file, rule_paths=args.rules, config=args.config, as_json_output=args.json,
                           tail=args.tail, until=args.until, out=sys.stdout, err=sys.stderr)
    except BrokenPipeError:  # e.g. `alertd replay FILE | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _serve_parser(sub: Any) -> None:
    """The flags of ``serve``, read into ServeOptions (alertd/app/options.py)."""
    serve = sub.add_parser("serve", help="run the receiver, engine and notifiers")
    serve.add_argument("--config", help="YAML config file (see examples/alertd.yml)")
    serve.add_argument("--listen", type=_listen_flag, help="HOST:PORT (default 127.0.0.1:9095)")
    serve.add_argument("--data-dir", help="directory for the embedded SQLite store (default ./data)")
    serve.add_argument("--log-format", choices=["text", "json"])
    serve.add_argument("--insecure-no-auth", action="store_true",
                       help="serve a non-loopback address without API authentication (refused otherwise)")
    serve.add_argument("--record", metavar="FILE", help="append every accepted webhook to FILE (JSON lines) for `alertd replay`")
    serve.add_argument("--receivers", type=int, metavar="N",
                       help="receiver processes beside the engine, sharing its listening socket; "
                            "default: 1 on SQLite with two or more cores, else 0")
    serve.add_argument("--role", choices=PROCESS_ROLES,
                       help="engine: always run the engine; replica: run it while holding the lease (the default on "
                            "PostgreSQL); receiver: only receive (started by --receivers)")
    serve.set_defaults(func=_serve)


def build_parser() -> argparse.ArgumentParser:
    from alertd.cli import api_client as remote

    from alertd.core.version import version

    parser = argparse.ArgumentParser(prog="alertd", description="GPU-aware incident correlation for Alertmanager.")
    parser.add_argument("--version", action="version", version=f"alertd {version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    _serve_parser(sub)

    check = sub.add_parser("check", help="validate rule and config files (like promtool check)")
    check.add_argument("paths", nargs="*", metavar="PATH", help="rule/config files or directories (default: rules/)")
    check.add_argument("--runbooks", metavar="DIR", help="runbook pages to check references against (default: runbooks/ next to the rules)")
    check.add_argument("--strict", action="store_true", help="warnings fail too")
    check.add_argument("--prometheus-rules", nargs="+", metavar="FILE",
                       help="Prometheus rule files or directories of the site: say which signal each GPU-related "
                            "alerting rule maps to (exit 1 when one does not parse, like promtool)")
    check.add_argument("--all", action="store_true", help="with --prometheus-rules: list the other rules too")
    _timing_flags(check)
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
    remote.connection(exp, "for --incident")
    exp.set_defaults(func=_explain)
    remote.add_parsers(sub)

    audit = sub.add_parser("audit", help="who acknowledged, resolved, silenced or reloaded what, and when")
    audit.add_argument("--config", help="the YAML config alertd serves with (finds the store)")
    audit.add_argument("--data-dir", help="directory of the embedded SQLite store (default: the config's)")
    audit.add_argument("--since", help="a duration back from now (24h) or an RFC 3339 time")
    audit.add_argument("--actor")
    audit.add_argument("--action", help="ack, resolve, silence_1h, unsilence, reload, ...")
    audit.add_argument("--limit", type=int, default=100)
    audit.add_argument("--json", action="store_true", help="one JSON object per line")
    remote.connection(audit, "to read the trail through its API (an admin token) instead of the store", url=None)
    audit.set_defaults(func=_audit)
    return parser


def _listen_flag(value: str) -> str:
    """--listen HOST:PORT, refused like the config's ``listen`` when the port is out of range."""
    from alertd.config.settings import listen_port_problem

    problem = listen_port_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def _timing_flags(check: argparse.ArgumentParser) -> None:
    """The timers ``check --prometheus-rules`` holds event rules against (alertd/authoring/race.py)."""
    check.add_argument("--group-wait", type=_duration_flag, default="30s", metavar="DURATION",
                       help="with --prometheus-rules: Alertmanager's group_wait the alerts must outlast (default 30s)")
    check.add_argument("--group-interval", type=_duration_flag, default="5m", metavar="DURATION",
                       help="with --prometheus-rules: Alertmanager's group_interval (default 5m); an event rule "
                            "firing shorter than group_wait + group_interval is warned of, with the "
                            "keep_firing_for that closes the gap")
    check.add_argument("--evaluation-interval", type=_duration_flag, default="1m", metavar="DURATION",
                       help="with --prometheus-rules: Prometheus's evaluation_interval, for groups that set none "
                            "(default 1m)")


def _duration_flag(value: str) -> timedelta:
    """A Prometheus duration string ("30s", "5m", "1h30m"), refused with the reason otherwise."""
    from alertd.core.durations import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a duration like 30s or 5m: {value!r} ({exc})") from exc


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`alertd explain ... | head`): what it wanted it has; stop quietly, like
        # the shell's own tools. Python would report the failed flush at exit: point stdout elsewhere first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
    return code


if __name__ == "__main__":
    sys.exit(main())
