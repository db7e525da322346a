"""Sections of alertd.yml declared once (alertd/core/sections.py): the checked-in schemas are generated from
the declarations, a new option is one declaration, and the example config and docs/*.md name exactly the
declared options."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest
import yaml
from jsonschema import Draft202012Validator
from msgspec import Meta

from alertd.config import schemafiles
from alertd.config.secrets import MAP_SUFFIX, SECRET_KEYS, SUFFIX
from alertd.config.connections import ConnectionSettings
from alertd.config.document import ConfigFile
from alertd.config.settings import load_config
from alertd.core.errors import InvalidDocument
from alertd.core.json_types import JSONObject
from alertd.core.sections import Seconds, Section, duration, list_part, option_paths, part_of, section_schema
from alertd.integrations.base import DURATION_SCHEMA
from alertd.integrations.registry import INTEGRATIONS, NotifySection
from alertd.schemas.messages import describe

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "alertd.yml"
DECLARED = schemafiles.DECLARED
NOT_OPTIONS = {"storage.postgres.replicas"}  # a value of the Helm chart (docs/deploy.md), not of alertd.yml
FILE_SUFFIXES = {"py", "md", "yml", "yaml", "json"}  # `rules.py` names a module, not an option
# Sections (or parts) the example points to the docs for (rma, notify.webhook, notify.opsgenie: their secrets
# have no environment variable test_example_config sets; enrich: docs/enrichment.md shows its every key, the
# example the few a site sets). The example may leave their options out, but names none that is not declared.
SHOWN_IN_DOCS_ONLY = frozenset({"rma", "notify.webhook", "notify.opsgenie", "enrich"})


def test_the_checked_in_schemas_are_what_the_declarations_generate():
    assert schemafiles.stale() == [], "run: python -m alertd.config.schemafiles"


def test_a_stale_schema_file_is_found(tmp_path):
    for name, text in schemafiles.generated().items():
        (tmp_path / name).write_text(text)
    assert schemafiles.stale(tmp_path) == []
    edited = (tmp_path / "classify.schema.json").read_text().replace('"minimum": 1024', '"minimum": 1000')
    (tmp_path / "classify.schema.json").write_text(edited)
    assert schemafiles.stale(tmp_path) == ["classify.schema.json"]


def test_notify_has_the_section_of_every_integration_and_nothing_else():
    """An integration added to the registry without its section in NotifySection would be configured by no file."""
    assert [f.name for f in msgspec.structs.fields(NotifySection)] == ["retry", *INTEGRATIONS]
    defaults = NotifySection.from_doc({})
    assert {name: type(getattr(defaults, name)) for name in INTEGRATIONS} == {
        name: i.section for name, i in INTEGRATIONS.items()}


class WithDrain(ConnectionSettings, frozen=True):
    """connections with one option more, as a new option is added: one declaration, its doc in it."""

    drain_timeout: Annotated[Seconds, Meta(description="How long open connections may finish at shutdown.")] = \
        duration("3s")
    drain_max: Annotated[int, Meta(ge=1, description="Connections drained at once.")] = 16


def _errors(schema: JSONObject, doc: object) -> list[str]:
    full = {**schema, "$defs": {"duration": dict(DURATION_SCHEMA)}}
    return [describe(e) for e in Draft202012Validator(full).iter_errors(doc)]


def test_a_new_option_is_validated_defaulted_decoded_and_in_the_schema():
    schema = section_schema(WithDrain)
    props = schema["properties"]
    assert isinstance(props, dict)
    assert props["drain_timeout"] == {"$ref": "#/$defs/duration", "default": "3s",
                                      "description": "How long open connections may finish at shutdown."}
    assert props["drain_max"] == {"type": "integer", "minimum": 1, "default": 16,
                                  "description": "Connections drained at once."}
    assert set(props) == set(section_schema(ConnectionSettings)["properties"]) | {"drain_timeout", "drain_max"}  # type: ignore[arg-type]
    assert _errors(schema, {"drain_timeout": "5s", "drain_max": 2}) == []
    assert _errors(schema, {"drain_timeout": "soon"}) == [
        "drain_timeout: 'soon' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m "
        "(units: ms, s, m, h, d, w, y)"]
    assert _errors(schema, {"drain_max": 0}) == ["drain_max: 0 is less than the minimum of 1"]
    assert _errors(schema, {"drain_timeut": "5s"}) == ["document: unknown key(s) 'drain_timeut' (did you mean 'drain_timeout'?)"]
    assert WithDrain.from_doc({}).drain_timeout == 3.0 and WithDrain.from_doc({}).drain_max == 16
    decoded = WithDrain.from_doc({"drain_timeout": "1m30s", "max_open": 64})
    assert (decoded.drain_timeout, decoded.max_open, decoded.header_timeout) == (90.0, 64, 10.0)
    assert isinstance(decoded.drain_timeout, Seconds)
    assert "connections.drain_timeout" in option_paths(WithDrain, "connections")


def test_decoding_refuses_what_the_schema_refuses():
    """from_doc is for documents the schema passed, but a caller that skips the schema still gets no garbage."""
    with pytest.raises(msgspec.ValidationError, match="drain_max"):
        WithDrain.from_doc({"drain_max": 0})
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        WithDrain.from_doc({"drain_timeut": "5s"})


class Log(Section, frozen=True):
    format: Literal["text", "json"] = "text"


def test_enums_keep_their_declared_order_for_the_error_message():
    assert _errors(section_schema(Log), {"format": "xml"}) == ["format: 'xml' is not one of ['text', 'json']"]


# -- the example config and the docs name exactly the declared options

def _lists_of_parts(cls: type[Section], prefix: str) -> set[str]:
    """The options that hold a list of parts (``api.auth.tokens``): their items' keys are options too."""
    out = set()
    for field in msgspec.structs.fields(cls):
        path = f"{prefix}.{field.encode_name}"
        if (item := list_part(field.type)) is not None:
            out |= {path} | _lists_of_parts(item, path)
        elif (part := part_of(field.type)) is not None:
            out |= _lists_of_parts(part, path)
    return out


