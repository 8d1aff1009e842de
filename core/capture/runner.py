"""Run an unmodified training script under torch.profiler and write a session folder.

    python -m stallscope.core.capture.runner [options] -- script.py [args]
    python /path/to/core/runner.py [options] -- script.py [args]

This file needs only the standard library and torch (line_profiler when line profiling), so the
app can launch it by file path in the user's own interpreter where stallscope is not installed.

Session folder (DESIGN.md):
    run.json            what was launched
    events.jsonl        one JSON object a line, flushed per line: started, step, trace_ready,
                        lineprof_ready, error, finished (ranks under torchrun: events.rank<N>.jsonl)
    stdout.log          the script's stdout and stderr, teed (ranks: stdout.rank<N>.log)
    traces/<script>[_rank<N>].<timestamp>.pt.trace.json.gz

Stepping needs no edit of the script: prof.step() runs after each optimizer step (the first
optimizer to step paces the steps, nested optimizer steps count once), or, while no optimizer has
stepped, once per DataLoader batch. Data-wait is the time spent in DataLoader iterators' __next__.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

EVENTS = "events.jsonl"
RUN_JSON = "run.json"
STDOUT_LOG = "stdout.log"
TRACES = "traces"
LINEPROF = "lineprof"
TRACE_SUFFIX = ".pt.trace.json.gz"
DEFAULT_SCHEDULE = {"wait": 1, "warmup": 1, "active": 4, "repeat": 1}
STOPPED_REASON = "stopped after profiling window"
NO_STEPS = ("no steps were seen: the script never finished an optimizer.step() nor fetched a "
            "torch DataLoader batch")
LINEPROF_MODULE = "stallscope_lineprof_capture"
EXIT_SETUP = 2  # the runner could not start the script (like python's own "can't open file")


class SetupError(Exception):
    """Something stops the runner before the script starts; one line for the user."""


class StopAfterWindow(SystemExit):
    """Raised from a step hook once the profiling window's trace is written."""

    def __init__(self) -> None:
        super().__init__(0)


class Stopped(SystemExit):
    """Raised in the main thread when SIGTERM arrives (the app's Stop button)."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


# ----------------------------------------------------------------------------- arguments


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stallscope-runner",
        usage="%(prog)s [options] -- script.py [args]",
        description="Run a training script under torch.profiler into a stallscope session folder.",
    )
    add_run_options(p)
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Options shared by the runner and `stallscope-cli run`."""
    p.add_argument("--session", metavar="DIR",
                   help="session folder (default ./stallscope-sessions/<script>-<timestamp>)")
    for key, value in DEFAULT_SCHEDULE.items():
        p.add_argument(f"--{key}", type=int, default=value, metavar="N",
                       help=f"profiler schedule: {key} steps (default {value})")
    p.add_argument("--profile-memory", action=argparse.BooleanOptionalAction, default=True,
                   help="record allocations (default on)")
    p.add_argument("--record-shapes", action=argparse.BooleanOptionalAction, default=False,
                   help="record operator input shapes (default off)")
    p.add_argument("--with-stack", action=argparse.BooleanOptionalAction, default=False,
                   help="record Python stacks (default off; large traces)")
    p.add_argument("--stop-after-window", action=argparse.BooleanOptionalAction, default=True,
                   help="end the script once the profiling window's trace is written (default on)")
    p.add_argument("--nproc-per-node", type=int, default=1, metavar="N",
                   help="launch N ranks through torch.distributed.run")
    p.add_argument("--lineprof", default="off", metavar="auto|module:Class.method|off",
                   help="line-profile Dataset.__getitem__ (default off)")
    p.add_argument("--lineprof-depth", type=int, default=0, metavar="N",
                   help="also line-profile functions N calls deep (default 0)")
    p.add_argument("--process-group", action="store_true",
                   help="start a new process group so the app can stop the whole tree")


