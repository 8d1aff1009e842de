"""CLI subcommands: each module defines `register(subparsers)` that adds its parser
and sets `func=run(args) -> int` as the default.

SUMMARIES is the top-level listing (`stallscope-cli --help`, a typo's choices): it lets the
CLI list every command without importing any (start-up time). Each line equals the `help=` its
module registers (tests/core/test_cli.py checks it).
"""

SUMMARIES = {
    "analyze": "why the GPU waits: utilization, idle causes, advice",
    "info": "what a trace holds: events, devices, steps, ranks, span",
    "run": "run a training script under torch.profiler into a session folder",
    "tune": "find the DataLoader settings that make the steps fastest, by measuring",
    "compare": "compare two traces or sessions: step time, data wait, utilization, idle by cause",
    "lineprof": "line-by-line time of Dataset.__getitem__ (a session, its JSON, or a kernprof "
                ".lprof)",
    "convert": "convert an image folder or Dataset factory into an LMDB of decoded tensors",
    "verify": "check a converted LMDB: every record's checksum, and random samples against the "
              "source",
    "check": "CI guard: exit 1 when a run's data wait, utilization or step time crosses a "
             "threshold",
    "attach": "follow a run on a remote host again and fetch what is missing of its session",
    "export": "write a trace with stallscope's idle causes, steps and advice as extra tracks "
              "(Perfetto / chrome://tracing)",
}
