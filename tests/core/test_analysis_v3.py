"""The v3 definitions in the analysis (docs/definitions.md): closures inside Optimizer.step are
not the optimizer, and the communication vocabulary (NCCL/RCCL anywhere, NVSHMEM, DeepEP,
custom all-reduce, all-to-all)."""

from __future__ import annotations

import pytest
from synthetic_traces import T0, Synth

from stallscope.core.analysis import analyze
from stallscope.core.kineto import is_comm_name
from stallscope.core.trace import load

STEP = 40_000.0


def closure_trace(path, closure_name: str, cat: str = "user_annotation", gpu: bool = True):
    """Two steps: Optimizer.step spans 30 ms of each; inside it a closure of 24 ms (a forward +
    backward the closure runs) holding an aten op of 20 ms; a kernel ends each step."""
    b = Synth()
    for k in range(2):
        t0 = T0 + k * STEP
        b.step(k + 1, t0, STEP)
        b.x("Optimizer.step#SGD.step", "user_annotation", t0 + 5_000, 30_000)
        b.x(closure_name, cat, t0 + 6_000, 24_000)
        b.x("aten::addmm", "cpu_op", t0 + 8_000, 20_000)
        if gpu:
            b.gpu(t0 + 36_000, 3_000, launch_ts=t0 + 35_900)
    return load(b.save(path / "t.json"))


@pytest.mark.parametrize("name,cat", [
    ("stallscope#closure", "user_annotation"),
    ("[LightningModule]BoringModel.training_step", "user_annotation"),
    ("[Strategy]SingleDeviceStrategy.backward", "user_annotation"),
    ("my_closure", "user_annotation"),
])
def test_closure_time_is_not_the_optimizer(tmp_path, name, cat):
    r = analyze(closure_trace(tmp_path, name, cat))
    idle = r.devices[0].idle_by_cause
    # Optimizer: 30 ms minus the 24 ms closure = 6 ms per step; the closure's aten op is CPU
    # ops (with the kernel's 2 µs launch).
    assert idle["optimizer"] == pytest.approx(2 * 6_000)
    assert idle["cpu_ops"] == pytest.approx(2 * (20_000 + 2))
    assert [s.optimizer_us for s in r.steps] == [pytest.approx(6_000)] * 2
    assert r.devices[0].idle_us == pytest.approx(2 * STEP - 2 * 3_000)


def test_cpu_only_closure_split(tmp_path):
    r = analyze(closure_trace(tmp_path, "stallscope#closure", gpu=False))
    assert r.host_by_cause["optimizer"] == pytest.approx(2 * 6_000)
    assert r.host_by_cause["cpu_ops"] == pytest.approx(2 * 20_000)


def test_annotation_named_like_a_closure_but_not_an_annotation_is_optimizer(tmp_path):
    """Only user annotations count by suffix: a cpu_op named `...closure` stays optimizer."""
    r = analyze(closure_trace(tmp_path, "aten::fake_closure", cat="cpu_op"))
    assert r.devices[0].idle_by_cause["optimizer"] == pytest.approx(2 * 30_000)


@pytest.mark.parametrize("name,comm", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", True),
    ("void rcclKernel<...>", True),
    ("void at::native::ncclKernel_AllGather", True),
    ("nvshmemi_transfer_kernel", True),
    ("void dpsk::ep::internode::dispatch<8, 16>(int*, float*)", True),
    ("void deep_ep::intranode::combine<float>(...)", True),
    ("cross_device_reduce_1stage<half, 8>", True),
    ("void vllm::custom_allreduce", True),
    ("all_to_all_kernel", True), ("AllGather_RING", True), ("reduce_scatter_kernel", True),
    ("volta_sgemm_128x64_nn", False), ("void at::native::reduce_kernel<512, 1>", False),
    ("Memcpy HtoD (Pageable -> Device)", False),
])
def test_communication_vocabulary(name, comm):
    assert is_comm_name(name) is comm


def test_comm_figures_count_a_deepep_kernel(tmp_path):
    b = Synth()
    b.step(1, T0, STEP)
    b.gpu(T0 + 1_000, 10_000, launch_ts=T0 + 500, name="void dpsk::ep::internode::dispatch<8>")
    b.gpu(T0 + 5_000, 20_000, launch_ts=T0 + 600, name="volta_sgemm", stream=8)
    r = analyze(load(b.save(tmp_path / "t.json")))
    d = r.devices[0]
    assert d.comm_us == pytest.approx(10_000)
    assert d.exposed_comm_us == pytest.approx(4_000)  # 1-5 ms, before the sgemm starts
