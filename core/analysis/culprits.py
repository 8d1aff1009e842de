"""The culprits of each cause: the events that cover most of its idle time on the device its
card speaks of (or the main thread's step time without a GPU), with the user's innermost Python
frame that called them where the trace has stacks.

Every cause's idle pieces are split at the candidate events' bounds, each piece is owned by the
innermost (or outermost) candidate covering it on its thread (core/analysis/nesting.py: levels
found once per candidate set, a searchsorted per level), and the owners are summed by name id
(bincount). No per-event Python objects.
"""

from __future__ import annotations

import numpy as np

from stallscope.core import causes
from stallscope.core import intervals as iv
from stallscope.core.analysis.nesting import (
    Frames,
    attribute,
    nest_of,
    per_track,
    pieces,
    touching,
)
from stallscope.core.analysis.threads import Roles
from stallscope.core.kineto import (
    BACKWARD_ANNOTATIONS,
    DATALOADER_PREFIXES,
    OPTIMIZER_PREFIX,
    PAGEABLE_H2D,
    RUNTIME_CATS,
    Cat,
    is_collective_name,
)
from stallscope.core.report import Culprit, DeviceStats
from stallscope.core.trace import Trace, unique
from stallscope.core.units import duration, plural

TOP = 3
TINY_KERNEL_US = 10.0    # a kernel this short costs less than its launch


# ----------------------------------------------------------------------------- summing up

def _kind(trace: Trace, event: int) -> str:
    name = trace.names[trace.name[event]]
    if is_collective_name(name):
        return "collective"
    cat = int(trace.cat[event])
    if cat in RUNTIME_CATS:
        return "runtime"
    if cat == Cat.CPU_OP:
        return "op"
    if cat == Cat.PYTHON_FUNCTION:
        return "frame"
    if cat in (Cat.KERNEL, Cat.GPU_MEMCPY, Cat.GPU_MEMSET, Cat.ACCELERATOR, Cat.RANGE):
        return "gpu_op"
    return "annotation"


def summarize(trace: Trace, a: np.ndarray, b: np.ndarray, owner: np.ndarray,
              frames: Frames | None, top: int = TOP) -> list[tuple[Culprit, np.ndarray]]:
    """The `top` owner names by covered time, each with the mask of its pieces."""
    ok = owner >= 0
    if not ok.any():
        return []
    nid = np.where(ok, trace.name[np.maximum(owner, 0)], -1)
    ids, inv = np.unique(nid[ok], return_inverse=True)
    covered = np.bincount(inv, weights=(b - a)[ok])
    events = unique(owner[ok])
    counts = np.bincount(np.searchsorted(ids, trace.name[events]), minlength=len(ids))
    frame_ids = frames.at(trace.track[np.maximum(owner, 0)], (a + b) / 2) \
        if frames else np.full(len(a), -1)
    out = []
    for k in np.argsort(-covered, kind="stable")[:top]:
        mask = nid == ids[k]
        first = int(owner[np.flatnonzero(mask)[0]])
        out.append((Culprit(name=trace.names[ids[k]], kind=_kind(trace, first),
                            count=int(counts[k]), covered_us=float(covered[k]),
                            frame=_best(trace, frame_ids[mask], (b - a)[mask])), mask))
    return out


def _best(trace: Trace, ids: np.ndarray, weights: np.ndarray) -> str:
    """The name that covers the most weight among ids >= 0, else ""."""
    ok = ids >= 0
    if not ok.any():
        return ""
    u, inv = np.unique(ids[ok], return_inverse=True)
    return trace.names[int(u[np.argmax(np.bincount(inv, weights=weights[ok]))])]


# ----------------------------------------------------------------------------- per cause