def build_argv(session: str | os.PathLike, script: str, args: list[str],
               schedule: dict | None = None, options: dict | None = None) -> list[str]:
    """The runner's command line for a session (used by `stallscope-cli run` and the app)."""
    schedule = {**DEFAULT_SCHEDULE, **(schedule or {})}
    options = options or {}
    argv = ["--session", str(session)]
    for key in DEFAULT_SCHEDULE:
        argv += [f"--{key}", str(int(schedule[key]))]
    for key in ("profile_memory", "record_shapes", "with_stack", "stop_after_window"):
        if key in options:
            flag = key.replace("_", "-")
            argv.append(f"--{flag}" if options[key] else f"--no-{flag}")
    if int(options.get("nproc_per_node", 1)) > 1:
        argv += ["--nproc-per-node", str(int(options["nproc_per_node"]))]
    if options.get("lineprof", "off") not in ("off", "", None):
        argv += ["--lineprof", str(options["lineprof"]),
                 "--lineprof-depth", str(int(options.get("lineprof_depth", 0)))]
    if options.get("process_group"):
        argv.append("--process-group")
    return [*argv, "--", str(script), *args]


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """Options before `--`, the script and its arguments after (a `--` is optional)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    # Without `--`, the first bare word is the script and the rest belongs to it.
    takes_value = {"--session", "--wait", "--warmup", "--active", "--repeat", "--nproc-per-node",
                   "--lineprof", "--lineprof-depth"}
    i = 0
    while i < len(argv):
        if not argv[i].startswith("-"):
            return argv[:i], argv[i:]
        i += 2 if argv[i] in takes_value else 1
    return argv, []


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, rest = split_argv(argv)
    parser = build_parser()
    opts = parser.parse_args(own)
    if not rest:
        parser.error("no script given: use  [options] -- script.py [args]")
    opts.script, opts.script_args, opts.argv = rest[0], rest[1:], argv
    for key in DEFAULT_SCHEDULE:
        if getattr(opts, key) < 0:
            parser.error(f"--{key} must be >= 0")
    if opts.active < 1:
        parser.error("--active must be >= 1")
    if opts.nproc_per_node < 1:
        parser.error("--nproc-per-node must be >= 1")
    return opts


def default_session_dir(script: str, root: str | os.PathLike | None = None) -> Path:
    stem = Path(script).stem or "script"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) if root is not None else Path.cwd() / "stallscope-sessions"
    path = base / f"{stem}-{stamp}"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{stem}-{stamp}-{n}"
    return path


def rank_from_env() -> int | None:
    """This process's rank when it runs under torchrun with more than one rank."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        return int(os.environ["RANK"]) if world > 1 else None
    except (KeyError, ValueError):
        return None


def rank_part(rank: int | None, sep: str = ".") -> str:
    return "" if rank is None else f"{sep}rank{rank}"


def events_name(rank: int | None) -> str:
    return f"events{rank_part(rank)}.jsonl"


def stdout_name(rank: int | None) -> str:
    return f"stdout{rank_part(rank)}.log"


# ----------------------------------------------------------------------------- session files


class EventLog:
    """events.jsonl: one JSON object a line, flushed per line so a follower sees it at once."""

    def __init__(self, path: Path, rank: int | None) -> None:
        self.path = path
        self.rank = rank
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives for the run
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def emit(self, event: str, **fields) -> None:
        if os.getpid() != self._pid or self._file.closed:
            return  # a forked DataLoader worker inherited this object: only the runner writes
        record = {"event": event, "t": round(time.time(), 6)}
        if self.rank is not None:
            record["rank"] = self.rank
        record.update(fields)
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()

    def emit_dict(self, record: dict) -> None:
        record = dict(record)
        self.emit(str(record.pop("event", "message")), **record)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def prepare_session(path: Path) -> Path:
    path = path.expanduser().resolve()
    try:
        (path / TRACES).mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SetupError(f"session folder {path} is not writable: {reason}") from None
    return path


