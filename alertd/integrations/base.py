"""The contract every integration implements, and what it may use of the store.

An integration (Slack, PagerDuty, the console, a webhook, Opsgenie) is one
module with one ``Integration`` subclass. It declares

* ``name``: the integration's key in rule files (``receivers[].<name>``), in
  the config (``notify.<name>``) and in targets (``<name>:<address>``);
* ``receiver_schema``: the JSON Schema fragment of ``receivers[].<name>`` that
  the routing schema takes in (alertd.integrations.registry);
* ``section``: the ``notify.<name>`` section declared once (a Section Struct,
  alertd/core/sections.py); notify.schema.json is generated from it;
* ``intents``: what it accepts (show, timeline, page, escalate, resolve);
  the router never gives it anything else;
* ``coalesce``/``needs_ref``: what the shared outbox stages do for it
  (alertd.notify.stages): queued items of a coalesced intent are delivered as
  one batch; an intent that needs a ref (a thread reply needs its message) is
  skipped when nothing was delivered before;
* ``targets(doc)``: the targets a receiver's section names;
* ``settings(section, links)`` (the decoded section) and
  ``notifier(settings, store, clock)``.

The notifier's only job is ``deliver(items, ref) -> Delivered`` (raise
``DeliveryError(retry=..., after=...)`` on failure): everything around it
(coalescing, gating, rate limits, retries, recording) is shared.
"""
from __future__ import annotations

import abc
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Callable, ClassVar, Generic, Hashable, Mapping, Protocol, Self, TypedDict, TypeVar

from msgspec import Meta

from alertd.core.json_types import JSONObject, JSONValue, obj
from alertd.core.yamlio import Path_
from alertd.integrations.ratelimit import RateLimiter
from alertd.core.outbox_items import Intent, OutboxItem, Target
from alertd.core.model import Incident
from alertd.core.sections import Seconds, Section, duration

Problem = Callable[[Path_, str], None]  # report a problem at a path of the rule file
KEY_NAME = "[A-Za-z0-9_.-]+"  # a key's name in the config (notify.pagerduty.routing_keys), as rule files name it
KEY_REF_PATTERN = rf"^\$\{{{KEY_NAME}\}}$"  # ${name}: how a rule file names a key
KEY_REF = re.compile(rf"^\$\{{({KEY_NAME})\}}$")
DURATION_SCHEMA = {"type": "string", "pattern": "^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"}


class DeliveryError(Exception):
    """Delivery failed; ``retry`` says whether trying again can help, ``after`` how long to wait."""

    def __init__(self, message: str, *, retry: bool = True, after: float | None = None):
        super().__init__(message)
        self.retry = retry
        self.after = after


def folded_unposted(inc: Incident, ref: str | None) -> bool:
    """A node incident folded into a fleet incident (or linked as a stalled job's suspect) before anything
    was sent for it: its first post or page is dropped, never delivered (the fleet or job incident speaks
    for it, even after an outage)."""
    return inc.spoken_for and not ref


@dataclass(slots=True)
class Delivered:
    ref: str | None = None  # an external id to remember (Slack ts, PagerDuty state), kept per incident+target


class NotifyStore(Protocol):
    """What delivery needs of the store."""

    async def get_incident(self, incident_id: str) -> Incident | None: ...

    async def notify_ref(self, incident_id: str, target: str) -> str | None: ...

    async def save_ref(self, incident_id: str, target: str, ref: str) -> None: ...

    async def any_ref(self, target: str, like: str) -> str | None: ...

    async def pending_outbox_for(self, incident_id: str, target: str, *, after_id: int,
                                 kinds: tuple[str, ...]) -> list[OutboxItem]: ...

    async def finish_outbox_batch(self, done: list[tuple[int, tuple[str, str, str] | None]]) -> None: ...

    async def retry_outbox(self, item_id: int, due_at: datetime, error: str, *, give_up: bool = False) -> None: ...

    async def due_outbox(self, now: datetime, limit: int) -> list[OutboxItem]: ...


@dataclass(frozen=True, slots=True)
class Links:
    """Where message links point; shared by every integration (from the top of the config)."""

    runbook_base_url: str = ""
    alertmanager_url: str = ""
    alertd_url: str = ""
    silences: bool = False  # alertmanager.url is set: a Silence button can make one


KeyName = Annotated[str, Meta(pattern=f"^{KEY_NAME}$")]  # a key's name in the config, as rules name it


@dataclass(frozen=True)
class KeyRef:
    """How a rule file names a key the service config holds under ``keys`` (``routing_key: "${gpu-infra}"``):
    declared once, it gives the reference's schema and reads the key's name back."""

    keys: str  # where the config holds them, e.g. notify.pagerduty.routing_keys

    @property
    def says(self) -> str:
        """What the reference must be: its schema's description, and its refusal's advice."""
        return (f'Name a key of {self.keys} in the service config, like "${{gpu-infra}}"; never put the key itself '
                "in a rule file.")

    @property
    def refused(self) -> str:
        return f"is not a key's name. {self.says}"

    def schema(self) -> JSONObject:
        return {"type": "string", "pattern": KEY_REF_PATTERN, "description": self.says,
                "errorMessage": {"pattern": self.refused}}

    def name(self, value: JSONValue, problem: Problem, path: Path_) -> str:
        """'${gpu-infra}' -> 'gpu-infra' (the schema took it; anything else is a problem at ``path``)."""
        m = KEY_REF.match(str(value))
        if not m:
            problem(path, f"{value!r} {self.refused}")
            return ""
        return m.group(1)


