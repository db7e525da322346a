"""Is an Xid alert's value the Xid code? Only when the expression reads the Xid metric as it is.

dcgm-exporter's ``DCGM_FI_DEV_XID_ERRORS`` holds the last Xid code, so
``DCGM_FI_DEV_XID_ERRORS > 0`` fires with the code as its value and a summary
``XID {{ $value }}`` renders it. Under ``increase()``, ``rate()``, ``changes()``
or a ``sum`` the value is a count or a rate, so `alertd check` promises no
code from such a template (text that names the code otherwise, through a
``query`` in the template, is still read when the alert arrives).
"""
from __future__ import annotations

import re

from alertd.promql.expr import ExprFacts

XID_METRIC = re.compile(r"DCGM_FI_DEV_XID_ERRORS|DCGM_EXP_XID_ERRORS_COUNT|dcgm_xid_errors")  # 1.x: lower case
# Functions and aggregations that keep a series' value: the Xid code stays the code through them.
VALUE_KEEPING = frozenset({"max", "min", "max_over_time", "min_over_time", "last_over_time", "topk", "bottomk",
                           "label_replace", "label_join", "sort", "sort_desc", "limitk", "quantile_over_time"})


def value_is_code(facts: ExprFacts | None) -> bool | None:
    """True when the expression reads the Xid metric as it is, False when it counts or sums it, None when it
    reads no Xid metric (or cannot be read)."""
    xid = [s for s in facts.selectors if XID_METRIC.fullmatch(s.metric)] if facts is not None else []
    if not xid:
        return None
    return all(set(s.inside) <= VALUE_KEEPING for s in xid)


__all__ = ["VALUE_KEEPING", "XID_METRIC", "value_is_code"]
