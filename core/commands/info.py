"""`stallscope-cli info` (placeholder, being written)."""


def register(sub) -> None:
    p = sub.add_parser("info", help="(not yet available)")
    p.set_defaults(func=lambda args: print("stallscope-cli info: not yet available") or 1)
