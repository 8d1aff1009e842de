"""What kind of window a trace is: steady training, or start-up, a graph capture, a window
that starts inside work queued before it, one step, a last step cut by the profiler's stop.

A window that is not steady training says so before any cause card, and its ceilings are not
quoted: start-up (one runtime call, the first op of a kind, or compilation taking a large share
of the window: context creation, lazy loading, cuDNN/MIOpen autotuning, torch.compile),
CUDA/HIP graph capture (*StreamBeginCapture ... *GraphInstantiate*), a single step. For a trace
inside a session the runner's record (core/session/trace_steps.py) says which steps are whole: a
ProfilerStep with a step event is, whatever its length; the last one without is cut.
"""

from __future__ import annotations

import re

import numpy as np

from stallscope.core import intervals as iv
from stallscope.core.analysis.threads import Roles, union_of
from stallscope.core.kineto import (
    BLOCKING_RE,
    CAPTURE_BEGIN,
    CAPTURE_END,
    COMPILE_FRAME_RE,
    FRAME_RE,
    OPTIMIZER_PREFIX,
    RUNTIME_CATS,
    Cat,
    frame_tier,
)
from stallscope.core.report import Culprit, WindowFinding
from stallscope.core.session.trace_steps import RunnerWindow
from stallscope.core.trace import Trace, in_codes, unique
from stallscope.core.units import duration, pct, plural

STARTUP_SHARE = 0.20   # one call / the first op of a kind / compilation: this share of W
FIRST_RATIO = 5.0      # the first op of a kind is this many times its later ones' median
CAPTURE_SHARE = 0.10   # graph capture spans this share of W
QUEUED_START = 0.01    # a blocking call beginning in the first 1% of W ...
QUEUED_SHARE = 0.50    # ... and covering half of it waits on work queued before the window
TAIL_RATIO = 0.5       # a last step under half the shortest other step ...
TAIL_EDGE = 0.01       # ... ending within 1% of W of the profiler's stop was cut by it
STEP_NUMBER = re.compile(r"#(\d+)$")

FIXES = {
    "startup": ("Profile steady steps, not start-up: skip the first steps, e.g. "
                "`stallscope-cli run --wait 3 -- {script}` (torch.profiler.schedule(wait=3, "
                "warmup=1, active=4)). The cause cards and ceilings are withheld for this "
                "window."),
    "graph_capture": ("Profile after the graphs are captured: skip the capture steps, e.g. "
                      "`stallscope-cli run --wait 5 -- {script}` (torch.profiler.schedule("
                      "wait=5, warmup=1, active=4)); steady steps replay the graph. The cause "
                      "cards and ceilings are withheld for this window."),
    "queued_before": ("Start recording once the loop runs, not in the middle of queued work: "
                      "`stallscope-cli run --wait 3 -- {script}` (torch.profiler.schedule("
                      "wait=3, warmup=1, active=4)), or synchronize before the profiler "
                      "starts. The cause cards and ceilings are withheld for this window."),
    "one_step": ("Profile several steps: `stallscope-cli run --wait 1 --active 4 -- {script}` "
                 "(the runner's default; torch.profiler.schedule(wait=1, warmup=1, active=4)); "
                 "one step cannot tell a one-off cost from a steady one. The cause cards and "
                 "ceilings are withheld for this window."),
    "tail_cut": ("Stop the profiler after a whole step: let the schedule end the window "
                 "(`stallscope-cli run --active 4 -- {script}`, torch.profiler.schedule("
                 "wait=1, warmup=1, active=4)) rather than stopping it mid-step. The cause "
                 "cards and ceilings are withheld for this window."),
    # a session's trace: the runner's record says the script ended inside the window
    "script_end": ("Let the window close before the script ends: {schedule} The cause cards "
                   "and ceilings are withheld for this window."),
    "no_steps": ("No schedule records more of it: the runner ends a step at each "
                 "optimizer.step() (at each DataLoader batch in a script without an "
                 "optimizer), and {what}. Several steps need a loop that does one of those. "
                 "The cause cards and ceilings are withheld for this window: start-up and "
                 "one-off costs cannot be told from steady ones."),
}


