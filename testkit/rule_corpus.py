"""Public-shaped GPU rule sets, rendered by promtool from firing series, read by alertd.

Each case of tests/fixtures/gpu-rule-corpus is a Prometheus rule file in the
shape a public rule set has (its header names the source) and a ``.series.yml``
beside it: the series its exporter and scrape really produce, when to evaluate,
the Kubernetes the site has (nodes, exporter pods), and what alertd must make
of each rule's alerts. promtool evaluates the rules on those series (``promtool
test rules`` with no alert expected: it prints every alert that fired, labels
and annotations rendered by Prometheus's own templating), and each alert goes,
as Alertmanager would deliver it, through `alertd explain`'s normalize and
classify with the shipped rules plus the corpus's site file; each rule file
through `alertd check --prometheus-rules`.

Per exporter: the GPU rules, how many alertd classified right (kind, detail,
severity, Xid code as expected, for every alert of the rule), alerts on a
wrong node (a node other than the host, where unknown is the honest answer
when nothing names it), GPU rules whose alerts end with no node and whether
`check` names them, and warnings on rules the site declared not GPU health.
"""
from __future__ import annotations

import ast
import io
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import yaml

from alertd.authoring import explain, promrules
from alertd.config.settings import parse_config
from alertd.core.model import FIRING, Alert
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.recording import rule_groups
from alertd.rules.ruleset import RuleSet, load_rules

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "gpu-rule-corpus"
SITE_RULES = CORPUS / "alertd-site"  # the site's own alertd rules: rules declared not GPU health
_BLOCK = re.compile(r"alertname: (?P<name>\S+), time: [^,]*,\s*exp:\[.*?\],\s*got:\[(?P<got>.*?)\n\s*\]", re.S)
_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class StaticKubernetes:
    """The site's Kubernetes as the service's index would know it (nodes' addresses, exporter pods)."""

    nodes: dict[str, list[str]] = field(default_factory=dict)
    pods: dict[str, str] = field(default_factory=dict)  # "namespace/pod" -> node
    pod_ips: dict[str, str] = field(default_factory=dict)  # per-node agents' pod IPs -> node
    generation: int = 0

    def node_of_pod(self, cluster: str, namespace: str, pod: str) -> str:
        return self.pods.get(f"{namespace}/{pod}") or next(
            (n for k, n in self.pods.items() if k.endswith(f"/{pod}") and not namespace), "")

    def node_of_address(self, cluster: str, address: str) -> str:
        by_address = {a: n for n, addrs in self.nodes.items() for a in [n, *addrs]}
        return by_address.get(address) or self.pod_ips.get(address, "")

    def is_node(self, cluster: str, name: str) -> bool | None:
        if not self.nodes:
            return None
        return any(name == n or name in addrs for n, addrs in self.nodes.items())


@dataclass
class RuleOutcome:
    alert: str
    gpu_health: bool
    fired: int = 0
    right: bool = False
    wrong_node: int = 0  # alerts filed under a node that is not the host
    no_node: int = 0  # alerts with the node unknown
    check_named: bool = False  # `check` warns or notes that the rule's alerts may carry no node
    warned: bool = False  # `check` printed a warning for the rule
    declared: bool = False  # the site's signals file says it is not GPU health
    why: list[str] = field(default_factory=list)
    checked: str = ""  # what `check` reads the rule as (kind/detail, whether an Xid code will be known)
    explained: set[str] = field(default_factory=set)  # what `explain` read each of its alerts as, the same way

    @property
    def agree(self) -> bool:
        """`check` and `explain` read the rule alike: every alert as `check` said."""
        return self.explained <= {self.checked}


@dataclass
class CaseOutcome:
    name: str
    exporter: str
    rules: list[RuleOutcome] = field(default_factory=list)
    promtool_rc: int = 0
    check_rc: int = 0


def render(rule_file: Path, case: dict[str, Any], workdir: Path) -> dict[str, list[dict[str, dict[str, str]]]]:
    """promtool's alerts per alert name: labels and annotations as Prometheus rendered them."""
    names = [str(r["alert"]) for g in rule_groups(yaml.safe_load(rule_file.read_text()))
             for r in g.get("rules") or [] if "alert" in r]
    test = {"rule_files": [str(rule_file)], "evaluation_interval": case.get("interval", "1m"),
            "tests": [{"interval": case.get("interval", "1m"), "input_series": case["series"],
                       "alert_rule_test": [{"eval_time": case["eval_time"], "alertname": n, "exp_alerts": []}
                                           for n in dict.fromkeys(names)]}]}
    path = workdir / f"{rule_file.stem}.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    if "FAILED" not in done.stdout + done.stderr and done.returncode != 0:
        raise RuntimeError(f"promtool failed on {rule_file}:\n{done.stdout}\n{done.stderr}")
    return {n: [] for n in names} | parse_promtool(done.stdout + done.stderr)


