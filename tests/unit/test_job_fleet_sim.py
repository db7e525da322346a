"""The simulated training fleet (testkit/sim/job_fleet.py): what it serves is what the exporters print, read by
prometheus_client's own parser, and a job's state shows in its GPUs the way the job-level rules read it."""
from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.sim.job_fleet import JobFleetSim

NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def fleet() -> tuple[JobFleetSim, Clock]:
    clock = Clock()
    sim = JobFleetSim(NODES, clock=clock, topology={"gpu-node-01": {"zone": "z1", "rack": "r07", "clique": "cl.1"}})
    sim.add_job("ml-train", "PyTorchJob", "llama-70b", NODES[:2])
    sim.add_job("research", "Deployment", "vit-h", NODES[2:], via=("ReplicaSet", "vit-h-6c8f9d7b5"), container="trainer")
    return sim, clock


def test_dcgm_series_carry_the_pod_mapping_and_follow_the_job_state() -> None:
    sim, _ = fleet()
    tensor = samples(sim.render_dcgm("gpu-node-02"))["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    assert len(tensor) == 8
    labels, value = tensor[0]
    assert {k: labels[k] for k in ("namespace", "pod", "container")} == {
        "namespace": "ml-train", "pod": "llama-70b-worker-1", "container": "pytorch"}
    assert set(labels) >= {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"}
    assert 0.55 < value < 0.7
    sim.job_state("ml-train", "llama-70b", "hung")
    hung = samples(sim.render_dcgm("gpu-node-02"))
    # A rank spinning in NCCL: GPU_UTIL says busy, the tensor pipe says nothing happens.
    assert {v for _, v in hung["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]} == {0.0}
    assert {v for _, v in hung["DCGM_FI_DEV_GPU_UTIL"]} == {100.0}
    sim.job_state("research", "vit-h", "paused")
    paused = samples(sim.render_dcgm("gpu-node-03"))
    assert {v for _, v in paused["DCGM_FI_DEV_GPU_UTIL"]} == {0.0}
    assert min(v for _, v in paused["DCGM_FI_PROF_PCIE_TX_BYTES"]) > 1e10  # the state copied to the host
    with pytest.raises(ValueError, match="state 'stuck'"):
        sim.job_state("research", "vit-h", "stuck")


def test_a_slow_gpu_and_a_quiet_one() -> None:
    sim, _ = fleet()
    sim.slow_gpu("gpu-node-01", 5)
    got = samples(sim.render_dcgm("gpu-node-01"))
    clocks = {labels["gpu"]: v for labels, v in got["DCGM_FI_DEV_SM_CLOCK"]}
    assert clocks["5"] == 1260 and clocks["0"] == 1980
    assert {labels["gpu"]: v for labels, v in got["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]}["5"] == 8  # HW slowdown
    peers = {labels["gpu"]: v for labels, v in samples(sim.render_dcgm("gpu-node-02"))["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]}
    assert max(peers.values()) < 0.5  # the peers wait for it
    sim.quiet_gpu("gpu-node-01", 3)
    temps = samples(sim.render_dcgm("gpu-node-01"))["DCGM_FI_DEV_GPU_TEMP"]
    assert sorted(labels["gpu"] for labels, _ in temps) == ["0", "1", "2", "4", "5", "6", "7"]


def test_infiniband_port_down_and_counters_on_the_clock() -> None:
    sim, clock = fleet()
    before = samples(sim.render_node_exporter("gpu-node-02"))
    clock.now += 10
    sim.nic_down("gpu-node-02", "mlx5_2")
    sim.nic_down("gpu-node-02", "mlx5_2")  # already down: one link_downed
    clock.now += 10
    after = samples(sim.render_node_exporter("gpu-node-02"))

    def port(got: dict[str, list[tuple[dict[str, str], float]]], name: str, device: str) -> float:
        return next(v for labels, v in got[name] if labels["device"] == device and labels["port"] == "1")

    assert port(after, "node_infiniband_state_id", "mlx5_2") == 1
    assert port(after, "node_infiniband_physical_state_id", "mlx5_2") == 2
    assert port(after, "node_infiniband_link_downed_total", "mlx5_2") == 1
    moved = port(after, "node_infiniband_port_data_transmitted_bytes_total", "mlx5_0") - port(
        before, "node_infiniband_port_data_transmitted_bytes_total", "mlx5_0")
    assert moved == pytest.approx(20 * 2.2e10, rel=1e-6)
    stopped = port(after, "node_infiniband_port_data_transmitted_bytes_total", "mlx5_2") - port(
        before, "node_infiniband_port_data_transmitted_bytes_total", "mlx5_2")
    assert stopped == pytest.approx(10 * 2.2e10, rel=1e-6)  # nothing once the link is gone
    with pytest.raises(ValueError, match="no HCA mlx5_9"):
        sim.nic_down("gpu-node-02", "mlx5_9")


def test_kube_state_metrics_owners_and_topology() -> None:
    sim, _ = fleet()
    got = samples(sim.render_ksm())
    owners = {labels["pod"]: (labels["owner_kind"], labels["owner_name"]) for labels, _ in got["kube_pod_owner"]}
    assert owners["llama-70b-worker-0"] == ("PyTorchJob", "llama-70b")
    vit_pod = next(p for p in owners if p.startswith("vit-h-6c8f9d7b5-"))
    assert owners[vit_pod] == ("ReplicaSet", "vit-h-6c8f9d7b5")
    assert [(labels["replicaset"], labels["owner_kind"], labels["owner_name"]) for labels, _ in got["kube_replicaset_owner"]] == [
        ("vit-h-6c8f9d7b5", "Deployment", "vit-h")]
    running = {labels["pod"] for labels, v in got["kube_pod_status_phase"] if labels["phase"] == "Running" and v == 1}
    assert running == set(owners)
    node_labels = {labels["node"]: labels for labels, _ in got["kube_node_labels"]}
    assert node_labels["gpu-node-01"]["label_nvidia_com_gpu_clique"] == "cl.1"
    assert "label_topology_kubernetes_io_rack" not in node_labels["gpu-node-02"]
    with pytest.raises(ValueError, match="already runs a job"):
        sim.add_job("x", "PyTorchJob", "y", ["gpu-node-01"])


def wire_rates(sim: JobFleetSim, clock: Clock, node: str) -> dict[str, float]:
    """Bytes per second over a minute, as node:network_bytes:rate2m adds them: per netdev device and direction
    (loopback apart) and per InfiniBand direction summed over the HCAs."""
    def counters() -> dict[str, float]:
        got = samples(sim.render_node_exporter(node))
        out = {f"{d}/{labels['device']}": v for d in ("receive", "transmit")
               for labels, v in got[f"node_network_{d}_bytes_total"]}
        for d in ("received", "transmitted"):
            out[f"ib/{d}"] = sum(v for _, v in got[f"node_infiniband_port_data_{d}_bytes_total"])
        return out

    before = counters()
    clock.now += 60
    return {k: (v - before[k]) / 60 for k, v in counters().items()}


def test_netdev_series_are_node_exporters() -> None:
    sim, _ = fleet()
    families = {f.name: f for f in text_string_to_metric_families(sim.render_node_exporter("gpu-node-01"))}
    for key in ("receive_bytes", "transmit_bytes", "receive_packets", "transmit_drop"):
        family = families[f"node_network_{key}"]
        assert (family.type, family.documentation) == ("counter", f"Network device statistic {key}.")
        assert {s.name for s in family.samples} == {f"node_network_{key}_total"}
        assert sorted(s.labels["device"] for s in family.samples) == ["ens9f0np0", "ens9f1np1", "lo"]
        assert all(set(s.labels) == {"device"} for s in family.samples)


def test_the_network_follows_the_job_state() -> None:
    sim, clock = fleet()
    training = wire_rates(sim, clock, "gpu-node-01")
    assert training["ib/transmitted"] > 1e11 and training["receive/ens9f0np0"] > 1e7  # collectives, batches in
    sim.job_state("ml-train", "llama-70b", "paused")  # a checkpoint: every node writes its shard
    checkpoint = wire_rates(sim, clock, "gpu-node-02")
    assert checkpoint["transmit/ens9f0np0"] == pytest.approx(1e9, rel=0.2)
    assert checkpoint["ib/transmitted"] < 1e5
    sim.job_state("ml-train", "llama-70b", "loading")  # waiting for data: every node reads
    loading = wire_rates(sim, clock, "gpu-node-01")
    assert loading["receive/ens9f0np0"] == pytest.approx(8e8, rel=0.2)
    assert {v for _, v in samples(sim.render_dcgm("gpu-node-01"))["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]} == {0.0}
    sim.job_state("ml-train", "llama-70b", "hung")  # nothing but background, loopback apart
    hung = wire_rates(sim, clock, "gpu-node-02")
    assert 0 < sum(v for k, v in hung.items() if not k.endswith("/lo")) < 2e5
    assert hung["transmit/lo"] > 0