def window_finding(trace: Trace, r: Roles, script: str = "",
                   runner: RunnerWindow | None = None) -> WindowFinding | None:
    """The window's kind when it is not steady training, decided before any cause card;
    `runner`: what the runner recorded of this trace's window (a session's trace)."""
    width = r.hi - r.lo
    if width <= 0:
        return None
    # a script of no step or one: no schedule records more (start-up is part of it)
    found = _few_steps(trace, r, width, runner) if runner is not None else None
    for detect in (_graph_capture, _queued_before, _startup):
        if found is not None:
            break
        found = detect(trace, r, width)
    found = found or _tail_cut(trace, r, width, runner) or _one_step(trace, r, width)
    if found is not None:
        found.fix = found.fix.replace("{script}", script or "your_script.py")
    return found


def _graph_capture(trace: Trace, r: Roles, width: float) -> WindowFinding | None:
    runtime = in_codes(trace.cat, RUNTIME_CATS)
    begins = np.flatnonzero(runtime & trace.mask_names(lambda n: CAPTURE_BEGIN in n))
    if len(begins) == 0:
        return None
    ends = np.flatnonzero(runtime & trace.mask_names(lambda n: any(e in n for e in CAPTURE_END)))
    spans = []
    for track in unique(trace.track[begins]):  # a few threads
        b = begins[trace.track[begins] == track]
        e = ends[trace.track[ends] == track]
        stop = trace.end[b]
        if len(e):  # to the last end before the next begin (EndCapture, then Instantiate)
            k = np.searchsorted(trace.start[e], trace.start[b], side="left")
            nxt = np.append(trace.start[b][1:], np.inf)
            last = np.searchsorted(trace.start[e], nxt, side="left") - 1
            stop = np.where(last >= k, trace.end[e[np.maximum(last, 0)]], stop)
        spans.append(iv.as_intervals(trace.start[b], stop))
    capture = iv.union(iv.clip(np.concatenate(spans), r.lo, r.hi))
    us = iv.length(capture)
    if us < CAPTURE_SHARE * width:
        return None
    begin = trace.names[trace.name[begins[0]]]
    end = trace.names[trace.name[ends[-1]]] if len(ends) else "its end"
    return WindowFinding(
        "graph_capture", "This window records a graph capture, not steady training",
        f"{plural(len(begins), 'graph capture')} ({begin} ... {end}) span {duration(us)}, "
        f"{pct(us / width)} of the {duration(width)} window: a graph is recorded once, while "
        "the GPU idles; steady steps replay it.", FIXES["graph_capture"],
        [Culprit(begin, "runtime", len(begins), us)])


def _startup(trace: Trace, r: Roles, width: float) -> WindowFinding | None:
    call = _long_call(trace, r, width)
    found = [f for f in (call, _first_op(trace, r, width, call[2] if call else None),
                         _compile(trace, r, width)) if f is not None]
    if not found:
        return None
    # a single call names it best, then the op, then compiling; a second finding adds a sentence
    sentence = " ".join(f[1] if k == 0 else "Also: " + f[1][0].lower() + f[1][1:]
                        for k, f in enumerate(found[:2]))
    steps = trace.step_indices()
    first = trace.names[trace.name[steps[0]]] if len(steps) else ""
    m = STEP_NUMBER.search(first)
    if m and int(m.group(1)) == 0:
        sentence += (f" The trace starts at {first}, the script's first step (the runner's "
                     "default schedule skips it).")
    return WindowFinding("startup", "This window is start-up, not steady training",
                         sentence, FIXES["startup"], [f[0] for f in found])


def _long_call(trace: Trace, r: Roles, width: float):
    """The longest runtime/driver call that does not block by design, if it takes a large
    share of the window (context creation, lazy loading, a first cudaMalloc)."""
    runtime = in_codes(trace.cat, RUNTIME_CATS)
    hits = np.flatnonzero(runtime & (_clipped(trace, r) >= STARTUP_SHARE * width))
    idx = [int(i) for i in hits if not BLOCKING_RE.search(trace.names[trace.name[i]])]
    if not idx:
        return None
    i = max(idx, key=lambda k: trace.dur[k])
    name = trace.names[trace.name[i]]
    us = float(_clipped(trace, r)[i])
    inside = _outermost_op(trace, i)
    where = f", inside {inside}" if inside else ""
    return (Culprit(name, "runtime", 1, us, detail=inside and f"inside {inside}"),
            f"One {name} call takes {duration(us)}, {pct(us / width)} of the "
            f"{duration(width)} window{where}: first use of the GPU (context creation, lazy "
            f"module loading, first allocations), paid once per process.", int(i))