def _paths(doc: object, prefix: str) -> set[str]:
    if isinstance(doc, list) and prefix in LISTS_OF_PARTS:
        return set().union(*(_paths(item, prefix) for item in doc))
    if not isinstance(doc, dict):
        return set()
    out = set()
    for key, value in doc.items():
        out |= {f"{prefix}.{key}"} | _paths(value, f"{prefix}.{key}")
    return out


LISTS_OF_PARTS = set().union(*(_lists_of_parts(cls, name) for name, cls in DECLARED.items()))


def _at(doc: object, name: str) -> object:
    """The part of a document at a declared name (``normalize.kubernetes``), or None."""
    for key in name.split("."):
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def _declared(name: str) -> set[str]:
    return set(option_paths(DECLARED[name], name))


def _leaves(name: str) -> set[str]:
    paths = _declared(name)
    return {p for p in paths if not any(q.startswith(p + ".") for q in paths)}


def example_options(text: str) -> dict[str, set[str]]:
    """The options the example sets or shows commented out, per declared section."""
    live = yaml.safe_load(re.sub(r"^(\s*)# (?=[a-z_]+:|  |- )", r"\1", text, flags=re.M))
    return {name: _paths(_at(live, name), name) for name in DECLARED}


def docs_options(texts: list[str]) -> dict[str, set[str]]:
    """The options docs/*.md name: `section.key` (or `section.key: value`) in backticks, or keys of a YAML block under a declared section."""
    found: dict[str, set[str]] = {name: set() for name in DECLARED}
    sections = "|".join(re.escape(name) for name in sorted(DECLARED, key=len, reverse=True))
    for text in texts:
        for path in re.findall(rf"`((?:{sections})(?:\.[a-z_]+)+)(?:`|: )", text):
            if path.rsplit(".", 1)[-1] in FILE_SUFFIXES:
                continue
            found[max((n for n in DECLARED if path.startswith(n + ".")), key=len)].add(path)
        for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
            try:
                doc = yaml.safe_load(block)
            except yaml.YAMLError:
                continue
            for name in DECLARED:
                found[name] |= _paths(_at(doc, name), name)
    return found


