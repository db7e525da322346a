from datetime import timedelta

import pytest

from alertd.core.durations import DurationError, DurationOutOfRange, format_duration, parse_duration
from alertd.core.matchers import MatcherError, parse_matcher, parse_matchers


@pytest.mark.parametrize("text,labels,expected", [
    ('alertname="GPUXidError"', {"alertname": "GPUXidError"}, True),
    ('alertname!="GPUXidError"', {"alertname": "GPUXidError"}, False),
    ('xid=~"4[38]"', {"xid": "48"}, True),
    ('xid=~"4[38]"', {"xid": "148"}, False),  # anchored like Alertmanager
    ('xid!~"45|63"', {"xid": "79"}, True),
    ('xid=""', {}, True),  # absent label matches the empty string
    ('xid!=""', {}, False),
    ('summary="say \\"hi\\""', {"summary": 'say "hi"'}, True),
])
def test_matcher_semantics(text, labels, expected):
    assert parse_matcher(text).matches(labels) is expected


def test_brace_list_and_silence_form():
    ms = parse_matchers('{node="gpu-1", UUID=~"GPU-.*"}')
    assert [str(m) for m in ms] == ['node="gpu-1"', 'UUID=~"GPU-.*"']
    assert ms[1].to_silence() == {"name": "UUID", "value": "GPU-.*", "isRegex": True, "isEqual": True}


@pytest.mark.parametrize("bad", ["node", "node==x", '1node="x"', 'xid=~"("'])
def test_bad_matchers_are_named(bad):
    with pytest.raises(MatcherError) as exc:
        parse_matcher(bad)
    assert repr(bad) in str(exc.value) or "regex" in str(exc.value)


def test_durations_follow_prometheus():
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("250ms") == timedelta(milliseconds=250)
    assert parse_duration(30) == timedelta(seconds=30)
    assert parse_duration("0") == timedelta(0)
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    for bad in ("5 m", "m5", "30m1h", "1h1h", "-5m", "", True):
        with pytest.raises(DurationError):
            parse_duration(bad)


@pytest.mark.parametrize("huge", ["9706254429542w2217ms", "293y", "292y25w", "9223372036855ms", 1e300,
                                  float("inf"), float("nan")])
def test_durations_past_prometheus_range_are_refused_not_overflowed(huge):
    """Past Prometheus's longest duration (int64 nanoseconds, about 292 years) parse_duration says "out of
    range" as Prometheus does: a DurationError (a 400 at the API, an error at load), never an OverflowError."""
    with pytest.raises(DurationOutOfRange, match="out of range"):
        parse_duration(huge)


def test_the_longest_duration_still_parses():
    assert parse_duration("292y") == timedelta(days=292 * 365)
    assert parse_duration("9223372036854ms") == timedelta(milliseconds=9223372036854)
