"""`stallscope-cli run` (placeholder until its issue lands)."""


def register(sub) -> None:
    p = sub.add_parser("run", help="(not yet available)")
    p.set_defaults(func=lambda args: print("stallscope-cli run: not yet available") or 1)