@dataclass(frozen=True)
class KeyReceiver:
    """A receiver's part that names one key (``pagerduty: {routing_key: "${gpu-infra}"}``)."""

    field: str
    ref: KeyRef
    description: str = ""

    def schema(self) -> JSONObject:
        out: JSONObject = {"type": "object", "additionalProperties": False, "required": [self.field]}
        if self.description:
            out["description"] = self.description
        out["properties"] = {self.field: self.ref.schema()}
        return out

    def name(self, doc: JSONValue, problem: Problem, path: Path_) -> str:
        return self.ref.name(obj(doc, self.field).get(self.field), problem, path + (self.field,))


class RequestOptions(Section, frozen=True):
    """The options of every integration that sends requests (the sections of notify build on it)."""

    timeout: Annotated[Seconds, Meta(description="Per request.")] = duration("10s")


class SharedSettings(TypedDict):
    """The settings every integration has (``NotifierSettings.shared``)."""

    timeout: float
    runbook_base_url: str
    alertmanager_url: str
    alertd_url: str
    silences: bool


@dataclass(slots=True)
class NotifierSettings:
    """What every notifier's settings share: the request timeout and where message links point."""

    KIND: ClassVar[str] = ""  # the integration's name, its key in ``Config.notify``
    timeout: float = float(RequestOptions().timeout)
    runbook_base_url: str = ""
    alertmanager_url: str = ""
    alertd_url: str = ""
    silences: bool = False

    @staticmethod
    def shared(section: RequestOptions, links: Links) -> SharedSettings:
        return SharedSettings(timeout=float(section.timeout),
                              runbook_base_url=links.runbook_base_url, alertmanager_url=links.alertmanager_url,
                              alertd_url=links.alertd_url, silences=links.silences)

    @classmethod
    def from_config(cls, cfg: NotifyConfig) -> Self:
        """The settings parsed with the config (``Config.notify``), or the defaults when there are none."""
        settings = cfg.notify.get(cls.KIND)
        return settings if isinstance(settings, cls) else cls()

    @property
    def links(self) -> Links:
        return Links(self.runbook_base_url, self.alertmanager_url, self.alertd_url, self.silences)

    @property
    def enabled(self) -> bool:
        return False


S = TypeVar("S", bound=NotifierSettings)
C = TypeVar("C", bound=Section)


class NotifyConfig(Protocol):
    """The configuration as an integration reads it (alertd/config/settings.py's Config): every integration's
    settings, parsed once from the ``notify`` section by name."""

    @property
    def notify(self) -> Mapping[str, NotifierSettings]: ...


class Notifier(abc.ABC):
    """Delivers the items of one incident+target; everything around it is the outbox's stages."""

    kind: str = ""
    coalesce: frozenset[Intent] = frozenset()
    coalesce_groups: tuple[frozenset[Intent], ...] = ()  # intents coalesced together (default: each alone)
    needs_ref: frozenset[Intent] = frozenset()

    @abc.abstractmethod
    async def deliver(self, items: list[OutboxItem], ref: str | None) -> Delivered:
        """Deliver ``items`` (the first is due; the rest are queued items it covers). ``ref`` is what an
        earlier delivery for this incident+target saved. Raise DeliveryError when it failed."""

    def rate_key(self, items: list[OutboxItem], ref: str | None) -> Hashable | None:
        """The key whose sends are spaced by ``limiter`` (e.g. a Slack channel), or None."""
        return None

    # When rate_key is used; deliver awaits its at_wire(key) right before each request to that key, so the
    # spacing holds where the API sees it
    limiter: RateLimiter | None = None

    async def close(self) -> None:
        return None


class Integration(abc.ABC, Generic[S, C]):
    """One kind of target. See the module docstring; registered in alertd.integrations.registry."""

    name: ClassVar[str]
    intents: ClassVar[frozenset[Intent]]
    receiver_schema: ClassVar[JSONObject]
    section: ClassVar[type[Section]]  # notify.<name>, declared once; ``settings`` gets it decoded
    conversation: ClassVar[bool] = False  # keeps a conversation per incident: escalations are noted there
    remembers: ClassVar[bool] = True  # False: a delivery leaves nothing to keep current (quiet items are dropped)

    def accepts(self, intent: Intent) -> bool:
        return intent in self.intents

    @abc.abstractmethod
    def targets(self, doc: JSONValue, problem: Problem, path: Path_) -> list[Target]:
        """The targets a receiver's ``<name>:`` section names (schema-valid; report semantic problems)."""

    @abc.abstractmethod
    def settings(self, section: C, links: Links) -> S:
        """The decoded ``notify.<name>`` section (defaults when absent) as the notifier's settings."""

    @abc.abstractmethod
    def notifier(self, settings: S, store: NotifyStore, clock: Callable[[], datetime], *,
                 installation: Callable[[], str] = lambda: "") -> Notifier:
        """``installation``: the installation id, read when sending (known once the store is open)."""

    def enabled(self, settings: S) -> bool:
        return settings.enabled

    def unknown(self, settings: S, addresses: set[str]) -> list[str]:
        """Target addresses the rules use that the config does not define (secrets named by the rules)."""
        return []

    def target(self, address: str = "", lane: str = "") -> Target:
        return Target.of(self.name, address, lane)


class KeyedIntegration(Integration[S, C]):
    """An integration whose receiver part names one key of its config section (PagerDuty, Opsgenie, webhook):
    ``receiver`` declares it, and gives ``receiver_schema`` and the targets."""

    receiver: ClassVar[KeyReceiver]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "receiver" in cls.__dict__:
            cls.receiver_schema = cls.receiver.schema()

    def targets(self, doc: JSONValue, problem: Problem, path: Path_) -> list[Target]:
        name = self.receiver.name(doc, problem, path)
        return [self.target(name)] if name else []
