"""Can a rule's alerts carry a node? What the labels of a PromQL expression's result say.

An alert names its node only through its labels, and its labels are the labels
of the result series of its rule's expression plus the rule's own ``labels:``.
``sum by (cluster) (...)`` keeps only ``cluster``: such alerts can never join
their node's incident. A result keeping only ``Hostname`` or ``instance`` names
the dcgm-exporter pod or its address where dcgm-exporter runs on Kubernetes
without NODE_NAME (3.x, or 4.x outside its chart and the GPU Operator):
alertd must then resolve the node (Kubernetes API, ``normalize.node_map``), and
without that resolution files them under "node unknown".

:func:`carried` works out the result's labels from the parsed expression
(aggregations ``by``/``without``, ``absent``, ``label_replace``/``label_join``,
vector matching ``on``/``ignoring``/``group_left``); :func:`node_warning` turns
that into the warning `alertd check --prometheus-rules` and `alertd explain`
print, saying what to add.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import promql_parser as pp

from alertd.core.vocabulary import WEAK_NODE_LABELS
from alertd.promql.expr import too_complex

_KEEP_ALL_AGGREGATIONS = frozenset({"topk", "bottomk", "limitk", "limit_ratio"})
_NO_LABELS = frozenset({"vector", "scalar", "time"})


@dataclass(frozen=True, slots=True)
class Carried:
    """The labels of the result series: exactly ``only`` when known, else every input label but ``dropped``."""

    only: frozenset[str] | None = None
    dropped: frozenset[str] = frozenset()
    where: str = ""  # the part of the expression that decided, e.g. "sum by (cluster)"

    def keeps(self, label: str) -> bool:
        return label in self.only if self.only is not None else label not in self.dropped

    def add(self, labels: frozenset[str]) -> "Carried":
        if self.only is not None:
            return Carried(self.only | labels, where=self.where)
        return Carried(None, self.dropped - labels, self.where)


ALL = Carried()


def carried(expr: str) -> Carried | None:
    """The result's labels; None when the expression cannot be read."""
    if too_complex(expr):
        return None
    try:
        return _carried(pp.parse(expr))
    except (ValueError, TypeError, RecursionError):
        return None


def _aggregate(node: pp.AggregateExpr) -> Carried:
    inner = _carried(node.expr)
    op, mod = str(node.op), node.modifier
    if mod is None:
        return inner if op in _KEEP_ALL_AGGREGATIONS else Carried(frozenset(), where=f"{op}(...)")
    labels = frozenset(mod.labels)
    if str(mod.type).endswith("By"):
        kept = labels if inner.only is None else labels & inner.only
        out = Carried(frozenset(kept), where=f"{op} by ({', '.join(mod.labels)})")
    else:
        out = Carried(inner.only - labels, where=f"{op} without ({', '.join(mod.labels)})") if inner.only is not None \
            else Carried(None, inner.dropped | labels, f"{op} without ({', '.join(mod.labels)})")
    if op == "count_values" and isinstance(node.param, pp.StringLiteral):
        out = out.add(frozenset({node.param.val}))
    return out


def _call(node: pp.Call) -> Carried:
    name = node.func.name
    if name in _NO_LABELS:
        return Carried(frozenset(), where=f"{name}()")
    if name in ("absent", "absent_over_time"):
        arg = node.args[0] if node.args else None
        sel = arg.vector_selector if isinstance(arg, pp.MatrixSelector) else arg
        if isinstance(sel, pp.VectorSelector):
            eq = frozenset(m.name for m in sel.matchers.matchers if str(m.op) == "MatchOp.Equal" and m.name != "__name__")
            return Carried(eq, where=f"{name}(...)")
        return Carried(frozenset(), where=f"{name}(...)")
    vectors = [a for a in node.args if not isinstance(a, (pp.StringLiteral, pp.NumberLiteral))]
    inner = _carried(vectors[0]) if vectors else ALL
    if name in ("label_replace", "label_join") and len(node.args) > 1 and isinstance(node.args[1], pp.StringLiteral):
        return inner.add(frozenset({node.args[1].val}))
    return inner