def _as_declared(path: str) -> str:
    """``storage.postgres_password_file`` names ``storage.postgres_password``: a secret may come from a file
    (``notify.pagerduty.routing_keys_files``: a mapping of secrets from one file each)."""
    head, _, key = path.rpartition(".")
    for suffix in (MAP_SUFFIX, SUFFIX):
        if key.endswith(suffix) and key.removesuffix(suffix) in SECRET_KEYS:
            return f"{head}.{key.removesuffix(suffix)}"
    return path


def _declaration(path: str) -> tuple[type[Section], str] | None:
    """The part that declares an option, and its key: ``receiver.auth.tokens`` and ``api.auth.tokens`` are one."""
    name = max((n for n in DECLARED if path.startswith(n + ".")), key=len)
    cls, keys = DECLARED[name], path.removeprefix(name + ".").split(".")
    for key in keys[:-1]:
        held = {f.encode_name: f.type for f in msgspec.structs.fields(cls)}
        part = part_of(held.get(key)) or list_part(held.get(key))  # tokens: a list of parts
        if part is None:
            return None
        cls = part
    return cls, keys[-1]


def _disagreements(found: dict[str, set[str]], where: str, partial: frozenset[str] = frozenset()) -> list[str]:
    """Options named but not declared, and declared options not named (but in the ``partial`` sections or
    parts of one). A part declared once and held in two places (receiver.auth, api.auth) is named when named
    in one of them."""
    out, named_anywhere, missing = [], set(), []
    for name in DECLARED:
        leaves = _leaves(name)
        named = {p for p in {_as_declared(p) for p in found[name]} - NOT_OPTIONS
                 if not any(p.startswith(leaf + ".") for leaf in leaves)}  # a mapping option's own keys
        out += [f"{where} names {p}, which is not declared" for p in sorted(named - _declared(name))]
        named_anywhere |= {_declaration(p) for p in named & _declared(name)}
        if name not in partial:
            missing += [p for p in sorted(leaves - named) if not any(p.startswith(part + ".") for part in partial)]
    return out + [f"{where} does not name {p}" for p in missing if _declaration(p) not in named_anywhere]


def test_the_example_config_shows_every_declared_option_and_no_other():
    assert _disagreements(example_options(EXAMPLE.read_text()), "examples/alertd.yml", SHOWN_IN_DOCS_ONLY) == []


def top_level_keys(text: str) -> set[str]:
    """The keys the example sets or shows commented out at its top level."""
    return set(yaml.safe_load(re.sub(r"^# (?=[a-z_]+:)", "", text, flags=re.M)))


def test_the_example_config_shows_every_top_level_option_and_section():
    """The options of the file itself (listen, data_dir, ...) have no section the checks above would find."""
    declared = {field.encode_name for field in msgspec.structs.fields(ConfigFile)}
    text = EXAMPLE.read_text()
    assert top_level_keys(text) | {s for s in SHOWN_IN_DOCS_ONLY if "." not in s} == declared
    assert "installation_id" not in top_level_keys(re.sub(r"^# installation_id:.*\n", "", text, flags=re.M))


def test_the_docs_name_every_declared_option_and_no_other():
    texts = [p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))]
    assert _disagreements(docs_options(texts), "docs/*.md") == []


