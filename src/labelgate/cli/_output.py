"""What every ``labelgate`` command prints the same way: one-line errors with a hint, and numbers."""

from __future__ import annotations

from typing import Any

import typer

from labelgate.gate.decision import EXIT_CODES


class Debug:
    """``--debug`` of the main command: tracebacks instead of one-line errors."""

    enabled = False


def first_line(error: BaseException) -> str:
    """The first line of an error's message (the LabelGate message, or the exception's text or type)."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def fail(error: BaseException, hint: str) -> typer.Exit:
    """Print ``error: …`` and ``hint: …`` on stderr and return the ERROR exit (re-raise with ``--debug``)."""
    if Debug.enabled:
        raise error
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