def parse_promtool(text: str) -> dict[str, list[dict[str, dict[str, str]]]]:
    """The alerts promtool printed as "got" for each alert name, labels and annotations unquoted."""
    out: dict[str, list[dict[str, dict[str, str]]]] = {}
    for block in _BLOCK.finditer(text):
        for alert in re.split(r"\n\s*\d+:\n", "\n" + block.group("got"))[1:]:
            parts = dict(re.findall(r"(Labels|Annotations):(\{.*\})", alert))
            out.setdefault(block.group("name"), []).append({k.lower(): _labels(v) for k, v in parts.items()})
    return out


def _labels(text: str) -> dict[str, str]:
    """``{a="b", c="d"}`` as Go prints labels (strconv.Quote escapes) -> dict."""
    return {k: ast.literal_eval(f'"{v}"') for k, v in _PAIR.findall(text)}


def webhook_alert(rule: dict[str, Any], rendered: dict[str, dict[str, str]], n: int) -> Alert:
    """The alert as Alertmanager delivers it: Prometheus's labels and annotations, its generatorURL."""
    url = f"http://prometheus:9090/graph?g0.expr={quote_plus(str(rule['expr']))}&g0.tab=1"
    return Alert(fingerprint=f"{n:016x}", status=FIRING, labels=rendered.get("labels", {}),
                 annotations=rendered.get("annotations", {}), starts_at=datetime.now(timezone.utc), ends_at=None,
                 generator_url=url)


def prepared_rule_file(path: Path, workdir: Path) -> Path:
    """A PrometheusRule resource's groups as the plain file Prometheus loads (the operator's job)."""
    doc = yaml.safe_load(path.read_text())
    if "spec" not in doc:
        return path
    plain = workdir / path.name
    plain.write_text(yaml.safe_dump({"groups": rule_groups(doc)}, sort_keys=False))
    return plain


def run_case(rule_file: Path, rules: RuleSet, workdir: Path) -> CaseOutcome:
    case = yaml.safe_load(rule_file.with_suffix("").with_suffix(".series.yml").read_text())
    ncfg = parse_config({"normalize": case["normalize"]}, str(rule_file)).normalize if case.get("normalize") \
        else NormalizeConfig()
    kube = StaticKubernetes(**case.get("kubernetes", {}))
    plain = prepared_rule_file(rule_file, workdir)
    fired = render(plain, case, workdir)
    # the file's recording rules, as the service reads them (classify.prometheus_rules or Prometheus's rules API)
    rules = promrules.with_recorded(rules, [yaml.safe_load(plain.read_text())])
    checked = {r.alert: r for r in promrules.classify_rules(rule_file, rules, ncfg)}
    outcome = CaseOutcome(rule_file.stem, case["exporter"])
    outcome.promtool_rc = subprocess.run(["promtool", "check", "rules", str(plain)], capture_output=True,
                                         timeout=60).returncode
    outcome.check_rc = promrules.main([str(rule_file)], rules, ncfg, io.StringIO())
    by_name = {str(r["alert"]): r for g in rule_groups(yaml.safe_load(plain.read_text())) for r in g["rules"]
               if "alert" in r}
    for name, rule in by_name.items():
        want = case["expect"][name]
        res = RuleOutcome(name, want.get("gpu_health", True))
        _judge(res, want, [webhook_alert(rule, r, i) for i, r in enumerate(fired[name])], rules, ncfg, kube)
        found = checked[name]
        res.checked = checked_reading(found)
        res.warned = bool(found.warnings)
        res.declared = found.decision.stage == "signals" and found.decision.signal.kind == "other"
        res.check_named = any("node" in w for w in found.warnings + found.notes)
        outcome.rules.append(res)
    return outcome


def reading(kind: str, detail: str, code_known: bool) -> str:
    """A rule's reading as both commands can say it: kind/detail, and for an Xid whether its code is known."""
    return f"{kind}/{detail}" + ((" code known" if code_known else " code unknown") if kind == "xid" else "")


