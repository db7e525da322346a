"""The TypedDicts of the enrich section (alertd/enrich/settings.py) name exactly the members their schema admits,
so a member added to enrich.schema.json is read through a typed key. (Sections declared as Structs have no
TypedDict: tests/unit/test_config_sections.py checks them.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from alertd.enrich import settings as s

SCHEMAS = Path(__file__).resolve().parents[2] / "alertd" / "schemas"
ENRICH = json.loads((SCHEMAS / "enrich.schema.json").read_text())
LOGS, KUBE = ENRICH["$defs"]["logs"], ENRICH["$defs"]["kube"]

CASES = [
    (ENRICH, s.EnrichDoc),
    (LOGS, s.LogsDoc),
    (LOGS["properties"]["auth"], s.LogAuthDoc),
    (LOGS["properties"]["auth"]["properties"]["basic"], s.BasicAuthDoc),
    (LOGS["properties"]["fields"], s.LogFieldsDoc),
    (LOGS["properties"]["window"], s.WindowDoc),
    (LOGS["properties"]["batch"], s.BatchDoc),
    (LOGS["properties"]["graylog"], s.GraylogDoc),
    (KUBE, s.KubeDoc),
    (KUBE["properties"]["jobs"], s.JobCostDoc),
    (ENRICH["$defs"]["job_cost"], s.CostModelDoc),
]


@pytest.mark.parametrize(("schema", "doc"), CASES, ids=[d.__name__ for _, d in CASES])
def test_the_typed_members_are_the_schema_members(schema: dict[str, object], doc: type) -> None:
    keys = set(doc.__required_keys__) | set(doc.__optional_keys__)  # type: ignore[attr-defined]
    assert keys == set(schema["properties"])  # type: ignore[call-overload]
    assert schema.get("additionalProperties") is False