def write_run_json(session: Path, opts: argparse.Namespace, script: Path, torch_info: dict) -> None:
    info = {
        "version": 1,
        "script": str(script),
        "args": opts.script_args,
        "cwd": os.getcwd(),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "schedule": {k: getattr(opts, k) for k in DEFAULT_SCHEDULE},
        "options": {
            "profile_memory": opts.profile_memory, "record_shapes": opts.record_shapes,
            "with_stack": opts.with_stack, "stop_after_window": opts.stop_after_window,
            "nproc_per_node": opts.nproc_per_node, "lineprof": opts.lineprof,
            "lineprof_depth": opts.lineprof_depth,
        },
        "runner": str(Path(__file__).resolve()),
        "runner_argv": opts.argv,
        **torch_info,
    }
    tmp = session / f".{RUN_JSON}.part"
    tmp.write_text(json.dumps(info, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, session / RUN_JSON)


class FdTee:
    """Tees file descriptors 1 and 2 into a log while passing them through.

    At the fd level, so C extensions and DataLoader worker processes are captured as well."""

    def __init__(self, log_path: Path) -> None:
        self._log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []
        for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
            try:
                if stream is not None:
                    stream.flush()
                saved = os.dup(fd)
            except (OSError, ValueError):
                continue  # no such descriptor: nothing to tee
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            self._saved[fd] = saved
            thread = threading.Thread(target=self._pump, args=(read_end, saved),
                                      name=f"stallscope-tee-{fd}", daemon=True)
            thread.start()
            self._threads.append(thread)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except (AttributeError, ValueError):
                pass

    def _pump(self, read_end: int, out_fd: int) -> None:
        while True:
            try:
                data = os.read(read_end, 65536)
            except OSError:
                break
            if not data:
                break
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out_fd, view):]
            except OSError:
                pass  # the reader went away; keep logging
            with self._lock:
                self._log.write(data)
        os.close(read_end)

    def close(self, timeout: float = 2.0) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            # Child processes that outlive the script still hold the pipe: do not wait for them.
            thread.join(max(0.0, deadline - time.monotonic()))
        for saved in self._saved.values():
            os.close(saved)
        with self._lock:
            self._log.close()


