"""One run: the session folder, the script under torch.profiler, the `finished` record."""

from __future__ import annotations

import argparse
import gc
import os
import runpy
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import layout
from .contain import become_subreaper
from .environment import import_torch, torch_info
from .exits import (
    EXIT_SETUP,
    NO_STEPS,
    STOPPED_REASON,
    SetupError,
    StopAfterWindow,
    Stopped,
    exit_code,
    say,
)
from .lineprof_glue import finish_lineprof, start_lineprof
from .options import DEFAULT_SCHEDULE, default_session_dir, parse_args, rank_from_env
from .overrides import DataLoaderLog
from .processes import (
    Killed,
    die_of,
    disarm_timers,
    end_children,
    end_leftovers,
    ending_caught,
    exit_watchdog,
    has_children,
    install_stop_handler,
    new_process_group,
    script_over,
)
from .record import RunRecord, install_record_hooks
from .script import check_script, compile_check, script_traceback
from .stepping import Stepper, install_hooks
from .tee import FdTee, runner_stderr
from .trace_writer import TraceWriter
from .windows import Windows
from .writer import EventLog, prepare_session, run_info, update_run_json, write_run_json

RUNNER = Path(__file__).resolve().with_name("runner.py")  # what torchrun launches per rank


def loader_emitter(log: EventLog) -> Callable[..., None]:
    """The DataLoader record's events, and one line on stderr for each loader overridden."""

    def emit(kind: str, **fields: Any) -> None:
        log.emit(kind, **fields)
        if kind == layout.DATALOADER and fields.get("overridden"):
            changes = ", ".join(f"{k} {v['from']!r} -> {v['to']!r}"
                                for k, v in fields["overridden"].items())
            say(f"{fields.get('site')}: DataLoader {changes}")
        elif kind == layout.WARNING:
            say(str(fields.get("message", "")))

    return emit


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
    record = RunRecord(session / layout.record_name(rank), log.emit)
    log.record = record
    step_opts = opts
    sched: Callable
    if opts.windows:  # repeated windows: the run goes on to its end, never stops after one
        sched = Windows(opts, record)
        step_opts = argparse.Namespace(**{**vars(opts), "repeat": 0})
    else:
        with warnings.catch_warnings():  # --warmup 0 is asked for: torch's warning about it
            warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
            sched = schedule(wait=opts.wait, warmup=opts.warmup, active=opts.active,
                             repeat=opts.repeat)
    writer = TraceWriter(session, script, rank, log)
    writer.schedule = sched
    prof = profile(activities=activities, schedule=sched, on_trace_ready=writer,
                   profile_memory=opts.profile_memory, record_shapes=opts.record_shapes,
                   with_stack=opts.with_stack)
    stepper = Stepper(torch, prof, sched, log, step_opts)
    writer.stepper = stepper
    loaders = DataLoaderLog(opts.overrides, loader_emitter(log))
    undo = loaders.install(torch)
    capture = start_lineprof(opts, session, log)
    undo += install_hooks(torch, stepper, capture, loaders)
    undo += install_record_hooks(torch, record)
    main_pid = os.getpid()

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
            except BaseException as exc:
                if os.getpid() != main_pid:  # a process the script forked ended the script
                    forked_child_exit(exc)
                raise
            finally:
                writer.finishing = True
            if os.getpid() != main_pid:
                forked_child_exit(None)
        result = {"rc": 0, "reason": "completed"}
    except StopAfterWindow:
        result = {"rc": 0, "reason": STOPPED_REASON}
        if capture is None:  # the script is over: persistent DataLoader workers would make
            end_children()   # their iterator wait out torch's 5 s join (line profiling
            #                  workers still have stats to write, so they end as usual)
    except Killed as exc:
        ending_caught()
        name = signal.Signals(exc.signum).name
        result = {"rc": exc.code, "reason": f"killed by {name}", "signal": name,
                  "died_of": exc.signum}
        end_children()
    except Stopped as exc:
        ending_caught()
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
        runner_stderr(text)
        result = {"rc": 1, "reason": "exception", "exception": {
            "type": type(exc).__name__, "message": str(exc), "traceback": text,
            "step": stepper.steps}}
    finally:
        disarm_timers()
        gc.unfreeze()  # Stepper.step froze the objects alive at the first step
        record.finish()
        for fn in reversed(undo):
            fn()
    del error
    if has_children():
        gc.collect()  # drop the script's iterators so DataLoader workers shut down now
    finish_lineprof(capture, log)
    for message in loaders.unmatched():
        log.emit(layout.WARNING, source="overrides", message=message)
        say(message)
    result.update(steps=stepper.steps, batches=stepper.batches, stepping=stepper.mode,
                  traces=writer.paths, script_s=round(time.perf_counter() - t0, 3),
                  dataloaders=loaders.summary())
    if stepper.steps == 0 and result["rc"] == 0:  # a crash tells its own story
        result["warning"] = NO_STEPS
        say(NO_STEPS + ("" if writer.paths else
                        "; the profiling window never opened, so no trace was recorded "
                        "(use --wait 0 --warmup 0 to record the whole script)"))
    elif result["reason"] == STOPPED_REASON:
        say(f"{STOPPED_REASON} ({stepper.steps} steps); session: {session}")
    return result


