"""Linear-time matching: rule regexes on RE2 with Alertmanager's anchoring, patterns RE2 cannot run refused
with the reason, and the PromQL regex budget that keeps hostile generatorURLs from costing seconds."""
from __future__ import annotations

import random
from pathlib import Path
from urllib.parse import quote_plus

import pytest
import re2
import yaml

from alertd.engine.classify import classify_explained
from alertd.core.matchers import MatcherError, parse_matcher
from datetime import datetime, timezone

from alertd.core.model import Alert
from alertd.engine.normalize import NormalizeConfig
from alertd.promql.expr import MAX_REGEX_COST, facts_of_expr, over_regex_budget, regex_cost
from alertd.core.regex import Regex, RegexError
from alertd.rules.ruleset import load_rules

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def alert(labels: dict[str, str], annotations: dict[str, str] | None = None, url: str = "") -> Alert:
    return Alert("0123456789abcdef", "firing", labels, annotations or {}, T0, None, generator_url=url)


@pytest.mark.parametrize("pattern,named", [
    ("(?!Watchdog).*", "negative lookahead"), ("a(?=b)", "lookahead"), ("(?<=a)b", "lookbehind"),
    ("(?P<w>a)(?P=w)", "backreference"), (r"(a)\1", "backreferences"), ("a*+", "possessive"),
])
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern, named):
    with pytest.raises(RegexError, match=named) as info:
        Regex(pattern)
    assert "RE2" in str(info.value)
    with pytest.raises(MatcherError, match=named):
        parse_matcher('alertname=~"' + pattern.replace("\\", "\\\\") + '"')  # quoted as in a rule file


def test_matchers_are_anchored_like_alertmanager():
    m = parse_matcher('job=~"dcgm|nvidia.*"')
    assert m.matches({"job": "dcgm"}) and m.matches({"job": "nvidia-dcgm-exporter"})
    assert not m.matches({"job": "my-dcgm"}) and not m.matches({"job": "dcgm-exporter"})
    assert parse_matcher('job!~"(?i)DCGM"').matches({"job": "x"}) and not parse_matcher('job!~"(?i)DCGM"').matches({"job": "dcgm"})
    assert parse_matcher('xid=~""').matches({}) and not parse_matcher('xid=~".+"').matches({})


def test_the_plain_name_shortcut_answers_as_re2_does():
    rng = random.Random(7)
    alphabet = "ab:-_0|"
    for _ in range(500):
        pattern = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        try:
            compiled = Regex(pattern)
        except RegexError:
            continue
        assert compiled.fullmatch(text) == (re2.fullmatch(pattern, text) is not None), (pattern, text)


def test_the_shipped_xid_pattern_reads_a_hostile_annotation_once():
    """Python's re took time cubic in the spaces after "xid" here (62 s for 3,000); RE2 reads it once. The
    code is still found where there is one, and the text is the same kind of text Prometheus sends."""
    rules = load_rules([ROOT / "rules"])
    hostile = alert({"alertname": "GPUXidError", "node": "n1"}, {"summary": "xid" + " " * 50_000 + "!"})
    assert classify_explained(hostile, rules, NormalizeConfig()).signal.xid is None
    found = alert({"alertname": "GPUXidError", "node": "n1"}, {"summary": "xid" + " " * 50_000 + "79"})
    assert classify_explained(found, rules, NormalizeConfig()).signal.xid == 79


def test_regex_cost_weighs_what_the_promql_parser_pays_for():
    assert regex_cost(".*dcgm.*") == 20
    assert regex_cost(r"\w{100}") > MAX_REGEX_COST  # ~60 ms of compiling on its own
    assert regex_cost(r"[a-z]{100}") < regex_cost(r"\w{100}") / 10  # 0.08 ms against 60
    heavy = " or ".join(f'm{i}{{a=~"\\\\w{{100}}"}}' for i in range(30))
    assert "would cost about" in over_regex_budget(heavy)
    assert "regex matchers (budget 64)" in over_regex_budget("up{" + ",".join(f'l{i}=~"a"' for i in range(65)) + "}")
    facts = facts_of_expr(heavy)
    assert facts.selectors == () and "budget" in facts.error


def test_an_expression_over_budget_is_not_used_and_explain_says_why():
    rules = load_rules([ROOT / "rules"])
    heavy = "DCGM_FI_DEV_XID_ERRORS > 0 or " + " or ".join(f'x{i}{{a=~"\\\\w{{60}}"}}' for i in range(10))
    odd = alert({"alertname": "SomethingOdd", "node": "n1", "xid": "79"},
                url="http://prom:9090/graph?g0.expr=" + quote_plus(heavy))
    decision = classify_explained(odd, rules, NormalizeConfig())
    assert "not read" in decision.expr_error and "budget" in decision.expr_error
    assert decision.signal.kind == "xid" and decision.stage == "label"  # classified from its other evidence


def _expressions() -> list[str]:
    out = []
    for path in sorted((ROOT / "tests" / "fixtures" / "prometheus-rules").glob("*.yml")) + sorted(
            (ROOT / "deploy" / "prometheus").glob("*.yml")):
        for group in (yaml.safe_load(path.read_text()) or {}).get("groups", []):
            out += [r["expr"] for r in group.get("rules", []) if "expr" in r]
    return out


def test_real_alerting_rules_are_well_within_the_budget():
    exprs = _expressions()
    assert len(exprs) > 20
    for expr in exprs:
        assert over_regex_budget(str(expr)) == "", expr


def test_finditer_answers_as_re2s_own_wrapper():
    """Matching in bytes and decoding only the groups asked for gives what RE2's wrapper gives, Unicode too."""
    rng = random.Random(11)
    patterns = [r"(?i)\bxids?\b\s*(?P<xid>\d{1,4})", "x*", r"(?P<a>é+)|(?P<b>\d)", r"\s+"]
    alphabet = ["x", "X", "i", "d", "é", "ü", " ", "7", "9", "\u2028", "😀"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        for pattern in patterns:
            ours = [(m.group(0), [m.group(i) for i in range(1, 3) if i <= pattern.count("(?P")]) for m in Regex(pattern).finditer(text)]
            theirs = [(m.group(0), [m.group(i) for i in range(1, 3) if i <= pattern.count("(?P")]) for m in re2.finditer(pattern, text)]
            assert ours == theirs, (pattern, text)
