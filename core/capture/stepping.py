"""Steps without editing the script: hooks on optimizers and DataLoader iteration
(docs/definitions.md, "Steps").
Long because the step rule and the hooks that feed it (DataLoader iteration, optimizers,
backward) run in the user's process on every step and are read, timed and changed together.

Once the script has constructed an optimizer (any torch.optim.Optimizer, whoever wraps it), a
step ends at each optimizer step that ran: the first optimizer to step paces the steps, steps
nested in another (a wrapper's step calling its inner optimizer's, GradScaler.step calling
optimizer.step) count once, and GradScaler.step counts even when it skipped the update. The
batches fetched before that (gradient accumulation's micro-batches, a batch fetched ahead) belong
to the step. Only a script that never constructs an optimizer is stepped once per batch.

A batch is counted where the training loop receives it: a DataLoader wrapped by an object whose
generator `__iter__` fetches ahead (accelerate's DataLoaderShard fetches one batch ahead) is
counted at the wrapper's yield, so the look-ahead fetch is no extra batch of its own. Data-wait is
the time spent in DataLoader iterators' __next__ as the loop calling it sees it: the runner's
one hook around it (timed_next, which also feeds record.bin) is timed whole. Every backward()
call runs inside a `stallscope#backward` record_function and every closure passed to
Optimizer.step(closure) (Lightning's automatic optimization, LBFGS) inside `stallscope#closure`
(docs/definitions.md: the `backward` idle cause and the optimizer's).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import runpy
import sys
import time
from pathlib import Path

from . import pid
from .distributed import adopt_rank, launched_rank, rank_options, relaunch_children
from .environment import read_rss
from .exits import StopAfterWindow
from .spawned import hook_spawn

BACKWARD_ANNOTATION = "stallscope#backward"
# Memory (RSS; CUDA allocated and reserved) is read at a step's end when the last reading is this
# old: a step shorter than that keeps the reading before it. One CUDA reading (memory_stats) costs
# tens of µs, an RSS reading a system call: a tight loop must not pay them every step.
MEMORY_EVERY_S = 0.005
CLOSURE_ANNOTATION = "stallscope#closure"
_MARK = "_stallscope_step_hook"


class Stepper:
    """Turns optimizer steps (or DataLoader batches) into prof.step() calls and step events."""

    def __init__(self, torch, prof, schedule, log, opts: argparse.Namespace) -> None:
        self.torch, self.prof, self.schedule, self.log = torch, prof, schedule, log
        self.opts = opts
        self.stop_after_window = opts.stop_after_window and opts.repeat > 0
        cycle = opts.wait + opts.warmup + opts.active
        self.window_end = cycle * opts.repeat if opts.repeat > 0 else None
        self.cuda = bool(torch.cuda.is_available())
        self.pid = pid.current
        self.steps = 0
        self.batches = 0
        self.mode: str | None = None  # "optimizer" (one has been constructed) or "batch"
        self.pacer = None
        self.depth = 0     # optimizer steps in progress (wrappers, GradScaler, nested)
        self.fetching = 0  # batch fetches in progress (a wrapper's yield around its loader's)
        self.batches_in_step = 0
        self.ahead = 0     # batches fetched ahead (inside an __iter__), not yet handed over
        self.data_wait = 0.0
        self.profiled = False  # a step has been recorded: unprofiled steps now lie between windows
        self.t0 = time.perf_counter()
        self.step_start: float | None = None
        self.window_done = False
        # the profiler records the step under way (warmup or active): annotations pay off
        self.next_phase: str | None = None  # phase(steps), once asked
        self.recording = self.phase(0) in ("warmup", "active")
        self.launched_ranks = 0  # processes started by torch.multiprocessing spawn, as ranks
        self.memory: dict = {}  # the latest memory reading (rss, cuda_allocated, cuda_reserved)
        self.memory_due = 0.0   # perf_counter time from which a step reads memory again

    def mine(self) -> bool:
        return pid.current == self.pid  # a forked DataLoader worker inherits the hooks

    def check_rank(self) -> None:
        """Once the script has launched its own ranks (Lightning's DDP launcher sets
        WORLD_SIZE and LOCAL_RANK here too), this process's files take its rank's names."""
        if self.log.rank is None:
            rank = launched_rank()
            if rank is not None:
                adopt_rank(self.log, self.prof.on_trace_ready, rank)

    # -- hooks
    def optimizer_built(self) -> None:
        self.mode = "optimizer"
        self.check_rank()

    def batch_starting(self, start: float | None = None) -> bool:
        """A batch is asked for (at `start`, perf_counter); False when an outer fetch (a
        wrapper) already counts it. Stepping per batch, this ends the step before."""
        self.fetching += 1
        if self.fetching > 1:
            return False
        if self.mode != "optimizer" and self.batches_in_step > 0:
            self.mode = "batch"
            self.step()
        if self.step_start is None:
            self.step_start = time.perf_counter() if start is None else start
        return True

    def batch_fetched(self, outer: bool, got_batch: bool, ahead: bool = False) -> None:
        self.fetching -= 1
        if not outer:
            return
        if got_batch and ahead:
            self.ahead += 1
        elif got_batch:
            self.batches += 1
            self.batches_in_step += 1
        elif self.ahead:  # the loader is done: the batches held ahead are handed over now
            self.batches += self.ahead
            self.batches_in_step += self.ahead
            self.ahead = 0

    def optimizer_stepped(self, optimizer) -> None:
        if self.pacer is None:
            self.pacer = optimizer
            self.mode = "optimizer"
        elif optimizer is not self.pacer:
            return
        self.step()

    # -- one step
    def read_memory(self) -> dict:
        """This process's RSS and, once the script has used CUDA, the caching allocator's
        allocated and reserved bytes (one memory_stats call for both)."""
        out = {"rss": read_rss()}
        cuda = self.torch.cuda
        if self.cuda and cuda.is_initialized():
            nested = getattr(cuda, "memory_stats_as_nested_dict", None)
            if nested is None:  # an older torch: two readings
                out["cuda_allocated"] = cuda.memory_allocated()
                out["cuda_reserved"] = cuda.memory_reserved()
                return out
            stats = nested()
            try:
                out["cuda_allocated"] = stats["allocated_bytes"]["all"]["current"]
                out["cuda_reserved"] = stats["reserved_bytes"]["all"]["current"]
            except (KeyError, TypeError):  # an allocator that keeps no such figures
                pass
        return out

    def phase(self, n: int) -> str:
        """active, warmup, wait (before the first window), between (windows) or done."""
        if self.window_end is not None and n >= self.window_end:
            return "done"  # past the last window (torch's schedule: no action after `repeat`)
        action = self.schedule(n).name
        if action.startswith("RECORD"):
            return "active"
        if action == "WARMUP":
            return "warmup"
        return "between" if self.profiled else "wait"

    def step(self) -> None:
        if self.steps == 0:
            self.check_rank()
            # torch's and the script's ~300k long-lived objects out of the collector's scans:
            # each full scan cost ~50-80 us a step (run.py unfreezes at the end of the script)
            gc.freeze()
        now = time.perf_counter()
        start = self.step_start if self.step_start is not None else self.t0
        phase = self.next_phase if self.next_phase is not None else self.phase(self.steps)
        if now >= self.memory_due:
            self.memory_due = now + MEMORY_EVERY_S
            self.memory = self.read_memory()
        fields = {
            # unrounded: record.bin sums them over a million steps (a line rounds to 1 µs)
            "n": self.steps, "wall_ms": (now - start) * 1e3,
            "data_wait_ms": self.data_wait * 1e3, "batches": self.batches_in_step,
            "by": self.mode, "phase": phase, **self.memory,
        }
        self.profiled = self.profiled or phase == "active"
        self.log.step(fields)  # record.bin, and a line in events.jsonl now and then
        if phase != "done":  # past the last window the profiler has nothing to do
            self.prof.step()  # may write the trace (on_trace_ready) when a window closes
        self.steps += 1
        # asked once a step (the schedule's answer for a step never changes: Windows)
        self.next_phase = self.phase(self.steps)
        self.recording = self.next_phase in ("warmup", "active")
        self.data_wait = 0.0
        self.batches_in_step = 0
        self.step_start = time.perf_counter()
        if self.window_end is not None and self.steps >= self.window_end:
            self.window_done = True
            if self.stop_after_window:
                raise StopAfterWindow()


def install_hooks(torch, stepper: Stepper, capture, loaders=None) -> list:
    """Patch DataLoader iteration, optimizers, GradScaler and backward(); returns undo callables.
    `loaders` (overrides.DataLoaderLog) counts batches per DataLoader call site."""
    undo = hook_dataloaders(stepper, capture, loaders)
    undo += hook_optimizers(torch, stepper)
    undo.append(annotate_backward(torch, stepper))
    opts = stepper.opts
    script = Path(opts.script).expanduser().resolve()
    session = stepper.log.path.parent
    undo.append(relaunch_children(opts, session, script,
                                  Path(__file__).resolve().with_name("runner.py")))
    import torch.multiprocessing  # noqa: F401 - its spawn module, to hook

    undo.append(hook_spawn(torch, stepper,
                           [*rank_options(opts, session), "--", str(script), *opts.script_args]))
    return undo


# ---------------------------------------------------------------------------- DataLoaders

def hook_dataloaders(stepper: Stepper, capture, loaders) -> list:
    from torch.utils.data import DataLoader, dataloader

    undo = []
    base_iter = dataloader._BaseDataLoaderIter
    original_next = base_iter.__next__
    record = getattr(stepper.log, "record", None)  # capture/record.RunRecord, fed from here
    clock = time.perf_counter
    call = call_cost(base_iter)

    def timed_next(self):
        # data wait: this whole call as the loop calling next() sees it, the hooks' own work
        # included (its entry and return, outside any clock in here: `call`), less a step
        # this fetch ended (stepping per batch)
        entered = clock()
        start = entered - call
        if not stepper.mine():
            return original_next(self)
        outer = stepper.batch_starting(start)
        if stepper.step_start is not None and stepper.step_start > entered:
            # the step before ended here (not before the call, however soon before: the
            # call's cost is this fetch's): its cost is not waiting
            start = stepper.step_start
        ahead = outer and fetching_ahead(sys._getframe(1))
        got = False
        try:
            batch = original_next(self)
            got = True
            return batch
        finally:
            end = clock()
            stepper.batch_fetched(outer, got, ahead)
            if got and loaders is not None:
                loaders.count(self)
            if record is not None:
                record.fetched(self, start, end, got)
            stepper.data_wait += clock() - start

    timed_next.feeds_record = record  # type: ignore[attr-defined]  # install_record_hooks
    base_iter.__next__ = timed_next
    undo.append(lambda: setattr(base_iter, "__next__", original_next))

    original_init = DataLoader.__init__
    wrapped: dict[type, object] = {}  # class -> its own __iter__, put back at the end

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if stepper.mine():
            for cls in iterating_wrappers(self, sys._getframe(1)):
                wrapped[cls] = count_at_yield(cls, stepper)

    def restore() -> None:
        DataLoader.__init__ = original_init
        for cls, original in wrapped.items():
            cls.__iter__ = original  # type: ignore[attr-defined]  # a DataLoader wrapper

    init.__wrapped__ = original_init  # type: ignore[attr-defined]  # the undo mark
    DataLoader.__init__ = init
    undo.append(restore)

    if capture is not None and hasattr(capture, "on_dataloader"):
        original_iter = DataLoader.__iter__

        def iter_with_capture(self):
            if stepper.mine():
                capture.on_dataloader(self)
            return original_iter(self)

        DataLoader.__iter__ = iter_with_capture
        undo.append(lambda: setattr(DataLoader, "__iter__", original_iter))
    return undo


def call_cost(base_iter, tries: int = 7, calls: int = 300) -> float:
    """Seconds a loop's `next(it)` on a DataLoader iterator spends outside the clock of its
    `__next__` timed as timed_next times itself: the call's entry and return (a fraction of a
    µs; the loop's own clock around next() counts them). Measured through torch's own iterator
    over a trivial dataset (`base_iter`'s __next__ wrapped for the while; the loader built by
    DataLoader's own __init__, beneath any hook of ours: no site recorded, no override): a
    bare Python iterator's entry and return read ~140 ns where a DataLoader iterator's read
    ~350 ns, which left a loop of ~10 µs fetches 3.3% short of its own clock. The least of a
    few tries' means (a try the machine interrupted reads long); 0 when torch's iterator
    cannot be built (an old or unusual torch): data wait then reads a little low."""
    from torch.utils.data import DataLoader

    clock = time.perf_counter
    original = base_iter.__next__
    inner = [0.0]

    def probe(self):
        start = clock()
        try:
            return original(self)
        finally:
            inner[0] += clock() - start

    best = float("inf")
    base_iter.__next__ = probe
    try:
        init = DataLoader.__init__
        while hasattr(init, "__wrapped__"):  # the undo mark of our hooks on it
            init = init.__wrapped__
        loader = DataLoader.__new__(DataLoader)
        init(loader, range(tries * calls), batch_size=None)  # type: ignore[arg-type]  # a sequence
        it = iter(loader)
        for _ in range(tries):
            inner[0] = outer = 0.0
            for _ in range(calls):
                a = clock()
                next(it)
                outer += clock() - a
            best = min(best, (outer - inner[0]) / calls)
    except Exception:  # noqa: BLE001 - a calibration: never the script's failure
        return 0.0
    finally:
        base_iter.__next__ = original
    return max(0.0, best)


CO_GENERATOR = inspect.CO_GENERATOR
AHEAD_DEPTH = 24  # frames looked at above a fetch
# the frame running the script (runpy.run_path's): the runner's own frames lie above it
SCRIPT_TOP = getattr(getattr(runpy, "_run_code", None), "__code__", None)


def fetching_ahead(frame) -> bool:
    """A batch fetched while an `__iter__` (not a generator) runs is fetched ahead: nobody has
    asked for a batch yet (Lightning's prefetching fetcher, for a loader without a length,
    fetches one in its __iter__). It is handed over when its loader runs out."""
    for _ in range(AHEAD_DEPTH):
        if frame is None:
            return False
        code = frame.f_code
        if code is SCRIPT_TOP:
            return False
        if code.co_name == "__iter__" and not code.co_flags & CO_GENERATOR:
            return True
        frame = frame.f_back
    return False


def iterating_wrappers(loader, frame) -> list[type]:
    """The classes whose generator `__iter__` will iterate this new DataLoader: its own class
    (a subclass overriding `__iter__`) and the objects whose `__init__` built it (accelerate's
    DataLoaderShard builds its base DataLoader in its __init__). Each is patched once."""
    found = [type(loader)]
    while frame is not None and frame.f_code.co_name == "__init__":
        owner = frame.f_locals.get("self")
        if owner is not None and owner is not loader:
            found.append(type(owner))  # type(): the real class, whatever __class__ claims
        frame = frame.f_back
    out: list[type] = []
    for cls in found:
        defining = next((c for c in cls.__mro__ if "__iter__" in c.__dict__), None)
        fn = defining.__dict__["__iter__"] if defining is not None else None
        if (defining is not None and inspect.isgeneratorfunction(fn)
                and not getattr(fn, _MARK, False) and defining not in out):
            out.append(defining)
    return out


def count_at_yield(cls: type, stepper: Stepper):
    """Count the batches of cls's generator `__iter__` where it yields them; its own fetches
    from the DataLoader inside (one of them ahead) then add data-wait only. Returns the
    original `__iter__`."""
    original = cls.__dict__["__iter__"]

    def counted(self, *args, **kwargs):
        inner = original(self, *args, **kwargs)
        if not stepper.mine():
            yield from inner
            return
        try:
            while True:
                outer = stepper.batch_starting()
                got = False
                try:
                    batch = next(inner)
                    got = True
                except StopIteration:
                    return
                finally:
                    stepper.batch_fetched(outer, got)
                yield batch
        finally:
            inner.close()

    counted.__wrapped__ = original  # type: ignore[attr-defined]  # the undo mark
    counted.__doc__ = original.__doc__
    setattr(counted, _MARK, True)
    cls.__iter__ = counted  # type: ignore[attr-defined]  # a DataLoader wrapper class
    return original


# ----------------------------------------------------------------------------- optimizers

def hook_optimizers(torch, stepper: Stepper) -> list:
    from torch.optim import Optimizer
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    undo = []
    original_init = Optimizer.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if stepper.mine():
            stepper.optimizer_built()

    init.__wrapped__ = original_init  # type: ignore[attr-defined]  # the undo mark
    Optimizer.__init__ = init
    undo.append(lambda: setattr(Optimizer, "__init__", original_init))

    # Preferred: step after Optimizer.step has returned, outside its record_function, so the
    # `Optimizer.step#` annotation nests inside its ProfilerStep. Fallback: the global post hook.
    original_hook_step = Optimizer.__dict__.get("profile_hook_step")
    if isinstance(original_hook_step, staticmethod):
        hook_step = original_hook_step.__func__

        def profile_hook_step(func):
            wrapper = counted_step(hook_step(func), stepper)
            wrapper.__wrapped__ = func
            wrapper.__doc__ = getattr(func, "__doc__", None)
            return wrapper

        Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        undo.append(lambda: setattr(Optimizer, "profile_hook_step", original_hook_step))

    def post_hook(optimizer, args, kwargs):
        step_fn = getattr(type(optimizer), "step", None)
        if getattr(step_fn, _MARK, False) or stepper.depth > 1:
            return  # counted_step steps (or this is an optimizer nested in another)
        if stepper.mine() and stepper.depth == 0:
            stepper.optimizer_stepped(optimizer)

    undo.append(register_optimizer_step_post_hook(post_hook).remove)
    record_function = torch.autograd.profiler.record_function
    undo.append(register_optimizer_step_pre_hook(
        lambda optimizer, args, kwargs: annotate_closure(record_function, args, kwargs)).remove)

    scaler_cls = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler_cls is not None and "step" in scaler_cls.__dict__:
        original_scaler_step = scaler_cls.__dict__["step"]
        scaler_cls.step = counted_step(original_scaler_step, stepper, optimizer_arg=1)
        undo.append(lambda: setattr(scaler_cls, "step", original_scaler_step))
    return undo


def counted_step(step, stepper: Stepper, optimizer_arg: int = 0):
    """An optimizer's (or GradScaler's) step that ends the runner's step once it has returned,
    unless it ran inside another counted step."""

    def wrapper(*args, **kwargs):
        stepper.depth += 1
        try:
            out = step(*args, **kwargs)
        finally:
            stepper.depth -= 1
        if stepper.depth == 0 and stepper.mine() and len(args) > optimizer_arg:
            stepper.optimizer_stepped(args[optimizer_arg])
        return out

    setattr(wrapper, _MARK, True)
    return wrapper


def annotate_closure(record_function, args: tuple, kwargs: dict):
    """Optimizer step pre-hook: the closure passed to step() (positional after self, or
    `closure=`) runs inside a CLOSURE_ANNOTATION record_function. None: nothing to wrap."""
    positional = len(args) > 1
    closure = args[1] if positional else kwargs.get("closure")
    if not callable(closure) or getattr(closure, _MARK, False):
        return None

    def annotated(*a, **k):
        with record_function(CLOSURE_ANNOTATION):
            return closure(*a, **k)

    setattr(annotated, _MARK, True)
    if positional:
        return (args[0], annotated, *args[2:]), kwargs
    return args, {**kwargs, "closure": annotated}


def annotate_backward(torch, stepper: Stepper | None = None):
    """Wrap torch.autograd.backward (Tensor.backward calls it) in a record_function while the
    profiler records (a record_function costs ~10 µs even when nothing listens: a tight loop's
    unprofiled steps go without); returns the undo callable."""
    import torch.autograd as autograd

    original = autograd.backward
    record_function = torch.autograd.profiler.record_function

    def backward(*args, **kwargs):
        if stepper is not None and not stepper.recording:
            return original(*args, **kwargs)
        with record_function(BACKWARD_ANNOTATION):
            return original(*args, **kwargs)

    backward.__wrapped__ = original  # type: ignore[attr-defined]  # the undo mark
    backward.__doc__ = original.__doc__
    autograd.backward = backward
    return lambda: setattr(autograd, "backward", original)
