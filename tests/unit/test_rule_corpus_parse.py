"""The corpus harness reads promtool's own printout of the alerts that fired (testkit/rule_corpus.py)."""
from __future__ import annotations

from testkit.rule_corpus import StaticKubernetes, parse_promtool

# promtool 2.42's failure report for a test expecting no alert (labels and annotations as Go prints them).
PRINTED = '''Unit Testing:  corpus.test.yml
  FAILED:
    alertname: GPU_XID\u9519\u8bef, time: 10m,\u0020
        exp:[],\u0020
        got:[
            0:
              Labels:{Hostname="5f3c9a1e7b2d", alertname="GPU_XID\u9519\u8bef", gpu="0", severity="P1"}
              Annotations:{description="count \\"13\\"\\nline two", summary="\u8282\u70b9 GPU 0"}
            1:
              Labels:{Hostname="5f3c9a1e7b2d", alertname="GPU_XID\u9519\u8bef", gpu="1", severity="P1"}
              Annotations:{}
            ]
    alertname: DcgmExporterDown, time: 10m,\u0020
        exp:[],\u0020
        got:[
            0:
              Labels:{alertname="DcgmExporterDown", instance="dcgm-exporter:9400", job="dcgm"}
              Annotations:{summary="dcgm-exporter dcgm-exporter:9400 down"}
            ]
'''


def test_every_alert_of_every_rule_with_quotes_newlines_and_unicode() -> None:
    got = parse_promtool(PRINTED)
    xid = got["GPU_XID\u9519\u8bef"]
    assert [a["labels"]["gpu"] for a in xid] == ["0", "1"]
    assert xid[0]["annotations"]["description"] == 'count "13"\nline two'
    assert xid[0]["annotations"]["summary"] == "\u8282\u70b9 GPU 0" and xid[1]["annotations"] == {}
    assert got["DcgmExporterDown"][0]["labels"]["instance"] == "dcgm-exporter:9400"


def test_the_static_kubernetes_answers_like_the_node_index() -> None:
    kube = StaticKubernetes(nodes={"gpu-node-3": ["10.0.3.13"]}, pods={"gpu-operator/dcgm-x": "gpu-node-3"},
                            pod_ips={"10.244.3.17": "gpu-node-3"})
    assert kube.node_of_pod("c", "gpu-operator", "dcgm-x") == kube.node_of_pod("c", "", "dcgm-x") == "gpu-node-3"
    assert kube.node_of_address("c", "10.0.3.13") == kube.node_of_address("c", "10.244.3.17") == "gpu-node-3"
    assert kube.is_node("c", "gpu-node-3") and kube.is_node("c", "gpu-node-9") is False
    assert StaticKubernetes().is_node("c", "x") is None
