"""The integrations alertd knows, by name: the routing loader, the schemas, the config and setup ask here.

Adding an integration is one module with an ``Integration`` subclass and one
line below (docs/notifications.md, "Adding an integration: one file").
"""
from __future__ import annotations

from typing import Any

from alertd.integrations import console

from alertd.integrations import opsgenie

from alertd.integrations import pagerduty

from alertd.integrations.slack import integration as slack

from alertd.integrations import outgoing_webhook as webhook
from alertd.core.json_types import JSONObject, as_object, obj
from alertd.integrations.base import Integration, Links, NotifierSettings

__all__ = ["INTEGRATIONS", "Links", "extend_schema", "get", "parse_settings"]

INTEGRATIONS: dict[str, Integration[Any]] = {
    i.name: i for i in (console.INTEGRATION, slack.INTEGRATION, pagerduty.INTEGRATION, webhook.INTEGRATION,
                        opsgenie.INTEGRATION)
}
RECEIVER_ITEMS = ("properties", "routing", "properties", "receivers", "items", "properties")


def get(name: str) -> Integration[Any] | None:
    return INTEGRATIONS.get(name)


def extend_schema(name: str, doc: JSONObject) -> None:
    """Put every integration's fragment into the shipped ``notify`` or ``routing`` schema (in place; a member
    on the way that is not an object is a broken shipped schema: TypeError naming it)."""
    if name == "notify":
        obj(doc.setdefault("properties", {}), "notify.properties").update(
            {i.name: i.config_schema for i in INTEGRATIONS.values()})
    elif name == "routing":
        node = doc
        for key in RECEIVER_ITEMS:
            node = obj(node.setdefault(key, {}), f"routing schema: {key}")
        node.update({i.name: i.receiver_schema for i in INTEGRATIONS.values()})


def parse_settings(notify: JSONObject, links: Links) -> dict[str, NotifierSettings]:
    """Every integration's typed settings from a schema-valid ``notify`` section (absent sections: defaults)."""
    return {name: i.settings(as_object(notify.get(name)), links) for name, i in INTEGRATIONS.items()}
