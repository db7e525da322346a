"""docs/openapi.yaml describes the whole HTTP API: every route the app serves, and the webhook schema itself."""
from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator

from alertd.config.settings import parse_config
from alertd.rules.ruleset import load_rules
from alertd.schemas import schema
from alertd.app.service import Service
from alertd.store.sqlite import SqliteStore
from alertd.web.app import build_app

ROOT = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())


def test_is_openapi_3_1_with_valid_schemas():
    assert SPEC["openapi"].startswith("3.1")
    for name, component in SPEC["components"]["schemas"].items():
        Draft202012Validator.check_schema(component)


def test_every_route_is_described(tmp_path):
    """Each route of the app matches a documented path (``{x}`` filled in), and each documented path a route."""
    cfg = parse_config({"rules": {"paths": [str(ROOT / "rules")]}}, "test")
    svc = Service(cfg, SqliteStore(tmp_path / "db"), load_rules(cfg.rule_paths))
    routes = [(r.method.lower(), r.resource) for r in build_app(svc).router.routes()
              if r.method not in ("HEAD", "OPTIONS", "*")]
    documented = [(m, re.sub(r"\{\w+\}", "x1", p)) for p, ops in SPEC["paths"].items() for m in ops]
    served_not_described = [(m, res.canonical) for m, res in routes
                            if not any(dm == m and res._match(dp) is not None for dm, dp in documented)]
    described_not_served = [(dm, dp) for dm, dp in documented
                            if not any(dm == m and res._match(dp) is not None for m, res in routes)]
    assert served_not_described == [], "routes missing from docs/openapi.yaml"
    assert described_not_served == [], "docs/openapi.yaml describes routes the app does not serve"


def test_webhook_components_mirror_the_webhook_schema():
    shipped = schema("webhook")
    names = {"alert": "WebhookAlert"}

    def in_spec(value):
        text = json.dumps(value)
        for old, new in names.items():
            text = text.replace(f'"#/$defs/{old}"', f'"#/components/schemas/{new}"')
        return json.loads(text)

    components = SPEC["components"]["schemas"]
    top = {k: v for k, v in shipped.items() if k not in ("$schema", "$id", "$defs")}
    assert components["Webhook"] == in_spec(top)
    for old, new in names.items():
        assert components[new] == in_spec(shipped["$defs"][old]), new


def test_served_document_is_the_docs_file():
    from alertd.web.app import openapi_document

    assert openapi_document() == (ROOT / "docs" / "openapi.yaml").read_bytes()
