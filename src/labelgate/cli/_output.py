"""What every ``labelgate`` command prints the same way: one-line errors with a hint, and numbers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from labelgate.extras import as_missing_extra
from labelgate.gate.decision import EXIT_CODES


class Debug:
    """``--debug`` of the main command: tracebacks instead of one-line errors."""

    enabled = False
    #: The command being run (``labelgate gate``), for messages that name it.
    command = "labelgate"


def first_line(error: BaseException) -> str:
    """The first line of an error's message (the LabelGate message, or the exception's text or type)."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def fail(error: BaseException, hint: str) -> typer.Exit:
    """Print ``error: …`` and ``hint: …`` on stderr and return the ERROR exit (re-raise with ``--debug``).

    A missing optional dependency is said as the extra to install (:mod:`labelgate.extras`), whatever ``hint`` says.
    """
    if Debug.enabled:
        raise error
    missing = as_missing_extra(error, Debug.command)
    if missing is not None:
        error, hint = missing, missing.hint
    typer.echo(f"error: {first_line(error)}", err=True)
    typer.echo(f"hint: {hint}", err=True)
    return typer.Exit(EXIT_CODES["ERROR"])


def num(value: Any) -> str:
    """A number with three decimals, or an em dash for a missing or non-numeric value."""
    return f"{value:.3f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "—"


def safe(value: Any) -> str:
    """Text from the data (batch ids, question names, reasons) made safe for a terminal: one line, no control
    characters, so that a value can never forge lines of the output or drive the terminal."""
    text = "" if value is None else str(value)
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def orchestration_text(how: Mapping[str, Any] | None) -> str | None:
    """One line saying which way a request ran (a summary's ``orchestration``), or None when it does not say."""
    if not how:
        return None
    if how.get("mode") != "prefect":
        return f"in-process, without Prefect ({safe(how.get('reason'))})"
    where = {"ephemeral": "Prefect's temporary local API", "cloud": f"Prefect Cloud ({safe(how.get('api_url'))})"}
    run = f" {safe(how['flow_run_id'])}" if how.get("flow_run_id") else ""
    return f"Prefect flow run{run} on {where.get(str(how.get('api')), safe(how.get('api_url')))}"
