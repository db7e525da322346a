"""Rules whose alerts cannot carry a node: the result labels of real expressions, and what `alertd check
--prometheus-rules` and `alertd explain` say about them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from alertd.authoring.node_carry import carried, node_warning
from alertd.cli.main import main as cli_main
from alertd.engine.normalize import NormalizeConfig
from tests.unit.test_explain_and_promrules import one, webhook

NODE_LABELS = NormalizeConfig().node_labels
NVRM_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."


@pytest.mark.parametrize("expr, only, dropped", [
    ("sum by (cluster) (DCGM_FI_DEV_XID_ERRORS) > 0", {"cluster"}, set()),
    ("DCGM_FI_DEV_GPU_TEMP > 90", None, set()),
    ('count(up{job="dcgm-exporter"} == 0) > 2', set(), set()),
    ('absent(up{job="dcgm-exporter", node="gpu-node-1"})', {"job", "node"}, set()),
    ('count_values by (node) ("xid", DCGM_FI_DEV_XID_ERRORS > 0)', {"node", "xid"}, set()),
    ("sum without (instance, pod) (rate(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[5m])) > 0", None, {"instance", "pod"}),
    ('label_replace(max by (Hostname) (x), "node", "$1", "Hostname", "(.*)") > 0', {"Hostname", "node"}, set()),
    ("x > on (instance) y", {"instance"}, set()),
    ("x > ignoring (pod) y", None, {"pod"}),
    ("DCGM_FI_DEV_XID_ERRORS * on (pod, namespace) group_left (node) kube_pod_info", None, set()),
    ("sum by (cluster) (x) or sum by (node) (y)", {"cluster", "node"}, set()),
    ("topk(3, x)", None, set()),
])
def test_result_labels(expr: str, only: set | None, dropped: set) -> None:
    result = carried(expr)
    assert result is not None
    assert result.only == (frozenset(only) if only is not None else None) and result.dropped == frozenset(dropped)


@pytest.mark.parametrize("expr, labels, says", [
    ("sum by (cluster) (changes(DCGM_FI_DEV_XID_ERRORS[5m])) > 0", {}, "keeps none of the node labels"),
    ("max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP) > 90", {}, "keeps only Hostname"),
    ("sum without (node, Hostname, hostname, kubernetes_node, host, instance, source) (x) > 0", {},
     "leave node out of 'without (...)'"),
    ("sum by (cluster) (x) > 0", {"node": "{{ $labels.cluster }}"}, ""),  # the rule sets a node label itself
    ("max by (node, gpu) (DCGM_FI_DEV_GPU_TEMP) > 90", {}, ""),
    ("DCGM_FI_DEV_XID_ERRORS > 0", {}, ""),  # the series' own labels: the scrape decides
    ("DCGM_FI_DEV_GPU_TEMP{", {}, ""),
])
def test_node_warning(expr: str, labels: dict, says: str) -> None:
    warning = node_warning(expr, labels, NODE_LABELS)
    assert (says in warning) if says else warning == "", warning
    if "keeps none" in says:
        assert "by (cluster, node)" in warning  # what to write instead


def test_check_prometheus_rules_warns_and_says_what_to_add(tmp_path: Path, capsys) -> None:
    rules = {"groups": [{"name": "site-gpu", "rules": [
        {"alert": "XidErrorsInCluster", "expr": "sum by (cluster) (changes(DCGM_FI_DEV_XID_ERRORS[5m])) > 0"},
        {"alert": "GpuTooHot", "expr": "max by (Hostname, gpu) (DCGM_FI_DEV_GPU_TEMP) > 90"},
        {"alert": "GpuXidPerNode", "expr": "max by (node, gpu) (changes(DCGM_FI_DEV_XID_ERRORS[5m])) > 0"},
    ]}]}
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump(rules))
    assert cli_main(["check", "--prometheus-rules", str(path)]) == 0
    out = capsys.readouterr().out
    cluster_rule, hot_rule, node_rule = out.split("\n  Gpu")[0], out.split("GpuTooHot")[1], out.split("GpuXidPerNode")[1]
    assert "WARNING: its expression (sum by (cluster)) keeps none of the node labels" in cluster_rule
    assert "keeps only Hostname" in hot_rule.split("GpuXidPerNode")[0]
    assert "node labels" not in node_rule.split("alerting rules")[0]


def test_explain_shows_where_the_node_came_from_and_warns(tmp_path: Path, capsys) -> None:
    stock = one("GPUXidError", {"Hostname": "nvidia-dcgm-exporter-x7k2p", "pod": "nvidia-dcgm-exporter-x7k2p",
                                "namespace": "gpu-operator", "instance": "10.244.3.17:9400", "gpu": "3", "xid": "79",
                                "UUID": "GPU-1", "pci_bus_id": "00000000:3B:00.0"},
                "max by (Hostname, pod, namespace, instance, gpu, UUID, pci_bus_id, xid) (DCGM_FI_DEV_XID_ERRORS) > 0")
    log = one("GPUXidLog", {"host": "gpu-node-3", "cluster": "prod"}, annotations={"description": NVRM_79},
              fp="00000000000000b2")
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(webhook(stock, log)))
    assert cli_main(["explain", str(path)]) == 0
    first, second = capsys.readouterr().out.split("\n\n")[:2]
    assert "node    -  from node unknown: exporter pod gpu-operator/nvidia-dcgm-exporter-x7k2p" in first
    assert "WARNING: its rule: its expression (max by (Hostname, pod, " in first and "keeps only Hostname, instance" in first
    plain = one("GPUXidError", {"Hostname": "dcgm-exporter-4mzrt", "instance": "10.244.3.18:9400", "xid": "79"},
                "DCGM_FI_DEV_XID_ERRORS > 0", fp="00000000000000b3")
    path.write_text(json.dumps(webhook(plain)))
    assert cli_main(["explain", str(path)]) == 0
    assert "WARNING: Hostname/pod name the dcgm-exporter pod (dcgm-exporter-4mzrt), not a node: add a node label" in \
        capsys.readouterr().out
    assert "group   origin  key origin|cluster=default|origin=exporter pod gpu-operator/" in first
    assert "node    gpu-node-3  from log host (label host)" in second
    assert "gpu     pci 0000:3b:00  from PCI address of the NVRM line in annotation description" in second
    assert "Xid 79 from NVRM line in annotation description" in second or "Xid 79 from annotation" in second
    assert "group   node  key node|cluster=prod|node=gpu-node-3" in second