def checked_reading(found: promrules.RuleResult) -> str:
    """What `check` says of the rule: its signal, or the one its alerts get at runtime (TargetDown with a dcgm
    job); an Xid's code known when check names where it comes from."""
    sig = found.decision.signal
    if found.runtime:
        kind, _, detail = found.runtime.split(" when ")[0].partition("/")
        return reading(kind, detail, False)
    return reading(sig.kind, sig.detail if sig.kind != "xid" else "", bool(found.xid_from))


def _judge(res: RuleOutcome, want: dict[str, Any], alerts: list[Alert], rules: RuleSet, ncfg: NormalizeConfig,
           kube: StaticKubernetes) -> None:
    res.fired = len(alerts)
    res.right = bool(alerts)
    if not alerts:
        res.why.append("did not fire")
    for alert in alerts:
        seen = explain.explain(alert, rules, ncfg, lookup=kube)
        sig, node = seen.decision.signal, alert.subject.node
        res.explained.add(reading(sig.kind, sig.detail if sig.kind != "xid" else "", sig.xid is not None))
        got = {"kind": sig.kind, "detail": sig.detail, "severity": sig.severity, "xid": sig.xid}
        wrong = [f"{k} {got[k]!r} (want {want[k]!r})" for k in ("kind", "detail", "severity", "xid")
                 if k in want and got[k] != want[k]]
        if res.gpu_health and wrong:
            res.right = False
            res.why.extend(wrong)
        if node and node != want.get("node", ""):
            res.wrong_node += 1
            res.why.append(f"node {node!r} from {alert.subject.node_source} (want {want.get('node') or 'unknown'!r})")
        elif not node:
            res.no_node += 1


def run_corpus(corpus: Path = CORPUS) -> list[CaseOutcome]:
    rules = load_rules([SITE_RULES, ROOT / "rules"])
    with tempfile.TemporaryDirectory() as tmp:
        return [run_case(f, rules, Path(tmp)) for f in sorted(corpus.glob("*.rules.yml"))]


@dataclass
class Row:
    exporter: str
    files: int = 0
    gpu_rules: int = 0
    right: int = 0
    alerts: int = 0
    wrong_node: int = 0
    node_unknown_rules: int = 0
    unknown_named: int = 0
    declared: int = 0
    declared_warned: int = 0
    exit_codes_agree: int = 0
    rules: int = 0
    check_explain_agree: int = 0  # rules `check` and `explain` read alike


def table(outcomes: list[CaseOutcome]) -> list[Row]:
    rows: dict[str, Row] = {}
    for case in outcomes:
        row = rows.setdefault(case.exporter, Row(case.exporter))
        row.files += 1
        row.exit_codes_agree += int((case.promtool_rc == 0) == (case.check_rc == 0))
        for r in case.rules:
            row.rules += 1
            row.check_explain_agree += int(r.agree)
            row.alerts += r.fired
            row.wrong_node += r.wrong_node
            if r.declared:
                row.declared += 1
                row.declared_warned += int(r.warned)
            if not r.gpu_health:
                continue
            row.gpu_rules += 1
            row.right += int(r.right)
            if r.no_node:
                row.node_unknown_rules += 1
                row.unknown_named += int(r.check_named)
    total = Row("all")
    for row in rows.values():
        for k in vars(total):
            if k != "exporter":
                setattr(total, k, getattr(total, k) + getattr(row, k))
    return [*rows.values(), total]


def markdown(rows: list[Row]) -> str:
    head = ("| exporter | files | GPU rules | classified right | alerts | on a wrong node | GPU rules with node "
            "unknown | of those named by check | declared not GPU health | warnings on those "
            "| rules check and explain read alike |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [f"| {r.exporter} | {r.files} | {r.gpu_rules} | {r.right} ({100 * r.right / max(r.gpu_rules, 1):.0f} %) "
             f"| {r.alerts} | {r.wrong_node} | {r.node_unknown_rules} | {r.unknown_named} | {r.declared} "
             f"| {r.declared_warned} | {r.check_explain_agree} of {r.rules} |" for r in rows]
    return "\n".join([head, *lines])


__all__ = ["CaseOutcome", "Row", "RuleOutcome", "StaticKubernetes", "checked_reading", "markdown", "parse_promtool",
           "reading", "render", "run_case", "run_corpus", "table", "webhook_alert"]
