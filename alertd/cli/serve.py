"""``alertd serve``: flags -> options -> preflight -> the app's parts -> App.run.

The assembly lives in the CLI because it joins the app layer (the service and its parts) with the web
layer (the application, its credentials and its certificate), which alertd/app/ does not import. Every
part is built with what it needs (constructor injection) and the App starts them in order: the service's
own (store, clients, backlog counter, leadership), the receiver group, the reloader, the recorder, the web
server; they stop in reverse.
"""
from __future__ import annotations

import gc
import logging
import signal
import sqlite3
import ssl
import sys
from typing import Callable

from alertd.alertmanager.reconcile_loop import build_reconciler
from alertd.app.assemble import build_service
from alertd.app.lifecycle import App, Part
from alertd.app.listener import child_environ, inherited_listener
from alertd.app.options import ServeOptions
from alertd.app.preflight import Cleared, PreflightFailed, damaged, preflight
from alertd.app.receiver_group import GroupDir, ask_reload, engine_failure
from alertd.app.receiver_processes import ReceiverPool
from alertd.app.receivers import ReceiverGroup
from alertd.app.reload import Outcome, Reloader
from alertd.app.rule_watch import RuleWatcher
from alertd.app.service import Service
from alertd.app.startup_line import start_line
from alertd.app.store_health import StoreHealth
from alertd.web.server import Listen, WebServer
from alertd.authoring.record import Recorder
from alertd.cli.logging_setup import setup_logging
from alertd.config.secrets import configured_secrets
from alertd.core.redaction import Redactor
from alertd.config.settings import Config, load_config
from alertd.core.errors import InvalidDocument
from alertd.core.service_metrics import Metrics
from alertd.enrich import Enricher
from alertd.store import open_store
from alertd.web.app import build_app
from alertd.web.auth import Authenticator, exposure_problem
from alertd.web.keys import RELOAD
from alertd.web.tls import ListenerTLS, TLSError

log = logging.getLogger("alertd")


class Certificate:
    """The listener's TLS certificate (``listen_tls``), loaded by the preflight, re-read on reload."""

    def __init__(self, options: ServeOptions, cfg: Config):
        self.tls = ListenerTLS.of(cfg.tls)
        self.context: ssl.SSLContext | None = None

    def problem(self) -> str:
        try:
            self.context = self.tls.context() if self.tls else None
        except TLSError as exc:
            return str(exc)
        return ""

    def reload(self) -> Outcome:
        if self.tls is None or self.context is None or self.tls.reload(self.context):
            return True, ""
        return False, f"TLS certificate {self.tls.cert_file} not reloaded"


class CredentialReloader:
    """The API's and the receiver's credentials; a reload re-reads the config's token files (rotation
    without a restart) and keeps the running ones when the config no longer reads."""

    def __init__(self, options: ServeOptions, cfg: Config, metrics: Metrics, redactor: Redactor):
        self.config_path, self.redactor = options.config_path, redactor
        self.auth = Authenticator.from_config(cfg, insecure_no_auth=options.insecure_no_auth,
                                              failures=metrics.auth_failures)

    def reload(self) -> Outcome:
        """New token files: the log's redaction learns their values before anyone can present them."""
        try:
            cfg = load_config(self.config_path)
            self.redactor.remember(configured_secrets(cfg.raw))
            self.auth.replace(Authenticator.from_config(cfg))
        except InvalidDocument as exc:
            log.error("credentials not reloaded, keeping the running ones:\n%s", exc)
            return False, str(exc)
        log.info("credentials reloaded")
        return True, ""


def run(options: ServeOptions, cfg: Config, group: GroupDir | None) -> int:
    """Preflight, then the App until SIGTERM or SIGINT; 2 with one line on stderr when it cannot start."""
    options.apply(cfg)
    redactor = setup_logging(cfg.log.format, cfg.log.level, configured_secrets(cfg.raw))
    metrics = Metrics()
    credentials, certificate = CredentialReloader(options, cfg, metrics, redactor), Certificate(options, cfg)
    try:
        cleared = preflight(options, cfg, [lambda: exposure_problem(cfg.host_port[0], credentials.auth),
                                           certificate.problem])
    except PreflightFailed as exc:
        print(exc, file=sys.stderr)
        return 2
    app = App(parts(options, cfg, cleared, group, metrics, credentials, certificate))
    if options.role != "receiver":  # one line for the group: where, which store, which rules
        log.info("%s", start_line(cfg, tls=certificate.context is not None, receivers=options.receivers if group else 0))
    _tune_gc()
    try:
        app.run()
    except Exception as exc:  # e.g. the database went away between the check and the start, a port in use
        log.debug("start-up failed", exc_info=True)
        # A page read only now (the state, the inbox) may be the damaged one.
        problem = damaged(options.database) if options.backend == "sqlite" and \
            isinstance(exc, sqlite3.DatabaseError) else ""
        print(f"alertd: {problem}" if problem else
              f"alertd: could not start: {type(exc).__name__}: {exc} (run with log.level debug for the traceback)",
              file=sys.stderr)
        return 2
    return 0


