"""The parts of Kubernetes objects alertd reads, as the API server's JSON carries them (core/v1 Node, Pod,
ObjectReference, events.k8s.io-compatible core/v1 Event; policy/v1 PodDisruptionBudget).

Every key is optional (``total=False``): readers use ``.get`` and treat absent as empty, as they must
for objects from any version of the API server. Objects arrive as JSON (a list, a watch event) and are
typed once, where they are decoded, with :func:`as_node`, :func:`as_event`, :func:`as_pod`."""
from __future__ import annotations

from typing import TypedDict, cast

from alertd.core.json_types import JSONObject


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    creationTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]


class ListMeta(TypedDict, total=False):
    resourceVersion: str
    # "continue" is a keyword: read it with .get("continue")


class NodeCondition(TypedDict, total=False):
    type: str
    status: str  # "True", "False", "Unknown"
    reason: str
    message: str
    lastTransitionTime: str
    lastHeartbeatTime: str


class Taint(TypedDict, total=False):
    key: str
    value: str
    effect: str
    timeAdded: str


class NodeSpec(TypedDict, total=False):
    unschedulable: bool
    taints: list[Taint]


class NodeStatus(TypedDict, total=False):
    conditions: list[NodeCondition]
    capacity: dict[str, str]
    allocatable: dict[str, str]


class Node(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


class PodSpec(TypedDict, total=False):
    nodeName: str


class PodStatus(TypedDict, total=False):
    phase: str


class Pod(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class ObjectReference(TypedDict, total=False):
    kind: str
    name: str
    namespace: str
    uid: str


class EventSource(TypedDict, total=False):
    component: str
    host: str


class EventSeries(TypedDict, total=False):
    count: int
    lastObservedTime: str


class Event(TypedDict, total=False):
    metadata: ObjectMeta
    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    source: EventSource
    reportingComponent: str
    reportingInstance: str
    firstTimestamp: str
    lastTimestamp: str
    eventTime: str
    series: EventSeries
    count: int


class LabelSelectorRequirement(TypedDict, total=False):
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: list[str]


class LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[LabelSelectorRequirement]


class PodDisruptionBudgetSpec(TypedDict, total=False):
    selector: LabelSelector


class PodDisruptionBudgetStatus(TypedDict, total=False):
    disruptionsAllowed: int


class PodDisruptionBudget(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus


# The API server's JSON is the documented shape (its OpenAPI schema); these are the one place it is trusted.
def as_node(o: JSONObject) -> Node:
    return cast(Node, o)


def as_event(o: JSONObject) -> Event:
    return cast(Event, o)


def as_pod(o: JSONObject) -> Pod:
    return cast(Pod, o)


def as_pdb(o: JSONObject) -> PodDisruptionBudget:
    return cast(PodDisruptionBudget, o)


__all__ = ["Event", "EventSeries", "EventSource", "LabelSelector", "LabelSelectorRequirement", "ListMeta", "Node",
           "NodeCondition", "NodeSpec", "NodeStatus", "ObjectMeta", "ObjectReference", "OwnerReference", "Pod",
           "PodDisruptionBudget", "PodSpec", "PodStatus", "Taint", "as_event", "as_node", "as_pdb", "as_pod"]