class Culprits:
    """Culprits of every cause of one analysis (the Roles and the main thread shared)."""

    def __init__(self, trace: Trace, r: Roles) -> None:
        self.trace, self.r = trace, r
        self.frames = Frames(trace)
        self.nests = self.frames.nests  # one cache of nesting levels for every lookup
        self.launched = np.flatnonzero(r.launch >= 0)  # GPU ops with a matched launch
        self.main = r.main if r.main is not None else -1
        self.on_main = trace.track == self.main
        self.cpu_op_only = trace.cat == Cat.CPU_OP

    def of(self, cause: str, spans: np.ndarray, stats: DeviceStats | None,
           device: int = -1) -> list[Culprit]:
        if len(spans) == 0:
            return []
        self.device = device
        fn = getattr(self, "_" + cause, None)
        return fn(spans, stats) if fn is not None else []

    def _simple(self, spans, groups, innermost=True, frames=True) -> list[tuple[Culprit,
                                                                             np.ndarray]]:
        groups = [touching(self.trace, g, spans) for g in groups]
        if not any(len(g) for g in groups):
            return []
        a, b = pieces(spans, np.concatenate(groups), self.trace)
        owner = attribute(self.trace, a, b, groups, innermost, self.nests)
        found = summarize(self.trace, a, b, owner, self.frames if frames else None)
        self._last = (a, b, owner)
        return found

    def _ops_on(self, track: int, mask: np.ndarray) -> np.ndarray:
        t = self.trace
        return np.flatnonzero(mask & (t.track == track) & (t.dur > 0))

    def _helpers(self, stats: DeviceStats | None) -> list[int]:
        return [t for t in (stats.launch_tracks if stats else []) if t != self.main]

    def _data_loading(self, spans, stats):
        t = self.trace
        loader = t.mask_names(lambda n: n.startswith(DATALOADER_PREFIXES))
        return [c for c, _ in self._simple(spans, per_track(t, loader & self.on_main,
                                                            [self.main]))]

    def _sync(self, spans, stats):
        t, r = self.trace, self.r
        found = self._simple(spans, per_track(t, r.sync, [self.main, *self._helpers(stats)]))
        if not found:
            return []
        _a, _b, owner = self._last
        for culprit, mask in found:
            calls = unique(owner[mask])
            issued = self._enclosing_op(calls)
            copies = self._gpu_ops_of(calls)
            parts = [f"issued by {issued}"] if issued else []
            if copies:
                parts.append(f"copies {copies}")
            culprit.detail = "; ".join(parts)
        return [c for c, _ in found]

    def _optimizer(self, spans, stats):
        t = self.trace
        steps = t.mask_names(lambda n: n.startswith(OPTIMIZER_PREFIX)) & self.on_main
        out = [c for c, _ in self._simple(spans, per_track(t, steps, [self.main]))]
        ops = self._simple(spans, per_track(t, self.cpu_op_only & self.on_main, [self.main]))
        return out + [c for c, _ in ops]

    def _cpu_ops(self, spans, stats):
        return self._ops(spans, [self.main])

    def _backward(self, spans, stats):
        out = self._ops(spans, self._helpers(stats))
        if not out:  # the main thread inside a backward annotation, no autograd thread seen
            t = self.trace
            marks = t.mask_names(lambda n: n in BACKWARD_ANNOTATIONS) & self.on_main
            out = [c for c, _ in self._simple(spans, per_track(t, marks, [self.main]))]
        return out

    def _ops(self, spans, tracks) -> list[Culprit]:
        """Outermost ops by covered idle, each with the innermost call under most of it and
        the kernels it launched."""
        t, r = self.trace, self.r
        groups = per_track(t, r.cpu_op, tracks)
        found = self._simple(spans, groups, innermost=False)
        if not found:
            return []
        a, b, outer = self._last
        inner = attribute(t, a, b, groups, innermost=True, nests=self.nests)
        for culprit, mask in found:
            parts = []
            deepest = _best(t, np.where(inner[mask] >= 0, t.name[np.maximum(inner[mask], 0)],
                                        -1), (b - a)[mask])
            if deepest and deepest != culprit.name:
                parts.append(f"mostly in {deepest}")
            if "Memcpy" in deepest:  # name the copies by what they moved (direction, memory)
                copies = self._gpu_ops_of(unique(outer[mask]))
                if copies:
                    parts.append(f"copies {copies}")
            launched = self._kernels_in(unique(outer[mask]))
            if len(launched):
                median = float(np.median(launched))
                tiny = "tiny " if median < TINY_KERNEL_US else ""
                op = f"{tiny}{t.device_kind} op"  # the accelerator's word: "MTIA op"
                parts.append(f"launches {plural(len(launched), op)}, median "
                             f"{duration(median)}")
            culprit.detail = "; ".join(parts)
        return [c for c, _ in found]

    def _python(self, spans, stats):
        t, r = self.trace, self.r
        others = [int(k) for k in unique(t.track[t.mask_names(is_collective_name)])
                  if k != self.main]
        coll = t.mask_names(is_collective_name) & ~r.gpu
        out = [c for c, _ in self._simple(spans, per_track(t, coll, others), frames=False)]
        marks = r.annotation & self.on_main
        out += [c for c, _ in self._simple(spans, per_track(t, marks, [self.main]))]
        if self.frames:  # the user's frames the Python time was spent in
            own = [f[t.track[f] == self.main] for f in self.frames.tiers]
            out += [c for c, _ in self._simple(spans, own, frames=False)]
        if not any(c.kind in ("frame", "annotation") for c in out):
            out += self._after_ops(spans)
        if not out:  # the main thread recorded nothing: what the other threads ran meanwhile
            tracks = [int(k) for k in unique(t.track[r.cpu_op]) if k != self.main]
            found = self._simple(spans, per_track(t, r.cpu_op, tracks), innermost=False)
            for culprit, _mask in found:
                culprit.detail = "on another thread meanwhile"
            out += [c for c, _ in found]
        return out

    def _after_ops(self, spans) -> list[Culprit]:
        """Without annotations or frames: the op the main thread ran just before each piece of
        Python (its outermost op that ended last before the piece began); the other threads'
        when the main thread records no op."""
        t = self.trace
        ops = np.flatnonzero(self.r.cpu_op & self.on_main & (t.dur > 0))
        if len(ops) == 0:
            ops = np.flatnonzero(self.r.cpu_op & (t.dur > 0))
        if len(ops) == 0:
            return []
        ops = ops[np.argsort(t.end[ops], kind="stable")]
        k = np.searchsorted(t.end[ops], spans[:, 0], side="right") - 1
        prev = np.where(k >= 0, ops[np.maximum(k, 0)], -1)
        outer = self._outermost(prev)
        found = summarize(t, spans[:, 0], spans[:, 1], outer, self.frames)
        for culprit, _mask in found:
            culprit.detail = "Python ran right after it"
        return [c for c, _ in found]

    def _outermost(self, events: np.ndarray) -> np.ndarray:
        """Each event's outermost enclosing op on its own thread (itself when none); -1 stays."""
        t = self.trace
        out = events.copy()
        ok = np.flatnonzero(events >= 0)
        for track in unique(t.track[events[ok]]):
            on = ok[t.track[events[ok]] == track]
            k = nest_of(t, self._ops_on(track, self.r.cpu_op), self.nests).at(
                t.start[events[on]], innermost=False)
            out[on[k >= 0]] = k[k >= 0]
        return out

    def gpu_ops(self, spans: np.ndarray, ops: np.ndarray) -> list[Culprit]:
        """The GPU ops (indexes `ops`, one device) covering the spans, each with the op that
        launched them and the user's frame there."""
        t = self.trace
        if len(spans) == 0 or len(ops) == 0:
            return []
        found = self._simple(spans, [ops[t.track[ops] == k] for k in unique(t.track[ops])],
                             frames=False)
        return self._launched_from(found, self._last[2])

    def _launched_from(self, found, owner: np.ndarray) -> list[Culprit]:
        """GPU-op culprits told where they were launched: the op around their launches and the
        user's frame there."""
        t = self.trace
        for culprit, mask in found:
            events = unique(owner[mask])
            launches = self.r.launch[events]
            launches = launches[launches >= 0]
            if len(launches) == 0:
                continue
            issued = self._enclosing_op(launches)
            if issued:
                culprit.detail = f"issued by {issued}"
            culprit.frame = _best(t, self.frames.at(t.track[launches], t.start[launches]),
                                  np.ones(len(launches))) if self.frames else ""
        return [c for c, _ in found]

    def _gpu_wait(self, spans, stats):
        """The op each gap's queued work started with (the gap's next op on the device)."""
        t, r = self.trace, self.r
        dev_ops = np.flatnonzero(r.gpu & (t.device == self.device))  # sorted by start
        if len(dev_ops) == 0:
            return []
        k = np.searchsorted(t.start[dev_ops], spans[:, 1], side="left")
        ok = k < len(dev_ops)
        owner = np.where(ok, dev_ops[np.minimum(k, len(dev_ops) - 1)], -1)
        return self._launched_from(summarize(t, spans[:, 0], spans[:, 1], owner, None), owner)

    # -- details

    def _enclosing(self, calls: np.ndarray) -> np.ndarray:
        """The outermost op (cat cpu_op) around each call on its thread, -1 where none."""
        t = self.trace
        out = np.full(len(calls), -1, dtype=np.int64)
        for track in unique(t.track[calls]):
            on = np.flatnonzero(t.track[calls] == track)
            k = nest_of(t, self._ops_on(track, self.cpu_op_only), self.nests).at(
                t.start[calls[on]], innermost=False)
            out[on[k >= 0]] = k[k >= 0]
        return out

    def _enclosing_op(self, calls: np.ndarray) -> str:
        """The outermost op around most of the calls, on their own threads."""
        t = self.trace
        ops = self._enclosing(calls)
        return _best(t, np.where(ops >= 0, t.name[np.maximum(ops, 0)], -1), t.dur[calls])

    def _gpu_ops_of(self, calls: np.ndarray) -> str:
        """The copies the calls' ops launched (a .cpu() launches its copy, then syncs), by
        name (direction and memory kind), the one taking the most time: a 493 ms HtoD copy
        names them, not 40 tiny DtoD ones; the calls' own when they are outside any op."""
        t = self.trace
        ops = self._enclosing(calls)
        around = np.concatenate([ops[ops >= 0], calls[ops < 0]])
        gpu = self.launched[t.cat[self.launched] == Cat.GPU_MEMCPY]
        if len(gpu) == 0 or len(around) == 0:
            return ""
        hit = gpu[self._launched_inside(gpu, around)]
        return _best(t, t.name[hit], t.dur[hit]) if len(hit) else ""

    def _kernels_in(self, ops: np.ndarray) -> np.ndarray:
        """Durations of the GPU ops launched from inside the events `ops` (one thread's)."""
        gpu = self.launched
        if len(gpu) == 0 or len(ops) == 0:
            return np.zeros(0)
        return self.trace.dur[gpu[self._launched_inside(gpu, ops)]]

    def _launched_inside(self, gpu: np.ndarray, events: np.ndarray) -> np.ndarray:
        """Per GPU op in `gpu`: whether its launch started inside one of `events` on the
        launch's own thread."""
        t = self.trace
        launch = self.r.launch[gpu]
        inside = np.zeros(len(gpu), dtype=bool)
        for track in unique(t.track[events]):
            mine = events[t.track[events] == track]
            spans = iv.union(iv.as_intervals(t.start[mine], t.end[mine]))
            inside |= (t.track[launch] == track) & iv.covers(spans, t.start[launch])
        return inside


