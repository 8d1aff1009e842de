"""`stallscope-cli lineprof` (placeholder until its issue lands)."""


def register(sub) -> None:
    p = sub.add_parser("lineprof", help="(not yet available)")
    p.set_defaults(func=lambda args: print("stallscope-cli lineprof: not yet available") or 1)