def say(message: str) -> None:
    print(f"stallscope: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- torch


def import_torch():
    try:
        import torch
        import torch.profiler  # noqa: F401
    except ImportError as exc:
        raise SetupError(
            f"the interpreter {sys.executable} has no torch ({exc}); install torch into it or "
            "choose an interpreter that has it"
        ) from None
    return torch


def torch_info(torch) -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": bool(torch.cuda.is_available()), "devices": []}
    if info["cuda_available"]:
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


_STATM: list[int] = []  # an fd on this process's /proc/<pid>/statm, kept open: 2 µs a read


def read_rss() -> int | None:
    try:
        if not _STATM:
            _STATM[:] = [os.open(f"/proc/{os.getpid()}/statm", os.O_RDONLY),
                         os.sysconf("SC_PAGE_SIZE")]
        return int(os.pread(_STATM[0], 64, 0).split()[1]) * _STATM[1]
    except (OSError, ValueError, IndexError):
        try:
            import resource
            scale = 1 if sys.platform == "darwin" else 1024
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        except (ImportError, OSError):
            return None


class Stepper:
    """Turns optimizer steps (or DataLoader batches) into prof.step() calls and step events."""

    def __init__(self, torch, prof, schedule, log: EventLog, opts: argparse.Namespace) -> None:
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


def install_hooks(torch, stepper: Stepper, capture) -> list:
    """Patch DataLoader iteration and optimizer steps; returns undo callables."""
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
    return undo


class TraceWriter:
    """on_trace_ready: export, gzip under a temporary name, rename, then announce."""

    def __init__(self, session: Path, script: Path, rank: int | None, log: EventLog) -> None:
        self.dir = session / TRACES
        self.stem = f"{script.stem}{rank_part(rank, '_')}"
        self.log = log
        self.paths: list[str] = []
        self.finishing = False
        self.stepper: Stepper | None = None

    def __call__(self, prof) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{int(time.time() * 1000) % 1000:03d}"
        final = self.dir / f"{self.stem}.{stamp}{TRACE_SUFFIX}"
        raw = self.dir / f".{final.name}.json.part"
        packed = self.dir / f".{final.name}.part"
        t = time.perf_counter()
        try:
            prof.export_chrome_trace(str(raw))
            import gzip
            with open(raw, "rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(packed, final)
        except Exception as exc:  # noqa: BLE001 - a failed export must not kill the user's run
            self.log.emit("error", message=f"could not write trace {final}: "
                          f"{type(exc).__name__}: {exc}")
            say(f"could not write trace {final}: {exc}")
            return
        finally:
            for part in (raw, packed):
                try:
                    part.unlink()
                except OSError:
                    pass
        rel = f"{TRACES}/{final.name}"
        self.paths.append(rel)
        steps = self.stepper.steps if self.stepper else None
        self.log.emit("trace_ready", path=rel, bytes=final.stat().st_size,
                      complete=not self.finishing, steps_seen=steps,
                      write_s=round(time.perf_counter() - t, 3))
        say(f"trace written: {final}" + ("" if not self.finishing else
                                           " (the script ended inside the profiling window)"))


# ----------------------------------------------------------------------------- line profiler


def start_lineprof(opts: argparse.Namespace, session: Path, log: EventLog):
    """Load lineprof_capture.py from this file's folder by path (stallscope need not be
    installed) and start it; it reports a missing line_profiler itself, with the install line."""
    if opts.lineprof == "off":
        return None

    def emit(record: dict) -> None:
        log.emit_dict(record)
        if record.get("event") in ("warning", "error") and record.get("message"):
            say(str(record["message"]))

    path = Path(__file__).resolve().with_name("lineprof_capture.py")
    if not path.exists():
        emit({"event": "warning", "source": "lineprof",
              "message": f"line profiling is not available: {path} is missing"})
        return None
    try:
        module = sys.modules.get(LINEPROF_MODULE)
        if module is None:
            spec = importlib.util.spec_from_file_location(LINEPROF_MODULE, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[LINEPROF_MODULE] = module
            spec.loader.exec_module(module)
        return module.start(opts.lineprof, opts.lineprof_depth, str(session / LINEPROF), emit)
    except Exception as exc:  # noqa: BLE001 - a bad target must not stop the run
        emit({"event": "warning", "source": "lineprof",
              "message": f"line profiling could not start for {opts.lineprof!r}: "
                         f"{type(exc).__name__}: {exc}"})
        return None


def finish_lineprof(capture, log: EventLog) -> None:
    if capture is None:
        return
    try:
        path = capture.finish()
    except Exception as exc:  # noqa: BLE001
        log.emit("error", message=f"line profiling failed: {type(exc).__name__}: {exc}")
        return
    if path:
        p = Path(path).resolve()
        session = log.path.parent.resolve()
        log.emit("lineprof_ready", path=str(p.relative_to(session) if p.is_relative_to(session)
                                            else p))


# ----------------------------------------------------------------------------- running


def script_traceback(exc: BaseException) -> str:
    """The traceback as the user would see it from `python script.py`: runner frames dropped."""
    tb = exc.__traceback__
    here = {str(Path(__file__).resolve()), runpy.__file__}
    while tb is not None and (tb.tb_frame.f_code.co_filename in here
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def check_script(script: Path) -> None:
    if not script.exists():
        raise SetupError(f"script not found: {script}")
    if script.is_dir() and not (script / "__main__.py").exists():
        raise SetupError(f"{script} is a folder without __main__.py")


def compile_check(script: Path) -> SyntaxError | None:
    if script.is_dir():
        return None
    try:
        compile(script.read_bytes(), str(script), "exec")
    except SyntaxError as exc:
        return exc
    return None


def run_script(opts: argparse.Namespace, session: Path, log: EventLog, script: Path,
               rank: int | None) -> dict:
    """Run the script under the profiler; returns the `finished` record's fields."""
    torch = import_torch()
    from torch.profiler import ProfilerActivity, profile, schedule

    syntax = compile_check(script)
    if syntax is not None:
        text = "".join(traceback.format_exception_only(type(syntax), syntax))
        print(text, end="", file=sys.stderr)
        return {"rc": 1, "reason": "syntax error",
                "exception": {"type": "SyntaxError", "message": str(syntax), "traceback": text}}

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    sched = schedule(wait=opts.wait, warmup=opts.warmup, active=opts.active, repeat=opts.repeat)
    writer = TraceWriter(session, script, rank, log)
    prof = profile(activities=activities, schedule=sched, on_trace_ready=writer,
                   profile_memory=opts.profile_memory, record_shapes=opts.record_shapes,
                   with_stack=opts.with_stack)
    stepper = Stepper(torch, prof, sched, log, opts)
    writer.stepper = stepper
    capture = start_lineprof(opts, session, log)
    undo = install_hooks(torch, stepper, capture)

    # `python script.py` semantics: argv, sys.path[0] = the script's folder.
    sys.argv = [opts.script, *opts.script_args]
    script_dir = str(script if script.is_dir() else script.parent)
    sys.path[0:1] = [script_dir]
    result: dict = {}
    error: BaseException | None = None
    t0 = time.perf_counter()
    try:
        with prof:
            try:
                runpy.run_path(str(script), run_name="__main__")
            finally:
                writer.finishing = True
        result = {"rc": 0, "reason": "completed"}
    except StopAfterWindow:
        result = {"rc": 0, "reason": STOPPED_REASON}
    except Stopped as exc:
        name = signal.Signals(exc.signum).name
        result = {"rc": exc.code, "reason": f"stopped by {name}", "signal": name}
        end_children()
    except SystemExit as exc:
        rc = exit_code(exc)
        result = {"rc": rc, "reason": "completed" if rc == 0 else f"exited with code {rc}"}
    except KeyboardInterrupt:
        result = {"rc": 130, "reason": "interrupted"}
    except BaseException as exc:  # noqa: BLE001 - the user's exception is the result
        error = exc
        text = script_traceback(exc)
        print(text, end="", file=sys.stderr, flush=True)
        result = {"rc": 1, "reason": "exception", "exception": {
            "type": type(exc).__name__, "message": str(exc), "traceback": text,
            "step": stepper.steps}}
    finally:
        for fn in reversed(undo):
            fn()
    del error
    if _has_children():
        gc.collect()  # drop the script's iterators so DataLoader workers shut down now
    finish_lineprof(capture, log)
    result.update(steps=stepper.steps, batches=stepper.batches, stepping=stepper.mode,
                  traces=writer.paths, script_s=round(time.perf_counter() - t0, 3))
    if stepper.steps == 0:
        result["warning"] = NO_STEPS
        say(NO_STEPS + ("" if writer.paths else
                        "; the profiling window never opened, so no trace was recorded "
                        "(use --wait 0 --warmup 0 to record the whole script)"))
    elif result["reason"] == STOPPED_REASON:
        say(f"{STOPPED_REASON} ({stepper.steps} steps); session: {session}")
    return result


def _has_children() -> bool:
    mp = sys.modules.get("multiprocessing")
    return bool(mp and mp.active_children())


def end_children(timeout: float = 2.0) -> None:
    """On Stop: end DataLoader workers now. Interrupted mid-fetch, their iterator would
    otherwise wait out torch's 5 s join timeout per worker."""
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + timeout
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))


def install_stop_handler() -> None:
    main_pid = os.getpid()

    def on_term(signum, frame):
        if os.getpid() != main_pid:  # a forked worker inherited this handler: just die
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        signal.signal(signum, signal.SIG_DFL)  # a second SIGTERM ends the runner at once
        raise Stopped(signum)

    try:
        signal.signal(signal.SIGTERM, on_term)
    except (ValueError, OSError):
        pass


def run_single(opts: argparse.Namespace) -> int:
    rank = rank_from_env()
    session = prepare_session(Path(opts.session) if opts.session else
                              default_session_dir(opts.script))
    log = EventLog(session / events_name(rank), rank)
    tee = FdTee(session / stdout_name(rank))
    t0 = time.time()
    result: dict
    try:
        script = Path(opts.script).expanduser().resolve()
        try:
            check_script(script)
            info = torch_info(import_torch())
            if rank is None or (rank == 0 and not (session / RUN_JSON).exists()):
                write_run_json(session, opts, script, info)
            log.emit("started", script=str(script), args=opts.script_args, cwd=os.getcwd(),
                     pid=os.getpid(), python=sys.executable, session=str(session),
                     schedule={k: getattr(opts, k) for k in DEFAULT_SCHEDULE}, **info)
            install_stop_handler()
            result = run_script(opts, session, log, script, rank)
        except SetupError as exc:
            say(f"error: {exc}")
            result = {"rc": EXIT_SETUP, "reason": str(exc), "error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a runner bug still ends with `finished`
            traceback.print_exc()
            result = {"rc": 1, "reason": f"stallscope runner error: {type(exc).__name__}: {exc}",
                      "error": traceback.format_exc()}
    finally:
        tee.close()
    result["wall_s"] = round(time.time() - t0, 3)
    log.emit("finished", **result)
    log.close()
    return int(result["rc"])


def run_distributed(opts: argparse.Namespace) -> int:
    """Launch `torch.distributed.run` with this file; every rank writes its own events/trace."""
    session = prepare_session(Path(opts.session) if opts.session else
                              default_session_dir(opts.script))
    log = EventLog(session / EVENTS, None)
    tee = FdTee(session / STDOUT_LOG)
    t0 = time.time()
    proc = None
    try:
        script = Path(opts.script).expanduser().resolve()
        try:
            check_script(script)
            info = torch_info(import_torch())
            write_run_json(session, opts, script, info)
            own, _ = split_argv(opts.argv)
            rank_args = [a for a in drop_option(drop_option(own, "--nproc-per-node"), "--session")
                         if a != "--process-group"]
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                   "--nproc-per-node", str(opts.nproc_per_node), str(Path(__file__).resolve()),
                   *rank_args, "--session", str(session), "--", str(script), *opts.script_args]
            log.emit("started", script=str(script), args=opts.script_args, cwd=os.getcwd(),
                     pid=os.getpid(), python=sys.executable, session=str(session),
                     nproc_per_node=opts.nproc_per_node, command=cmd,
                     schedule={k: getattr(opts, k) for k in DEFAULT_SCHEDULE}, **info)
            proc = subprocess.Popen(cmd)

            def forward(signum, frame):
                proc.send_signal(signum)

            signal.signal(signal.SIGTERM, forward)
            rc = proc.wait()
            ranks = rank_results(session)
            reasons = {r.get("reason") for r in ranks.values()}
            reason = reasons.pop() if len(reasons) == 1 else "ranks ended differently"
            if rc < 0:
                reason = f"killed by {signal.Signals(-rc).name}"
            result = {"rc": rc, "reason": reason or "completed", "ranks": ranks,
                      "traces": sorted(f"{TRACES}/{p.name}"
                                       for p in (session / TRACES).glob(f"*{TRACE_SUFFIX}"))}
        except SetupError as exc:
            say(f"error: {exc}")
            result = {"rc": EXIT_SETUP, "reason": str(exc), "error": str(exc)}
    finally:
        tee.close()
    result["wall_s"] = round(time.time() - t0, 3)
    log.emit("finished", **result)
    log.close()
    return int(result["rc"]) if result["rc"] >= 0 else 128 - int(result["rc"])


def drop_option(args: list[str], name: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out


def rank_results(session: Path) -> dict:
    ranks = {}
    for path in sorted(session.glob("events.rank*.jsonl")):
        last = None
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == "finished":
                last = record
        rank = path.name.split(".")[1].removeprefix("rank")
        ranks[rank] = ({"rc": last.get("rc"), "reason": last.get("reason"),
                        "steps": last.get("steps")} if last
                       else {"rc": None, "reason": "ended without a finished record"})
    return ranks


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.process_group and hasattr(os, "setpgrp"):
        try:
            os.setpgrp()
        except OSError:
            pass
    try:
        if opts.nproc_per_node > 1 and rank_from_env() is None:
            return run_distributed(opts)
        return run_single(opts)
    except SetupError as exc:  # the session folder itself failed: nowhere to write `finished`
        say(f"error: {exc}")
        return EXIT_SETUP


if __name__ == "__main__":
    sys.exit(main())
