"""Small Kineto-shaped traces built event by event, for the advice rules' thresholds.

Every GPU scenario is `n` steps of `step_us` on the main thread (pid 1, tid 1); a GPU op is
written with its cudaLaunchKernel (same args.correlation) on the thread that launched it.
`cause_trace` leaves, in each step, one idle gap of `share` of the step that one cause covers,
then the kernel that ends the gap, launched at its end (so the gap is not `gpu_wait`).
"""

from __future__ import annotations

import json
from pathlib import Path

T0 = 1_000_000.0
MAIN_TID = 1
HELPER_TID = 2  # an autograd-engine thread
LAUNCH_US = 2.0


class Synth:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.corr = 1000

    def x(self, name: str, cat: str, ts: float, dur: float, pid=1, tid=MAIN_TID, **args):
        self.events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
                            "ts": ts, "dur": dur, "args": args})

    def step(self, n: int, ts: float, dur: float) -> None:
        self.x(f"ProfilerStep#{n}", "user_annotation", ts, dur)

    def gpu(self, ts: float, dur: float, launch_ts: float, name: str = "volta_sgemm",
            cat: str = "kernel", tid: int = MAIN_TID, stream: int = 7) -> None:
        """A GPU op on device 0 and its launch (ending at launch_ts + 2 µs)."""
        self.corr += 1
        self.x("cudaLaunchKernel", "cuda_runtime", launch_ts, LAUNCH_US, tid=tid,
               correlation=self.corr)
        self.x(name, cat, ts, dur, pid=0, tid=stream, device=0, stream=stream,
               correlation=self.corr)

    def memory(self, ts: float, nbytes: float, allocated: float, reserved: float) -> None:
        self.events.append({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": MAIN_TID,
                            "ts": ts, "args": {"Device Type": 1, "Device Id": 0,
                                               "Bytes": nbytes, "Total Allocated": allocated,
                                               "Total Reserved": reserved}})

    def save(self, path: Path) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events}), encoding="utf-8")
        return path


def steps(b: Synth, n: int, step_us: float):
    for k in range(n):
        t0 = T0 + k * step_us
        b.step(k + 1, t0, step_us)
        yield t0


def cause_trace(path: Path, cause: str, share: float, n: int = 10,
                step_us: float = 40_000.0) -> Path:
    """Per step: an idle gap of share * step_us at the step's start, covered by `cause`
    (but the last 2 µs, the launch of the kernel that ends it), then one kernel to the end."""
    b = Synth()
    g = share * step_us
    for t0 in steps(b, n, step_us):
        end = t0 + g - LAUNCH_US
        tid = MAIN_TID
        if cause == "data_loading":
            b.x("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "user_annotation",
                t0, end - t0)
        elif cause == "sync":
            b.x("cudaStreamSynchronize", "cuda_runtime", t0, end - t0)
        elif cause == "optimizer":
            b.x("Optimizer.step#SGD.step", "user_annotation", t0, end - t0)
        elif cause == "cpu_ops":
            b.x("aten::index", "cpu_op", t0, end - t0)
        elif cause == "backward":  # the autograd thread runs and launches; main waits
            tid = HELPER_TID
            b.x("autograd::engine::evaluate_function: MmBackward0", "cpu_op", t0, end - t0,
                tid=tid)
        elif cause == "python":
            b.x("## forward ##", "user_annotation", t0, end - t0)
            # the op around the launch: a trace with CPU operators (without any, Python time
            # is unknown)
            b.x("aten::mm", "cpu_op", end, LAUNCH_US)
        else:
            raise ValueError(cause)
        b.gpu(t0 + g, step_us - g, end, tid=tid)
    return b.save(path)


def gpu_wait_trace(path: Path, share: float, gap_us: float, n: int = 10,
                   step_us: float = 40_000.0) -> Path:
    """Per step: gaps of gap_us whose next kernel was launched long before (while the first
    kernel ran), adding up to share * step_us; no other idle."""
    b = Synth()
    m = round(share * step_us / gap_us)
    first = 1000.0 + 3 * m * LAUNCH_US
    for t0 in steps(b, n, step_us):
        b.gpu(t0, first, t0 - LAUNCH_US)
        t = t0 + first
        for i in range(m):
            b.gpu(t + gap_us, 20.0, t0 + 10 + 3 * i * LAUNCH_US)
            t += gap_us + 20.0
        b.gpu(t, t0 + step_us - t, t0 + 5)
    return b.save(path)


def comm_trace(path: Path, share: float, n: int = 10, step_us: float = 40_000.0) -> Path:
    """Per step: compute, an all-reduce overlapped with it (1 ms) and one alone at the end
    (share * step_us); the GPU never idles."""
    b = Synth()
    c = share * step_us
    for t0 in steps(b, n, step_us):
        b.gpu(t0, step_us - c, t0 - LAUNCH_US)
        b.gpu(t0 + 100, 1000.0, t0 + 10, name="ncclDevKernel_AllReduce_Sum_f32", stream=9)
        b.gpu(t0 + step_us - c, c, t0 + 20, name="ncclDevKernel_AllReduce_Sum_f32", stream=9)
    return b.save(path)


def pageable_trace(path: Path, share: float, n: int = 10, step_us: float = 40_000.0) -> Path:
    """Per step: one pageable host-to-device copy of share * step_us beside busy compute."""
    b = Synth()
    for t0 in steps(b, n, step_us):
        b.gpu(t0, step_us, t0 - LAUNCH_US)
        b.gpu(t0 + 50, share * step_us, t0 + 10, name="Memcpy HtoD (Pageable -> Device)",
              cat="gpu_memcpy", stream=8)
    return b.save(path)


def cpu_only_trace(path: Path, loader_us: float, n: int = 10, step_us: float = 10_000.0,
                   python_us: float = 0.0) -> Path:
    """No GPU: per step the DataLoader for loader_us, Python for python_us, CPU ops after."""
    b = Synth()
    for t0 in steps(b, n, step_us):
        b.x("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", "user_annotation",
            t0, loader_us)
        if python_us:
            b.x("## log metrics ##", "user_annotation", t0 + loader_us, python_us)
        start = t0 + loader_us + python_us
        b.x("aten::addmm", "cpu_op", start, t0 + step_us - start)
    return b.save(path)
