"""Steps without editing the script: hooks on optimizer steps and DataLoader iteration.

prof.step() runs after each optimizer step (the first optimizer to step paces the steps, nested
optimizer steps count once), or, while no optimizer has stepped, once per DataLoader batch.
Data-wait is the time spent in DataLoader iterators' __next__. Every backward() call runs inside
a `stallscope#backward` record_function (DESIGN.md: the `backward` idle cause).
"""

from __future__ import annotations

import argparse
import os
import time

from .environment import read_rss
from .exits import StopAfterWindow

BACKWARD_ANNOTATION = "stallscope#backward"


class Stepper:
    """Turns optimizer steps (or DataLoader batches) into prof.step() calls and step events."""

    def __init__(self, torch, prof, schedule, log, opts: argparse.Namespace) -> None:
        self.torch, self.prof, self.schedule, self.log = torch, prof, schedule, log
        self.stop_after_window = opts.stop_after_window and opts.repeat > 0
        cycle = opts.wait + opts.warmup + opts.active
        self.window_end = cycle * opts.repeat if opts.repeat > 0 else None
        self.cuda = bool(torch.cuda.is_available())
        self.pid = os.getpid()
        self.steps = 0
        self.batches = 0
        self.mode: str | None = None  # "optimizer" or "batch"
        self.pacer = None
        self.depth = 0
        self.batches_in_step = 0
        self.data_wait = 0.0
        self.t0 = time.perf_counter()
        self.step_start: float | None = None
        self.window_done = False

    # -- hooks
    def batch_starting(self) -> None:
        if self.mode != "optimizer" and self.batches_in_step > 0:
            self.mode = "batch"
            self.step()
        if self.step_start is None:
            self.step_start = time.perf_counter()

    def batch_fetched(self, seconds: float, got_batch: bool) -> None:
        self.data_wait += seconds
        if got_batch:
            self.batches += 1
            self.batches_in_step += 1

    def optimizer_stepped(self, optimizer) -> None:
        if self.pacer is None:
            self.pacer = optimizer
            self.mode = "optimizer"
        elif optimizer is not self.pacer:
            return
        self.step()

    # -- one step
    def phase(self, n: int) -> str:
        action = self.schedule(n).name
        if action.startswith("RECORD"):
            return "active"
        if action == "WARMUP":
            return "warmup"
        return "done" if self.window_end is not None and n >= self.window_end else "wait"

    def step(self) -> None:
        now = time.perf_counter()
        start = self.step_start if self.step_start is not None else self.t0
        fields = {
            "n": self.steps, "wall_ms": round((now - start) * 1e3, 3),
            "data_wait_ms": round(self.data_wait * 1e3, 3), "batches": self.batches_in_step,
            "by": self.mode, "phase": self.phase(self.steps), "rss": read_rss(),
        }
        if self.cuda and self.torch.cuda.is_initialized():
            fields["cuda_allocated"] = self.torch.cuda.memory_allocated()
            fields["cuda_reserved"] = self.torch.cuda.memory_reserved()
        self.log.emit("step", **fields)
        self.prof.step()  # may write the trace (on_trace_ready) when a window closes
        self.steps += 1
        self.data_wait = 0.0
        self.batches_in_step = 0
        self.step_start = time.perf_counter()
        if self.window_end is not None and self.steps >= self.window_end:
            self.window_done = True
            if self.stop_after_window:
                raise StopAfterWindow()


def install_hooks(torch, stepper: Stepper, capture, loaders=None) -> list:
    """Patch DataLoader iteration, optimizer steps and backward(); returns undo callables.
    `loaders` (overrides.DataLoaderLog) counts batches per DataLoader call site."""
    from torch.optim import Optimizer
    from torch.utils.data import DataLoader, dataloader

    undo = []
    base_iter = dataloader._BaseDataLoaderIter
    original_next = base_iter.__next__

    def timed_next(self):
        if os.getpid() != stepper.pid:
            return original_next(self)
        stepper.batch_starting()
        t = time.perf_counter()
        got = False
        try:
            batch = original_next(self)
            got = True
            return batch
        finally:
            stepper.batch_fetched(time.perf_counter() - t, got)
            if got and loaders is not None:
                loaders.count(self)

    base_iter.__next__ = timed_next
    undo.append(lambda: setattr(base_iter, "__next__", original_next))

    if capture is not None and hasattr(capture, "on_dataloader"):
        original_iter = DataLoader.__iter__

        def iter_with_capture(self):
            if os.getpid() == stepper.pid:
                capture.on_dataloader(self)
            return original_iter(self)

        DataLoader.__iter__ = iter_with_capture
        undo.append(lambda: setattr(DataLoader, "__iter__", original_iter))

    # Preferred: step after Optimizer.step has returned, outside its record_function, so the
    # `Optimizer.step#` annotation nests inside its ProfilerStep. Fallback: the global post hook.
    original_hook_step = Optimizer.__dict__.get("profile_hook_step")
    if isinstance(original_hook_step, staticmethod):
        hook_step = original_hook_step.__func__

        def profile_hook_step(func):
            hooked = hook_step(func)

            def wrapper(*args, **kwargs):
                stepper.depth += 1
                try:
                    out = hooked(*args, **kwargs)
                finally:
                    stepper.depth -= 1
                if stepper.depth == 0 and os.getpid() == stepper.pid:
                    stepper.optimizer_stepped(args[0])
                return out

            wrapper.__wrapped__ = func
            wrapper.__doc__ = getattr(func, "__doc__", None)
            wrapper.stallscope = True
            return wrapper

        Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        undo.append(lambda: setattr(Optimizer, "profile_hook_step", original_hook_step))

    def post_hook(optimizer, args, kwargs):
        step_fn = getattr(type(optimizer), "step", None)
        if getattr(step_fn, "stallscope", False) or stepper.depth > 1:
            return  # the wrapper above steps (or this is an optimizer nested in another)
        if os.getpid() == stepper.pid:
            stepper.optimizer_stepped(optimizer)

    from torch.optim.optimizer import register_optimizer_step_post_hook
    handle = register_optimizer_step_post_hook(post_hook)
    undo.append(handle.remove)
    undo.append(annotate_backward(torch))
    return undo


def annotate_backward(torch):
    """Wrap torch.autograd.backward (Tensor.backward calls it) in a record_function; returns
    the undo callable."""
    import torch.autograd as autograd

    original = autograd.backward
    record_function = torch.autograd.profiler.record_function

    def backward(*args, **kwargs):
        with record_function(BACKWARD_ANNOTATION):
            return original(*args, **kwargs)

    backward.__wrapped__ = original
    backward.__doc__ = original.__doc__
    autograd.backward = backward
    return lambda: setattr(autograd, "backward", original)


