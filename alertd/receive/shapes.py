"""The inbound payloads' JSON Schemas, generated from the msgspec Structs that decode them: a payload's shape is
declared once, in its Struct, and ``python -m alertd.config.schemafiles`` writes the schema file that words
its refusals (alertd/schemas/messages.py).

What msgspec leaves to code (a pattern checked by one search over every time, wire.py) is stated for the
schema with ``Meta(extra_json_schema=...)``; a Literal of one value is the schema's ``const``, and an enum has no
type (a wrong value is one error, naming the values)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from alertd.core.json_types import JSONObject, JSONValue, obj
from alertd.core.sections import enum_alone
from alertd.receive.cloudevents import CloudEvent, GpuHealthData, NVSentinelData
from alertd.receive.wire import WireAlert, WireWebhook

URL = "https://alertd.dev/schemas/{}.schema.json"
# The order of an object's keys, as the hand-written files had it (several errors at one path are told in it).
KEY_ORDER = ("description", "type", "properties", "additionalProperties", "required")


def payload_schema(name: str, title: str, cls: type[msgspec.Struct],
                   defs: Mapping[type[msgspec.Struct], str] | None = None) -> JSONObject:
    """``<name>.schema.json``: the Struct's schema with its parts and enums inlined, but for the parts named in
    ``defs``: ``#/$defs/<name>`` (as the hand-written file had them; docs/openapi.yaml names them too)."""
    generated = obj(msgspec.json.schema(cls), cls.__name__)
    shapes = _Shapes(obj(generated["$defs"], "$defs"), {part.__name__: ref for part, ref in (defs or {}).items()})
    root = obj(shapes.inlined({"$ref": generated["$ref"]}), cls.__name__)
    named = {ref: shapes.inlined(shapes.defs[part]) for part, ref in shapes.named.items()}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": URL.format(name), "title": title,
            **root, **({"$defs": named} if named else {})}


@dataclass(frozen=True)
class _Shapes:
    defs: JSONObject  # msgspec's definitions (the Structs and enums), by their names
    named: Mapping[str, str]  # a Struct's name -> its definition's in the schema file

    def inlined(self, node: JSONValue) -> JSONValue:
        if isinstance(node, list):
            return [self.inlined(v) for v in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:  # one of msgspec's definitions (a Struct, an enum): inlined where it is used
            part = str(node["$ref"]).rsplit("/", 1)[-1]
            if part in self.named:
                return {**node, "$ref": f"#/$defs/{self.named[part]}"}
            node = {**obj(self.defs[part], part), **{k: v for k, v in node.items() if k != "$ref"}}
        out: JSONObject = {}
        for key, value in node.items():
            if key == "title":
                continue
            if key == "description" and isinstance(value, str):
                value = " ".join(value.split())  # a docstring on one line
            elif key == "enum" and isinstance(value, list) and len(value) == 1:
                key, value = "const", value[0]  # refused as "accepted only ...", in the place of the enum
            elif key == "properties" and isinstance(value, dict):
                value = {k: self.inlined(v) for k, v in value.items()}
            elif key in ("items", "additionalProperties", "anyOf"):
                value = self.inlined(value)
            out[key] = value
        out = enum_alone(out)
        if out.get("required") == []:
            del out["required"]
        first = {k: out[k] for k in KEY_ORDER if k in out}
        return {**first, **{k: v for k, v in out.items() if k not in first}}


# schema file name -> (title, the Struct that declares it)
PAYLOADS: dict[str, tuple[str, type[msgspec.Struct], Mapping[type[msgspec.Struct], str]]] = {
    "webhook": ("Alertmanager webhook notification (version 4)", WireWebhook, {WireAlert: "alert"}),
    "cloudevent": ("A CloudEvent (v1.0) as alertd takes it", CloudEvent, {}),
    "cloudevent-nvsentinel": ("NVSentinel health event (CloudEvent data)", NVSentinelData, {}),
    "cloudevent-gpu-health": ("Generic GPU health event (CloudEvent data, type dev.alertd.gpu.health.v1)",
                              GpuHealthData, {}),
}


def generated() -> dict[str, JSONObject]:
    """Schema file name -> its document."""
    return {f"{name}.schema.json": payload_schema(name, title, cls, defs) for name, (title, cls, defs) in PAYLOADS.items()}
