"""The alerting rules of the shipped Prometheus rule file, read at run time.

``for:``, ``keep_firing_for:``, labels and annotations come from the file, so
the simulation follows whatever the file says today; the expression itself is
evaluated by the matching predicate (predicates.PREDICATES), and
tests/unit/test_fleetsim_rules.py fails when a rule has none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote_plus

import yaml

from alertd.core.durations import parse_duration

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "prometheus" / "gpu-alerts.yml"
JOB_RULES = ROOT / "deploy" / "prometheus" / "gpu-job-alerts.yml"  # stalled jobs, stragglers, quiet GPUs, links
PROMETHEUS_URL = "http://prometheus-k8s.monitoring.svc:9090"


@dataclass(frozen=True, slots=True)
class AlertRule:
    name: str
    group: str
    expr: str
    hold: float = 0.0            # for:, seconds
    keep_firing_for: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def generator_url(self) -> str:
        """strutil.TableLinkForExpression under Prometheus's external URL."""
        return f"{PROMETHEUS_URL}/graph?g0.expr={quote_plus(self.expr)}&g0.tab=1"


class RuleFileError(ValueError):
    """The rule file cannot be read as Prometheus rule groups."""


def load_alert_rules(path: Path | str = SHIPPED) -> list[AlertRule]:
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        groups = doc["groups"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise RuleFileError(f"{path}: not a Prometheus rule file ({type(exc).__name__}: {exc})") from exc
    out = []
    for group in groups:
        for rule in group.get("rules") or []:
            if "alert" not in rule:
                continue
            try:
                out.append(AlertRule(
                    name=rule["alert"], group=group["name"], expr=" ".join(str(rule["expr"]).split()),
                    hold=parse_duration(str(rule.get("for", "0s"))).total_seconds(),
                    keep_firing_for=parse_duration(str(rule.get("keep_firing_for", "0s"))).total_seconds(),
                    labels={k: str(v) for k, v in (rule.get("labels") or {}).items()},
                    annotations={k: str(v) for k, v in (rule.get("annotations") or {}).items()}))
            except Exception as exc:  # a bad duration, a missing expr: say which rule
                raise RuleFileError(f"{path}: alert {rule.get('alert')!r}: {exc}") from exc
    return out


_IF = re.compile(r"\{\{-?\s*if\s+\$labels\.(\w+)\s*-?\}\}(.*?)\{\{-?\s*end\s*-?\}\}", re.S)
_WITH = re.compile(r"\{\{-?\s*with\s.*?\}\}.*?\{\{-?\s*end\s*-?\}\}", re.S)
_LABEL = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")
_VALUE = re.compile(r"\{\{\s*\$value(\s*\|\s*\w+)?\s*\}\}")
_PRINTF = re.compile(r"\{\{\s*printf\s+\\?\"(%[.0-9]*[fg])\\?\"\s+\$value\s*\}\}")


def expand(template: str, labels: dict[str, str], value: float, queried: float | None = None) -> str:
    """The subset of Prometheus's annotation templates the shipped rules use. ``queried``: what a
    ``{{ with ... | query }}`` block reads (a straggler's job median), else the alert's own value."""
    text = _IF.sub(lambda mt: mt.group(2) if labels.get(mt.group(1)) else "", template)
    text = _WITH.sub(lambda mt: f"{value:g}" if queried is None else f"{queried:.4g}", text)
    text = _PRINTF.sub(lambda mt: mt.group(1) % value, text)
    text = _LABEL.sub(lambda mt: labels.get(mt.group(1), ""), text)
    return _VALUE.sub(lambda mt: f"{value:g}", text)
