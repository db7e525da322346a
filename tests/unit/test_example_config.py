"""examples/alertd.yml documents every option: as shipped and with every commented option switched on, it is valid."""
import re
from pathlib import Path

import yaml

from alertd.config.settings import load_config, parse_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "alertd.yml"
ENV = {name: "x" * 32 for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "PD_GPU_INFRA_KEY", "PD_GPU_ESCALATION_KEY",
                                    "AM_TOKEN", "ALERTD_PG_DSN", "ALERTD_WEBHOOK_TOKEN", "ALERTD_WEBHOOK_PASSWORD",
                                    "ALERTD_API_TOKEN", "ALERTD_LINK_KEY")}


def test_example_as_shipped_is_the_embedded_default():
    cfg = load_config(EXAMPLE, env={})
    assert cfg.storage.backend == "sqlite" and not cfg.receiver_auth.enabled and cfg.console is True


def test_example_with_every_option_uncommented_is_valid():
    # "# key: value" and deeper commented lines become live; prose comments (capitalised) stay comments.
    text = re.sub(r"^(\s*)# (?=[a-z_]+:|  |- )", r"\1", EXAMPLE.read_text(), flags=re.M)
    doc = yaml.safe_load(text)
    cfg = parse_config(doc, "uncommented example", env=ENV)
    assert {"slack", "pagerduty"} <= set(doc["notify"]) and "enrich" in doc and "alertmanager" in doc
    assert cfg.receiver_auth.tokens and cfg.receiver_auth.basic and cfg.api_auth.tokens