def loader_batches(trace: Trace, r: Roles) -> int:
    """DataLoader batches the main thread fetched inside the window."""
    if r.main is None:
        return 0
    loader = trace.mask_names(lambda n: n.startswith(DATALOADER_PREFIXES))
    loader &= (trace.track == r.main) & (trace.start >= r.lo) & (trace.start < r.hi)
    return int(loader.sum())


def culprits_by_cause(trace: Trace, r: Roles, devices: dict[int, DeviceStats],
                      host_spans: np.ndarray, host_codes: np.ndarray, card_device,
                      comm: np.ndarray) -> dict[str, list[Culprit]]:
    """Per cause (uncovered aside): the culprits on the device its card speaks of
    (`card_device(cause)`), or in the main thread's step time without a GPU; and under
    "exposed_comm" the communication kernels left bare on the device exposing most."""
    finder = Culprits(trace, r)
    out = {}
    if devices:
        comm_dev, comm_stats = max(devices.items(),
                                   key=lambda kv: (kv[1].exposed_comm_us, kv[0]))
        found = finder.gpu_ops(comm_stats.exposed_comm,
                               np.flatnonzero(comm & (trace.device == comm_dev)))
        if found:
            out["exposed_comm"] = found
        copies = (trace.cat == Cat.GPU_MEMCPY) & r.gpu & trace.mask_names(
            lambda n: PAGEABLE_H2D in n)
        if copies.any():
            by_dev = np.bincount(np.maximum(trace.device[copies], 0), weights=trace.dur[copies])
            on = np.flatnonzero(copies & (trace.device == int(np.argmax(by_dev))))
            spans = iv.union(iv.clip(iv.as_intervals(trace.start[on], trace.end[on]),
                                     r.lo, r.hi))
            if found := finder.gpu_ops(spans, on):
                out["pageable_h2d"] = found
    for cause in causes.CAUSES:
        if cause == causes.REST:
            continue
        dev = card_device(cause)
        stats: DeviceStats | None = devices.get(dev) if dev is not None else None
        if stats is not None:
            spans = stats.spans_of(cause)
        elif devices:
            continue
        else:
            spans = host_spans[host_codes == causes.index(cause)]
        found = finder.of(cause, spans, stats, dev if dev is not None else -1)
        if found:
            out[cause] = found
    return out