def test_an_undocumented_or_gone_option_is_found():
    text = EXAMPLE.read_text()
    dropped = re.sub(r"^\s*max_headers:.*\n", "", text, flags=re.M)
    assert "examples/alertd.yml does not name connections.max_headers" in _disagreements(
        example_options(dropped), "examples/alertd.yml")
    gone = text.replace("  max_headers: 128", "  max_headers: 128\n  max_idle: 5")
    assert "examples/alertd.yml names connections.max_idle, which is not declared" in _disagreements(
        example_options(gone), "examples/alertd.yml")
    docs = docs_options(["`connections.max_open` and `classify.rules_api.waits`"])
    found = _disagreements(docs, "docs")
    assert "docs names classify.rules_api.waits, which is not declared" in found
    assert "docs does not name connections.reserved_fds" in found and "docs does not name connections.max_open" not in found
    shared = _disagreements(docs_options(["`api.auth.tokens`"]), "docs")  # one AuthSettings, in two places
    assert "docs does not name receiver.auth.tokens" not in shared
    assert {"docs does not name receiver.auth.bearer_token", "docs does not name api.auth.bearer_token"} <= set(shared)


# -- every declared section's errors read as they did when the schema was written by hand

BAD = """\
tls: {cert_file: "", min_version: TLS1.0}
log: {format: xml, level: loud}
storage: {backend: mysql, retention: forever, incident_retention: 5, synchronous: OFF, extra: 1}
connections: {max_open: 2, reserved_fds: -1, header_timeout: soon, max_opn: 5}
rules: {paths: [], site: [1], watch_interval: 1x}
ha: {lease_ttl: 5, renew_interval: 1s, advertize: x}
processing: {batch_size: 0, tick_interval: "1 s", detailed_incidents: -1}
sources: {kube_health: {enabled: "yes", max_event_age: 1h, unready_afer: 1m}, cloudevents: {cluster: 5}}
report: {sample_interval: 1hour, digest: {weekday: funday, hour: 24}}
normalize: {kubernetes: {max_lookups: 0, wait: 2}, node_labels: [], node_map: {a: ""}, cluster: 1, xid_label: x}
classify: {prometheus_rules: [""], rules_api: {prometheus: ["ftp://x"], max_bytes: 10, tll: 1m}}
rma: {jira: {url: ftp://x, email: a, api_token: "", project: hw, labels: ["a b"]}, webhook: {url: http://x, signing_secret: short, headers: {a: 1}}, timeout: 1}
notify: {retry: {max_attempts: 0}, console: {enabled: "yes"}, slack: {tokn: x, rate: {per_channel: 0}, links: {lifetime: 7days}},
  pagerduty: {routing_keys: {"a b": k}, timeout: 10}, webhook: {endpoints: {t: {url: ftp://x, secret: short, extra: 1}}},
  opsgenie: {api_url: ftp://x, api_keys: {g: 1}}}
alertmanager: {url: 5, timeout: 10, basic: {username: a}, urls: [], receivers: [""], reconcile_intervl: 1m}
enrich: {deadline: soon, retry: [1x], max_evidence: 0, logs: {url: ftp://x, fields: {host: []}, window: {align: 1}, max_lines: 20000, graylog: {api: rest}, batch: {max: 0}}, kube: {in_cluster: "yes", max_owner_depth: 30, jobs: {namespaces: {x: {restart: 1m}}}, owner_plurals: {Foo: ""}}}
receiver: {max_body_bytes: 10, body_timeout: soon, max_backlg: 1, auth: {tokens: [{name: a, role: boss, token: short}]}}
api: {auth: {basic: {username: u}, trusted_proxy: {from: [x]}}, allowed_hosts: ["a/b"]}
listen: localhost
installation_id: A
"""
BAD_MESSAGES = [
    "1:6: tls: 'key_file' is a required property",
    "1:18: tls.cert_file: '' should be non-empty",
    "1:35: tls.min_version: 'TLS1.0' is not one of ['TLS1.2', 'TLS1.3']",
    "2:15: log.format: 'xml' is not one of ['text', 'json']",
    "2:27: log.level: 'loud' is not one of ['debug', 'info', 'warning', 'error']",
    "3:10: storage: unknown key(s) 'extra'",
    "3:20: storage.backend: 'mysql' is not one of ['sqlite', 'postgres']",
    "3:38: storage.retention: 'forever' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    "3:67: storage.incident_retention: 5 is not of type 'string'",
    "3:83: storage.synchronous: False is not one of ['FULL', 'NORMAL']",
    "4:14: connections: unknown key(s) 'max_opn' (did you mean 'max_open'?)",
    '4:25: connections.max_open: 2 is less than the minimum of 8',
    '4:42: connections.reserved_fds: -1 is less than the minimum of 0',
    "4:62: connections.header_timeout: 'soon' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    '5:16: rules.paths: [] should be non-empty',
    "5:27: rules.site[0]: 1 is not of type 'string'",
    "5:47: rules.watch_interval: '1x' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    "6:5: ha: unknown key(s) 'advertize' (did you mean 'advertise'?)",
    "6:17: ha.lease_ttl: 5 is not of type 'string'",
    '7:26: processing.batch_size: 0 is less than the minimum of 1',
    "7:44: processing.tick_interval: '1 s' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    '7:71: processing.detailed_incidents: -1 is less than the minimum of 0',
    "8:24: sources.kube_health: unknown key(s) 'unready_afer' (did you mean 'unready_after'?)",
    "8:34: sources.kube_health.enabled: 'yes' is not of type 'boolean'",
    "8:102: sources.cloudevents.cluster: 5 is not of type 'string'",
    "9:27: report.sample_interval: '1hour' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    "9:42: report.digest: 'channel' is a required property",
    "9:52: report.digest.weekday: 'funday' is not one of ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday']",
    '9:66: report.digest.hour: 24 is greater than the maximum of 23',
    '10:39: normalize.kubernetes.max_lookups: 0 is less than the minimum of 1',
    "10:48: normalize.kubernetes.wait: 2 is not of type 'string'",
    "11:31: classify.prometheus_rules[0]: '' should be non-empty",
    "11:47: classify.rules_api: unknown key(s) 'tll' (did you mean 'ttl'?)",
    "11:61: classify.rules_api.prometheus[0]: 'ftp://x' does not match '^https?://[^/?#]+(/[^?#]*)?$'",
    '11:84: classify.rules_api.max_bytes: 10 is less than the minimum of 1024',
    "12:19: rma.jira.url: 'ftp://x' does not match '^https?://'",
    "12:35: rma.jira.email: 'a' is too short",
    "12:49: rma.jira.api_token: '' should be non-empty",
    "12:62: rma.jira.project: 'hw' does not match '^[A-Z][A-Z0-9_]+$'",
    "12:75: rma.jira.labels[0]: 'a b' does not match '^[^\\\\s]+$'",
    "12:125: rma.webhook.signing_secret: 'short' is too short",
    "12:145: rma.webhook.headers.a: 1 is not of type 'string'",
    "12:159: rma.timeout: 1 is not of type 'string'",
    '13:32: notify.retry.max_attempts: 0 is less than the minimum of 1',
    "13:55: notify.console.enabled: 'yes' is not of type 'boolean'",
    "13:70: notify.slack: unknown key(s) 'tokn' (did you mean 'token'?)",
    '13:100: notify.slack.rate.per_channel: 0 is less than or equal to the minimum of 0',
    "13:111: notify.slack.links: 'signing_secret' is a required property",
    "13:122: notify.slack.links.lifetime: '7days' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    "14:29: notify.pagerduty.routing_keys: 'a b' does not match '^[A-Za-z0-9_.-]+$'",
    "14:50: notify.pagerduty.timeout: 10 is not of type 'string'",
    "14:80: notify.webhook.endpoints.t: unknown key(s) 'extra'",
    "14:86: notify.webhook.endpoints.t.url: 'ftp://x' does not match '^https?://'",
    "14:103: notify.webhook.endpoints.t.secret: 'short' is too short",
    "15:23: notify.opsgenie.api_url: 'ftp://x' does not match '^https?://'",
    "15:46: notify.opsgenie.api_keys.g: 1 is not of type 'string'",
    "16:15: alertmanager: unknown key(s) 'reconcile_intervl' (did you mean 'reconcile_interval'?)",
    "16:21: alertmanager.url: 5 is not of type 'string'",
    "16:33: alertmanager.timeout: 10 is not of type 'string'",
    "16:44: alertmanager.basic: 'password' is a required property",
    '16:65: alertmanager.urls: [] should be non-empty',
    "16:81: alertmanager.receivers[0]: '' should be non-empty",
    "17:113: enrich.logs.window.align: 1 is not of type 'string'",
    '17:128: enrich.logs.max_lines: 20000 is greater than the maximum of 10000',
    "17:150: enrich.logs.graylog.api: 'rest' is not one of ['messages', 'universal']",
    '17:170: enrich.logs.batch.max: 0 is less than the minimum of 1',
    "17:194: enrich.kube.in_cluster: 'yes' is not of type 'boolean'",
    "17:20: enrich.deadline: 'soon' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    '17:218: enrich.kube.max_owner_depth: 30 is greater than the maximum of 20',
    "17:245: enrich.kube.jobs.namespaces.x: unknown key(s) 'restart' (did you mean 'restart_time'?)",
    "17:283: enrich.kube.owner_plurals.Foo: '' should be non-empty",
    "17:34: enrich.retry[0]: '1x' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    '17:53: enrich.max_evidence: 0 is less than the minimum of 1',
    "17:62: enrich.logs: 'backend' is a required property",
    "17:68: enrich.logs.url: 'ftp://x' does not match '^https?://'",
    '17:92: enrich.logs.fields.host: [] should be non-empty',
    "10:12: normalize: unknown key(s) 'xid_label' (did you mean 'xid_labels'?)",
    "10:65: normalize.node_labels: [] should be non-empty",
    "10:83: normalize.node_map.a: '' should be non-empty",
    "10:97: normalize.cluster: 1 is not of type 'string'",
    "18:11: receiver: unknown key(s) 'max_backlg' (did you mean 'max_backlog'?)",
    "18:28: receiver.max_body_bytes: 10 is less than the minimum of 1024",
    "18:46: receiver.body_timeout: 'soon' is not a duration: use a Prometheus duration such as 30s, 5m or 1h30m (units: ms, s, m, h, d, w, y)",
    "18:99: receiver.auth.tokens[0].role: 'boss' is not one of ['read', 'act', 'admin']",
    "18:112: receiver.auth.tokens[0].token: 'short' is too short",
    "19:21: api.auth.basic: 'password' is a required property",
    "19:59: api.auth.trusted_proxy.from[0]: 'x' does not match '^[0-9a-fA-F:.]+(/[0-9]{1,3})?$'",
    "19:81: api.allowed_hosts[0]: 'a/b' does not match '^[^/:\\\\s]+$|^[0-9a-fA-F:]+$'",
    "20:9: listen: 'localhost' is not an address to listen on: use HOST:PORT, e.g. 127.0.0.1:9095, 0.0.0.0:9095 or [::1]:9095",
    "21:18: installation_id: 'A' does not match '^[a-z0-9][a-z0-9-]{0,31}$'",
]


def test_every_declared_section_reports_its_errors_with_line_column_and_the_same_words(tmp_path):
    """The messages of the hand-written schema, word for word (its last version, before the declarations);
    the file's own keys (listen, installation_id) too."""
    path = tmp_path / "bad.yml"
    path.write_text(BAD)
    with pytest.raises(InvalidDocument) as raised:
        load_config(path)
    assert sorted(str(p).removeprefix(f"{path}:") for p in raised.value.problems) == sorted(BAD_MESSAGES)
