"""The Run dialog's repeated profiling windows: the choices, and the runner options they make
(--profile-every N, --profile-at 100,5000, --profile-epochs)."""

from __future__ import annotations

from stallscope.core.capture import options as run_options

WINDOW_CHOICES = (("One window (the schedule above)", None),
                  ("Every N steps", "profile_every"), ("At steps", "profile_at"),
                  ("At each epoch's start", "profile_epochs"))


def windows_of(options: dict) -> tuple[str | None, str]:
    """The window choice and its text from a request's options."""
    if options.get("profile_epochs"):
        return "profile_epochs", ""
    if int(options.get("profile_every") or 0) > 0:
        return "profile_every", str(int(options["profile_every"]))
    if options.get("profile_at"):
        at = options["profile_at"]
        return "profile_at", at if isinstance(at, str) else ",".join(str(n) for n in at)
    return None, ""


def window_options(key: str | None, text: str) -> dict:
    """The request's options for a choice and its text ({} for the schedule's one window);
    ValueError with one line for the dialog when the text does not fit the choice."""
    text = text.strip()
    if key == "profile_epochs":
        return {"profile_epochs": True}
    if key == "profile_every":
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"windows: every N steps needs a number of steps, not {text!r}")
        return {"profile_every": int(text)}
    if key == "profile_at":
        try:
            steps = run_options.parse_steps(text)
        except ValueError as exc:
            raise ValueError(f"windows: {exc}") from None
        if not steps:
            raise ValueError("windows: give the steps to profile at, e.g. 100,5000")
        return {"profile_at": steps}
    return {}