def _binary(node: pp.BinaryExpr) -> Carried:
    """Prometheus keeps the left side's labels; one-to-one matching ``on (l)`` keeps only l, ``ignoring (l)``
    drops l; ``group_left (x)`` keeps the many side's labels and copies x; ``or`` gives either side's."""
    lhs_num = isinstance(_unwrap(node.lhs), pp.NumberLiteral)
    if lhs_num or isinstance(_unwrap(node.rhs), pp.NumberLiteral):
        return _carried(node.rhs if lhs_num else node.lhs)
    lhs, mod = _carried(node.lhs), node.modifier
    if str(node.op).strip() == "or":
        rhs = _carried(node.rhs)
        if lhs.only is not None and rhs.only is not None:
            return Carried(lhs.only | rhs.only, where=lhs.where or rhs.where)
        return Carried(None, lhs.dropped & rhs.dropped) if lhs.only is None and rhs.only is None else ALL
    if mod is None or mod.matching is None:
        return lhs
    card = str(mod.card)
    if "ManyToOne" in card or "OneToMany" in card:
        side = lhs if "ManyToOne" in card else _carried(node.rhs)
        return side.add(frozenset(mod.group_labels or ()))
    if "OneToOne" not in card:
        return lhs  # and / unless: the left side, filtered
    labels = frozenset(mod.matching.labels)
    if str(mod.matching.type).endswith("Include"):
        return Carried(labels if lhs.only is None else labels & lhs.only, where=f"{node.op} on ({', '.join(mod.matching.labels)})")
    return Carried(lhs.only - labels, where=lhs.where) if lhs.only is not None else \
        Carried(None, lhs.dropped | labels, lhs.where)


def _unwrap(node: object) -> object:
    while isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        node = node.expr
    return node


def _carried(node: object) -> Carried:
    if isinstance(node, pp.AggregateExpr):
        return _aggregate(node)
    if isinstance(node, pp.Call):
        return _call(node)
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        return _carried(node.expr)
    if isinstance(node, pp.BinaryExpr):
        return _binary(node)
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return Carried(frozenset())
    return ALL  # a selector: whatever labels its series have


def node_warning(expr: str, static_labels: dict[str, str], node_labels: tuple[str, ...]) -> str:
    """Why the rule's alerts cannot carry a node, and what to add; "" when they can (or it is unsure)."""
    if not expr or set(node_labels) - WEAK_NODE_LABELS & set(static_labels):
        return ""
    result = carried(expr)
    if result is None:
        return ""
    kept = [n for n in node_labels if result.keeps(n) or n in static_labels]
    strong = [n for n in kept if n not in WEAK_NODE_LABELS]
    if strong:
        return ""
    by = f" ({result.where})" if result.where else ""
    if not kept:
        fix = (f"e.g. 'by ({', '.join(sorted(result.only | {'node'}))})'" if result.only is not None
               else "leave node out of 'without (...)'")
        return (f"its expression{by} keeps none of the node labels ({', '.join(node_labels)}): its alerts cannot name "
                f"a node and never join their node's incident; keep the node in the aggregation, {fix}")
    if result.only is None:
        return ""  # the series may well carry node: decided by the scrape, not by the expression
    return (f"its expression{by} keeps only {', '.join(kept)} of the node labels: right for an exporter on the "
            f"host network, but dcgm-exporter on Kubernetes without NODE_NAME puts its own pod's name and address there, which "
            f"alertd must resolve (Kubernetes API, normalize.node_map) or files under 'node unknown'; add node to "
            f"the aggregation (relabel __meta_kubernetes_pod_node_name to node in the scrape)")


_TEMPLATE_LABEL = re.compile(r"(?:\$labels|\.Labels)\.([A-Za-z_][A-Za-z0-9_]*)")


def host_only_note(expr: str, static_labels: dict[str, str], texts: list[str],
                      node_labels: tuple[str, ...]) -> str:
    """For a rule whose result keeps every label: its text names the host only by ``Hostname`` or
    ``instance``, so the scrape probably adds no node label, and those labels are a node only where the
    exporter runs as its chart or the GPU Operator runs it. "" when the rule names a node label anywhere."""
    strong = set(node_labels) - WEAK_NODE_LABELS
    result = carried(expr) if expr else None
    if result is None or result.only is not None or strong & set(static_labels):
        return ""
    named = {m.group(1) for text in texts for m in _TEMPLATE_LABEL.finditer(text)}
    weak = sorted(named & WEAK_NODE_LABELS & set(node_labels))
    if not weak or named & strong or any(n in expr for n in strong if re.search(rf"\b{n}\b", expr)):
        return ""
    return (f"its text names the host only by {', '.join(weak)}: a node only where the scrape makes it one "
            "(Hostname from NODE_NAME, dcgm-exporter 4.0+ under its chart or the GPU Operator; a host's address); "
            "a container ID or Compose service there is refused, node unknown (docs/rules.md, 'Docker hosts')")


__all__ = ["Carried", "WEAK_NODE_LABELS", "carried", "host_only_note", "node_warning"]
