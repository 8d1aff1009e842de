"""`stallscope-cli analyze` (placeholder, being written)."""


def register(sub) -> None:
    p = sub.add_parser("analyze", help="(not yet available)")
    p.set_defaults(func=lambda args: print("stallscope-cli analyze: not yet available") or 1)