def _first_op(trace: Trace, r: Roles, width: float, call: int | None = None):
    """The first op of a kind taking a large share of the window while its later ones are
    far shorter (cuDNN/MIOpen autotuning, first-use kernels, allocations); not one around the
    long runtime call already named (`call`)."""
    clipped = _clipped(trace, r)
    ops = np.flatnonzero((trace.cat == Cat.CPU_OP) & (clipped >= STARTUP_SHARE * width))
    best = None
    blocking = in_codes(trace.cat, RUNTIME_CATS) & trace.mask_names(
        lambda n: BLOCKING_RE.search(n) is not None)
    for i in ops[np.argsort(-clipped[ops])][:32]:  # a few nested levels at most
        same = np.flatnonzero((trace.name == trace.name[i]) & (trace.cat == Cat.CPU_OP))
        later = same[trace.start[same] > trace.start[i]]
        if same[0] != i or len(later) == 0 or _blocked(trace, blocking, i) > 0.5:
            continue  # not the first of its kind, or waiting on the GPU (a sync, not warm-up)
        if call is not None and trace.track[i] == trace.track[call] \
                and trace.start[i] <= trace.start[call] and trace.end[i] >= trace.end[call]:
            continue
        typical = float(np.median(trace.dur[later]))
        if trace.dur[i] >= FIRST_RATIO * max(typical, 1e-3):
            best = (i, typical, len(later))
            break
    if best is None:
        return None
    i, typical, n_later = best
    name = trace.names[trace.name[i]]
    us = float(clipped[i])
    return (Culprit(name, "op", 1, us, detail=f"later ones: {duration(typical)} median"),
            f"The first {name} takes {duration(us)}, {pct(us / width)} of the "
            f"{duration(width)} window; the {plural(n_later, 'later one')} take "
            f"{duration(typical)} (median): first-use warm-up (cuDNN/MIOpen autotuning, "
            "kernel loading, allocations).", int(i))


def _compile(trace: Trace, r: Roles, width: float):
    frames = (trace.cat == Cat.PYTHON_FUNCTION) & trace.mask_names(
        lambda n: COMPILE_FRAME_RE.search(n) is not None)
    us = iv.length(union_of(trace, frames, r.lo, r.hi))
    if us < STARTUP_SHARE * width:
        return None
    return (Culprit("torch.compile", "frame", int(frames.sum()), us),
            f"Compilation (torch._dynamo / inductor / triton frames) takes {duration(us)}, "
            f"{pct(us / width)} of the {duration(width)} window: compiled once, then reused.",
            None)


def _one_step(trace: Trace, r: Roles, width: float) -> WindowFinding | None:
    n = len(r.steps)
    if n == 1:
        what = trace.names[trace.name[r.steps[0]]]
    elif n == 0:
        opt = trace.mask_names(lambda s: s.startswith(OPTIMIZER_PREFIX + "step"))
        opt &= (trace.start >= r.lo) & (trace.start < r.hi)
        if int(opt.sum()) != 1:
            return None
        what = "one Optimizer.step"
    else:
        return None
    return WindowFinding("one_step", "This window is a single step",
                         f"The {duration(width)} window holds one step ({what}): a one-off "
                         "cost (start-up, compilation, a first allocation) cannot be told "
                         "from a steady one.", FIXES["one_step"])