def forked_child_exit(exc: BaseException | None) -> None:
    """A process the script forked reached the end of the script: it exits there, as it
    would under plain python, and never runs the runner's ending (`finished` is the parent's)."""
    if exc is not None and not isinstance(exc, SystemExit):
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    rc = exit_code(exc) if isinstance(exc, SystemExit) else (1 if exc else 0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


def end_of_script(result: dict) -> None:
    """Processes and threads the script left behind, listed (and the processes ended) in the
    `finished` record."""
    left = end_leftovers()
    if left:
        result["left_running"] = left
        say(f"ended {len(left)} process(es) the script left running: "
            + "; ".join(f"pid {p['pid']} ({p['command'][:80]})" for p in left))
    import threading

    threads = [t.name for t in threading.enumerate()
               if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if threads:
        result["threads_left"] = threads


def open_session_dir(opts: argparse.Namespace, script: Path) -> Path:
    """The session folder, created; without --session nothing is created for a script that
    cannot run."""
    if not opts.session:
        check_script(script)
    return prepare_session(Path(opts.session) if opts.session else
                           default_session_dir(opts.script))


def run_single(opts: argparse.Namespace) -> tuple[int, int | None]:
    rank = rank_from_env()
    script = Path(opts.script).expanduser().resolve()
    session = open_session_dir(opts, script)
    log = EventLog(session / layout.events_name(rank), rank)
    tee = FdTee(session / layout.stdout_name(rank), opts.terminal)
    t0 = time.time()
    result: dict
    try:
        try:
            check_script(script)
            info = torch_info(import_torch())
            owner = rank is None or (rank == 0 and not (session / layout.RUN_JSON).exists())
            if owner:
                write_run_json(session, run_info(opts, script, info))
            log.emit(layout.STARTED, script=str(script), args=opts.script_args, cwd=os.getcwd(),
                     pid=os.getpid(), python=sys.executable, session=str(session),
                     schedule={k: getattr(opts, k) for k in DEFAULT_SCHEDULE},
                     overrides=list(opts.sets), **info)
            install_stop_handler()
            result = run_script(opts, session, log, script, rank)
            script_over()
            end_of_script(result)
            if owner and result.get("dataloaders"):
                update_run_json(session, dataloaders=result["dataloaders"])
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
    died_of = result.pop("died_of", None)
    log.finish(**result)
    return int(result["rc"]), died_of


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    if opts.process_group:
        new_process_group()
    # a daemon the script double-forks (os.setsid) is re-parented here, not to init, so the
    # script's end and a stop reach it as they reach any process the script left running
    become_subreaper()
    try:
        if opts.nproc_per_node > 1 and rank_from_env() is None:
            from .distributed import run_distributed

            script = Path(opts.script).expanduser().resolve()
            session = open_session_dir(opts, script)
            return run_distributed(opts, session, script, RUNNER)
        rc, died_of = run_single(opts)
    except SetupError as exc:  # the session folder itself failed: nowhere to write `finished`
        say(f"error: {exc}")
        return EXIT_SETUP
    if died_of:
        die_of(died_of)  # the exit status says the signal, as the script's own death would
    exit_watchdog(rc, leads_group=opts.process_group)
    return rc