def parts(options: ServeOptions, cfg: Config, cleared: Cleared, group: GroupDir | None, metrics: Metrics,
          credentials: CredentialReloader, certificate: Certificate) -> list[Part]:
    """The service's parts, then the receiver group, the reloader, the recorder and the web server."""
    joined = GroupDir.joined() if options.role == "receiver" else None  # a receiver of a group
    recorder = Recorder(options.record) if options.record else None
    svc = _service(options, cfg, cleared, metrics, joined, recorder)
    sock = cleared.listener  # the group's port, bound by the preflight: the receivers inherit it
    pool = ReceiverPool(options.receivers, options.receiver_argv(), pass_fds=[sock.fileno()],
                        env={**group.environ(), **child_environ(sock)}) if group and sock else None
    steps: list[Callable[[], Outcome]] = [svc.reload_rules, credentials.reload, certificate.reload]
    if pool is not None:  # the receiver processes re-read their rules and credentials too
        steps.append(lambda: _signal(pool, signal.SIGHUP))
    # A group's reload is recorded once, by its engine process.
    reloader = Reloader(steps, audit=svc.audit if joined is None else None)
    web = build_app(svc, credentials.auth)
    # POST /-/reload: rules, credentials and certificate, as SIGHUP does; a group's receiver asks its engine
    # process, which reloads the whole group.
    web[RELOAD] = reloader if joined is None else (lambda: ask_reload(str(joined.control)))
    out: list[Part] = list(svc.parts)
    if group is not None and pool is not None:
        out.append(ReceiverGroup(group, pool, reload=reloader.reload, failure=svc.health.failure,
                                 publish=svc.metrics.publish))
    out.append(reloader)
    if joined is None and options.role != "receiver" and cfg.rules.watch_interval > 0:  # an edited ConfigMap reloads
        out.append(RuleWatcher(lambda: svc.cfg.rule_paths, reloader.reload_recorded, cfg.rules.watch_interval))
    if recorder is not None:
        out.append(recorder)
    host, port = cfg.host_port
    # With receivers the engine process binds nothing, so an engine step never holds up a webhook that the
    # kernel would have handed to this process's event loop.
    inherited = inherited_listener() if options.role == "receiver" else None
    out.append(WebServer(web, Listen(host, port, ssl_context=certificate.context, bind=group is None, sock=inherited)))
    return out


def _service(options: ServeOptions, cfg: Config, cleared: Cleared, metrics: Metrics,
             joined: GroupDir | None, recorder: Recorder | None) -> Service:
    store = open_store(cfg.storage.backend, data_dir=cfg.data_dir, sqlite_path=cfg.storage.sqlite_path,
                       synchronous=cfg.storage.synchronous, dsn=cfg.storage.postgres_dsn, password=cfg.storage.postgres_password,
                       checkpoints=options.role != "receiver")
    enricher = Enricher.from_settings(cfg.enrich) if options.role != "receiver" else None
    # A group's receiver answers /readyz for the engine process, which takes no connection.
    health = StoreHealth(engine_report=(lambda: engine_failure(joined.health)) if joined is not None else None)
    return build_service(cfg, store, cleared.rules, enricher=enricher, role=options.role,
                         shared_inbox=options.shared_inbox, metrics=metrics, health=health,
                         reconciler=build_reconciler,  # runs on the leader; any process fetches truncated groups
                         recorder=recorder)


def _signal(pool: ReceiverPool, signum: int) -> Outcome:
    pool.signal(signum)
    return True, ""


def _tune_gc() -> None:
    """Everything loaded so far lives as long as the process: keep it out of the cyclic collector, and
    collect less often (the engine allocates many small, acyclic objects per alert)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 50)