def _queued_before(trace: Trace, r: Roles, width: float) -> WindowFinding | None:
    """A blocking call that begins in the first 1% of the window and covers most of it: it
    waits for work queued before the profiler started, so the window shows that wait."""
    blocking = in_codes(trace.cat, RUNTIME_CATS) & trace.mask_names(
        lambda n: BLOCKING_RE.search(n) is not None)
    clipped = _clipped(trace, r)
    hits = np.flatnonzero(blocking & (trace.start <= r.lo + QUEUED_START * width)
                          & (clipped >= QUEUED_SHARE * width))
    if len(hits) == 0:
        return None
    i = int(hits[np.argmax(clipped[hits])])
    if _waits_on_the_window(trace, r, i):
        return None  # a sync on work this window launched: a stall, its own card says so
    name = trace.names[trace.name[i]]
    us = float(clipped[i])
    inside = _outermost_op(trace, i)
    where = f" (inside {inside})" if inside else ""
    return WindowFinding(
        "queued_before", "This window starts inside work queued before it",
        f"A {duration(float(trace.dur[i]))} {name}{where} begins "
        f"{duration(max(float(trace.start[i]) - r.lo, 0.0))} into the {duration(width)} window "
        f"and covers {pct(us / width)} of it: it waits for work queued before the profiler "
        "started, so the idle it shows belongs to steps that were not recorded.",
        FIXES["queued_before"], [Culprit(name, "runtime", 1, us,
                                         detail=inside and f"inside {inside}")])


def _waits_on_the_window(trace: Trace, r: Roles, i: int) -> bool:
    """Whether device work launched inside the window runs through most of the call i (then
    the call waits on this window's own work, not on work queued before it)."""
    lo, hi = float(trace.start[i]), float(trace.end[i])
    ops = np.flatnonzero(r.gpu & (trace.start < hi) & (trace.end > lo) & (r.launch >= 0))
    ops = ops[trace.start[r.launch[ops]] >= r.lo]
    busy = iv.union(iv.clip(iv.as_intervals(trace.start[ops], trace.end[ops]), lo, hi))
    return iv.length(busy) >= QUEUED_SHARE * (hi - lo)


def _few_steps(trace: Trace, r: Roles, width: float,
               runner: RunnerWindow) -> WindowFinding | None:
    """The window's one step, when the runner says the script has no more than it: no step
    at all (ProfilerStep#0 is the profiler's own span over the script, recorded whole under
    `--wait 0 --warmup 0`) or a single one. A schedule of several steps cannot be the fix."""
    if len(r.steps) != 1:
        return None
    name = trace.names[trace.name[r.steps[0]]]
    k = _number(name)
    if k is None:
        return None
    if not runner.ended and runner.steps_seen == 0:
        return WindowFinding(
            "one_step", "This window is the whole script: the runner saw no steps",
            f"The runner ended no step in this script (no optimizer.step(), no DataLoader "
            f"batch), so the profiler recorded all of it: {name} is the profiler's own span "
            f"over the {duration(width)} window, not a step.",
            FIXES["no_steps"].replace("{what}", "this script does neither"))
    if runner.whole(k) and runner.run_steps is not None and runner.run_steps <= 1:
        return WindowFinding(
            "one_step", "This window is a single step: the script has one",
            f"The {duration(width)} window holds the script's one step ({name}): a one-off "
            "cost (start-up, compilation, a first allocation) cannot be told from a steady "
            "one.", FIXES["no_steps"].replace("{what}", "this script ended one step"))
    return None


def _number(name: str) -> int | None:
    m = STEP_NUMBER.search(name)
    return int(m.group(1)) if m else None


def _tail_cut(trace: Trace, r: Roles, width: float,
              runner: RunnerWindow | None = None) -> WindowFinding | None:
    """The last step was cut: in a session's trace, it has no step event (the runner never
    ended it: the script ended inside the window) while an earlier one has; in a bare trace,
    it ends at the profiler's stop and is far shorter than the others."""
    if runner is not None:
        return _cut_by_the_script(trace, r, width, runner)
    spans = np.flatnonzero(trace.cat == Cat.PROFILER)
    if len(r.steps) < 3 or len(spans) == 0:
        return None
    last = r.steps[np.argmax(trace.end[r.steps])]
    stop = float(trace.end[spans].max())
    # against the shortest other step, not the median: a whole step on a busy machine is often
    # half the median (the others were delayed), rarely half the fastest
    shortest = float(np.min(trace.dur[r.steps[r.steps != last]]))
    if stop - trace.end[last] > TAIL_EDGE * width or trace.dur[last] >= TAIL_RATIO * shortest:
        return None
    name = trace.names[trace.name[last]]
    us = float(trace.dur[last])
    return WindowFinding(
        "tail_cut", "This window's last step was cut by the profiler's stop",
        f"{name} ends where the profiler stopped, after {duration(us)} while the other steps "
        f"take at least {duration(shortest)}: the step was cut short, so its share of the "
        f"{duration(width)} window ({pct(us / width)}) is not a whole step.",
        FIXES["tail_cut"], [Culprit(name, "annotation", 1, us)])


