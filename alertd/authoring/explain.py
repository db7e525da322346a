"""``alertd explain``: why each alert got its signal, node, GPU and group.

Input: an Alertmanager webhook (JSON), a recording (``serve --record`` JSON
lines) or a stored incident (``--incident INC-7``, read from a running alertd).
Runs the same normalize and classify code as the engine, with the same rules,
and prints for every alert what decided each field: the rule (``file:line``)
and the evidence (alert name, expression metric, label, annotation text).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, TextIO

from alertd.authoring.node_carry import node_warning
from alertd.config.settings import Config
from alertd.engine.classify import Classification, classify_explained
from alertd.engine.correlate import fields_of, group_for
from alertd.core.errors import InvalidDocument
from alertd.core.json_types import JSONObject, as_array, member, objects
from alertd.core.model import Alert, Signal, Subject, as_alert_status, parse_iso
from alertd.engine.identity import NodeLookup, nvrm_line
from alertd.engine.normalize import NormalizeConfig, normalize
from alertd.promql.expr import expr_of_url
from alertd.receive.payload import BadPayload, parse_notification
from alertd.rules.ruleset import RuleSet
from alertd.core.vocabulary import SignalKind


@dataclass(slots=True)
class Explained:
    alert: Alert
    decision: Classification
    node_from: str
    gpu_from: str
    group: str
    key: str
    group_rule: str
    stored: Signal | None = None  # what the engine decided when the alert arrived (--incident)
    node_warnings: tuple[str, ...] = ()  # why its alerts cannot carry a node, and what to add
    stored_node_from: str = ""  # where the node came from when the alert arrived (--incident)


def node_from(s: Subject) -> str:
    if s.node:
        return s.node_source or "labels"
    return f"node unknown: {s.origin}" if s.origin else "node unknown: no node label"


DOCKER_ADVICE = ("name the host: a node label in the scrape (static_configs labels or relabel), "
                 "normalize.node_map (container ID or instance -> host), or scrape the exporter on the host's "
                 "address, the one its node-exporter has (docs/rules.md, 'Docker hosts')")


def node_advice(alert: Alert, ncfg: NormalizeConfig) -> list[str]:
    """Why this alert (and its rule) names no node of its own, and what to add."""
    s = alert.subject
    named = s.node and s.node_source.startswith(("label ", "log host", "map "))  # the labels name it: no doubt
    carry = "" if named else node_warning(expr_of_url(alert.generator_url), alert.labels, ncfg.node_labels)
    if carry:
        return ["its rule: " + carry]
    if s.node_refused:
        return [f"refused {why}" for why in s.node_refused.split("\n")] + ([] if s.node else [DOCKER_ADVICE])
    if not s.node and s.origin.startswith("exporter pod"):
        return [f"Hostname/pod name the dcgm-exporter pod ({s.origin.removeprefix('exporter pod ')}), not a node: "
                "add a node label (relabel __meta_kubernetes_pod_node_name to node), map it in "
                "normalize.node_map, or let alertd serve ask Kubernetes (enrich.kube)"]
    if not s.node:
        return [f"no node label ({', '.join(ncfg.node_labels)}): its incident names no node"]
    return []


def explain(alert: Alert, rules: RuleSet, ncfg: NormalizeConfig, stored: Signal | None = None,
            lookup: NodeLookup | None = None, stored_node_from: str = "") -> Explained:
    normalize(alert, ncfg, lookup)
    decision = classify_explained(alert, rules, ncfg)
    alert.signal = decision.signal
    gpu_labels = [n for n in ("UUID", "uuid", "gpu_uuid", "gpu", "pci_bus_id", "pci") if alert.labels.get(n)]
    line = None if "pci_bus_id" in gpu_labels or "pci" in gpu_labels else nvrm_line(
        alert.labels, alert.annotations, ncfg.log_line_fields)
    gpu_from = ", ".join(filter(None, ["labels " + ", ".join(gpu_labels) if gpu_labels else "",
                                       f"PCI address of the NVRM line in {line[1]}" if line else ""]))
    found = group_for(fields_of(alert), rules.correlation.groups)
    group, key = (found[0].name, found[1]) if found else ("unmatched", f"unmatched|alertname={alert.name}")
    matchers = ", ".join(map(str, found[0].matchers)) if found else ""
    by = ", ".join(found[0].by) if found else "alertname"
    return Explained(
        alert, decision,
        node_from=node_from(alert.subject),
        gpu_from=gpu_from or "no GPU labels",
        group=group, key=key,
        group_rule=f"first group matching [{matchers}] by ({by})" if matchers else f"group by ({by})",
        stored=stored, node_warnings=tuple(node_advice(alert, ncfg)), stored_node_from=stored_node_from,
    )


def alerts_of_file(path: str | Path) -> list[Alert]:
    """Alerts of a webhook body (JSON) or of a recording (JSON lines of {received_at, body})."""
    text = Path(path).read_text(encoding="utf-8")
    bodies: list[tuple[datetime, Any]] = []
    try:
        doc = json.loads(text)
        bodies.append((datetime.now(timezone.utc), doc))
    except json.JSONDecodeError:
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                bodies.append((parse_iso(entry["received_at"]) or datetime.now(timezone.utc), entry["body"]))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}:{n}: neither a webhook (JSON) nor a recording line ({exc})") from None
    out: list[Alert] = []
    for i, (received, body) in enumerate(bodies, 1):
        try:
            out.extend(parse_notification(body, received).alerts)
        except BadPayload as exc:
            where = f"{path}:{i}" if len(bodies) > 1 else str(path)
            raise ValueError(f"{where}: not an Alertmanager webhook: {exc}") from None
    return out


def alerts_of_incident(data: JSONObject) -> list[tuple[Alert, Signal]]:
    """The members of a stored incident (API form, ``GET /api/v1/incidents/{id}``) as alerts, with the signal
    stored for each."""
    out = []
    for m in objects(data.get("members")):
        ends = m.get("endsAt")
        alert = Alert(fingerprint=str(m["fingerprint"]), status=as_alert_status(str(m["status"])),
                      labels={str(k): str(v) for k, v in member(m, "labels").items()},
                      annotations={"summary": str(m["summary"])} if m.get("summary") else {},
                      starts_at=parse_iso(str(m["startsAt"])) or datetime.now(timezone.utc),
                      ends_at=parse_iso(ends if isinstance(ends, str) else None),
                      generator_url=str(m.get("generatorURL", "")))
        out.append((alert, Signal.from_dict(member(m, "signal"))))
    return out


def _signal_line(sig: Signal) -> str:
    what = sig.title + (f" [{sig.detail}]" if sig.detail and sig.kind != SignalKind.XID else "")
    return f"{sig.kind}  {what}  ({sig.severity}, {sig.category})"


def _print_decision(d: Classification, out: TextIO) -> None:
    print(f"  signal  {_signal_line(d.signal)}", file=out)
    if d.stage == "none":
        print("          no rule matched: signals.yml names, expression, well-known names, labels, annotation text",
              file=out)
        if d.gpu_looking:
            print(f"          WARNING: looks like a GPU alert ({d.gpu_looking}) but is unclassified", file=out)
    else:
        print(f"          by {d.stage}{' ' + d.rule if d.rule else ''}: {d.evidence}", file=out)
    if d.signal.kind == SignalKind.XID:
        print(f"          Xid {d.signal.xid} from {d.xid_from}" if d.signal.xid else
              "          Xid code unknown: no xid/err_code label, no xid annotation, no code in the text", file=out)


def _print_stored(stored: Signal, now: Classification, out: TextIO) -> None:
    """A stored incident: what alertd decided when the alert arrived (it saw every annotation then)."""
    basis, _, xid_from = stored.basis.partition("; Xid from ")
    print(f"  signal  {_signal_line(stored)}", file=out)
    print(f"          by {basis} (when received)", file=out)
    if stored.kind == SignalKind.XID:
        print(f"          Xid {stored.xid} from {xid_from}" if stored.xid else "          Xid code unknown", file=out)
    if (stored.kind, stored.xid) != (now.signal.kind, now.signal.xid):
        sig = now.signal
        what = sig.kind + (f" Xid {sig.xid}" if sig.xid else " (code unknown)" if sig.kind == SignalKind.XID else "")
        print(f"          the current rules on what the incident keeps (labels, summary, expression; not the other "
              f"annotations) say: {what}{f' by {now.stage} {now.rule}' if now.stage != 'none' else ''}", file=out)


def print_explained(rows: list[Explained], out: TextIO) -> None:
    for e in rows:
        a, d = e.alert, e.decision
        s = a.subject
        print(f"{a.name or '<no alertname>'}  {a.status}  fingerprint {a.fingerprint}", file=out)
        if e.stored is not None and e.stored.basis:
            _print_stored(e.stored, d, out)
        else:
            _print_decision(d, out)
            if e.stored is not None and (e.stored.kind, e.stored.xid) != (d.signal.kind, d.signal.xid):
                print(f"          when received: {e.stored.kind}{f' Xid {e.stored.xid}' if e.stored.xid else ''}", file=out)
        expr = expr_of_url(a.generator_url)
        if d.expr_error:
            print(f"          expression not parsed: {d.expr_error}", file=out)
        elif expr and d.stage != "expression":
            print(f"          expression: {' '.join(expr.split())}", file=out)
        print(f"  node    {s.node or '-'}  from {e.node_from}", file=out)
        if e.stored_node_from and e.stored_node_from != e.node_from:
            print(f"          when received: from {e.stored_node_from}", file=out)
        for warning in e.node_warnings:
            print(f"          WARNING: {warning}", file=out)
        if s.gpu is not None:
            gpu = "  ".join(f"{k} {v}" for k, v in (("index", s.gpu.index), ("uuid", s.gpu.uuid), ("pci", s.gpu.pci_bus_id)) if v)
            print(f"  gpu     {gpu}  from {e.gpu_from}", file=out)
        else:
            print("  gpu     -", file=out)
        print(f"  group   {e.group}  key {e.key}", file=out)
        print(f"          {e.group_rule}", file=out)
        print("", file=out)


def _kubernetes_answers(cfg: Config, alerts: list[Alert]) -> NodeLookup | None:
    """With enrich.kube configured, ask Kubernetes for the exporter pods and addresses the alerts point at,
    as alertd serve does before each step (bounded by normalize.kubernetes.wait)."""
    import asyncio

    from alertd.enrich.node_index import NodeIndex

    index = NodeIndex.from_config(cfg)
    if index is None:
        return None

    async def ask() -> None:
        try:
            await index.prepare(alerts)
        finally:
            await index.close()

    asyncio.run(ask())
    return index


def main(*, file: str | None, incident: str | None, rule_paths: list[str] | None, config: str | None,
         out: TextIO, err: TextIO, fetch: Callable[[str], JSONObject] | None = None) -> int:
    from alertd.config.settings import load_config
    from alertd.rules.shipped import default_rule_paths
    from alertd.app.recording_rules import with_site_recordings
    from alertd.rules.ruleset import load_rules

    if bool(file) == bool(incident):
        print("explain needs a FILE (webhook or recording) or --incident ID", file=err)
        return 2
    try:
        cfg = load_config(config) if config else Config()
        rules = with_site_recordings(load_rules(list(rule_paths or (cfg.rule_paths if config else default_rule_paths()))),
                                     cfg)  # the site's recording rules (classify.prometheus_rules)
    except InvalidDocument as exc:
        print(f"invalid {'configuration or ' if config else ''}rules:\n{exc}", file=err)
        return 1
    rows: list[Explained] = []
    if file:
        try:
            alerts = alerts_of_file(file)
        except (OSError, ValueError) as exc:
            print(f"cannot explain {file}: {exc}", file=err)
            return 1
        lookup = _kubernetes_answers(cfg, alerts)
        rows = [explain(a, rules, cfg.normalize, lookup=lookup) for a in alerts]
    else:
        assert fetch is not None and incident is not None
        data = fetch(incident)
        print(f"{data['id']}  {data['status']}  {data['severity']}  {data['title']}", file=out)
        print(f"  key {data['key']}  group {data['group']}  signals {','.join(map(str, as_array(data.get('signals'))))}\n",
              file=out)
        sources = [str(member(m, "subject").get("node_source") or "") for m in objects(data.get("members"))]
        rows = [explain(a, rules, cfg.normalize, stored, stored_node_from=source)
                for (a, stored), source in zip(alerts_of_incident(data), sources)]
    print_explained(rows, out)
    return 0


__all__ = ["Explained", "alerts_of_file", "alerts_of_incident", "explain", "main", "print_explained"]
