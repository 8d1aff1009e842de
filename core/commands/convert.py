"""`stallscope-cli convert` (placeholder until its issue lands)."""


def register(sub) -> None:
    p = sub.add_parser("convert", help="(not yet available)")
    p.set_defaults(func=lambda args: print("stallscope-cli convert: not yet available") or 1)