def _cut_by_the_script(trace: Trace, r: Roles, width: float,
                       runner: RunnerWindow) -> WindowFinding | None:
    """The runner's record decides: the last ProfilerStep without a step event, after one
    with, is what ran from the runner's last step to the script's end."""
    if len(r.steps) < 2:
        return None
    last = r.steps[np.argmax(trace.end[r.steps])]
    name = trace.names[trace.name[last]]
    k = _number(name)
    if k is None or runner.whole(k):
        return None
    numbers = [_number(trace.names[trace.name[i]]) for i in r.steps if i != last]
    whole = sorted(n for n in numbers if n is not None and runner.whole(n))
    if not whole:
        return None
    us = float(trace.dur[last])
    m = len(whole)
    if m >= 2:
        schedule = (f"a window of the {m} steps it holds whole, `stallscope-cli run "
                    f"{_window_options(whole[0], m)} -- {{script}}`, ends with the schedule "
                    "after a whole step.")
    else:
        schedule = ("the script ended one step into this window, too few after its start for "
                    "several whole ones: start it earlier (a smaller --wait).")
    return WindowFinding(
        "tail_cut", "This window's last step was cut by the script's end",
        f"The runner ended {plural(m, 'step')} of this window ({_steps_text(whole)}) and no "
        f"{name}: the script ended {duration(us)} into it, inside the window, so its share of "
        f"the {duration(width)} window ({pct(us / width)}) is not a whole step.",
        FIXES["script_end"].replace("{schedule}", schedule),
        [Culprit(name, "annotation", 1, us)])


def _window_options(first: int, active: int) -> str:
    """The runner's options for a window of `active` steps from step `first`."""
    if first == 0:
        return f"--wait 0 --warmup 0 --active {active}"
    return f"--wait {first - 1} --active {active}"


def _steps_text(numbers: list[int]) -> str:
    if len(numbers) > 1 and numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"steps {numbers[0]}-{numbers[-1]}"
    return "step" + ("s " if len(numbers) > 1 else " ") + ", ".join(map(str, numbers))


def _blocked(trace: Trace, blocking: np.ndarray, i: int) -> float:
    """The share of event i that blocking calls on its thread cover."""
    inside = blocking & (trace.track == trace.track[i]) & (trace.start >= trace.start[i]) \
        & (trace.start < trace.end[i])
    spans = iv.union(iv.clip(iv.as_intervals(trace.start[inside], trace.end[inside]),
                             trace.start[i], trace.end[i]))
    return iv.length(spans) / trace.dur[i] if trace.dur[i] > 0 else 0.0


def _clipped(trace: Trace, r: Roles) -> np.ndarray:
    return np.clip(trace.end, r.lo, r.hi) - np.clip(trace.start, r.lo, r.hi)


def _outermost_op(trace: Trace, i: int) -> str:
    """The outermost op on the call's thread around it, "" when none."""
    on = np.flatnonzero((trace.cat == Cat.CPU_OP) & (trace.track == trace.track[i])
                        & (trace.start <= trace.start[i]) & (trace.end >= trace.end[i]))
    if len(on) == 0:
        return ""
    return trace.names[trace.name[on[np.argmax(trace.dur[on])]]]


def entry_script(trace: Trace) -> str:
    """The script the trace's Python frames run as `<module>` ("train.py"), "" when none."""
    frames = trace.cat == Cat.PYTHON_FUNCTION
    if not frames.any():
        return ""
    ids = unique(trace.name[frames])
    scripts = [m.group("file") for i in ids
               if (m := FRAME_RE.match(trace.names[i])) and m.group("func") == "<module>"
               and frame_tier(trace.names[i]) == 2 and m.group("file").endswith(".py")]
    return min(scripts, key=len) if scripts else ""
