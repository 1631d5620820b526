"""How the ``labelgate`` command line treats what it is given, whatever the command:

- a usage error (a missing required option, an unknown option, a bad value) is a fault: exit 3 with one ``error:``
  line and a ``hint:`` line on stderr. Click's own exit status for it, 2, is REVIEW here, and a script must never
  read a typo as a decision;
- the global options (``--debug``) are accepted after the command too (``labelgate gate --debug …``);
- a missing optional dependency is one line naming the extra to install (:mod:`labelgate.extras`), never a traceback;
- ``--version`` prints ``labelgate <version>``.

The help is Typer's plain formatter (``rich_markup_mode=None`` on every :class:`typer.Typer`): Typer 0.29's rich
panel prints the value type of every option, so that a flag read ``--json <bool>`` as if it took a value, while the
plain formatter leaves flags bare (``TyperOption.get_help_record`` skips the type of a flag; the rich panel's
``rich_utils._print_options_panel`` asks ``display_type_rich`` for every option).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from labelgate._version import __version__
from labelgate.cli._output import Debug, fail, first_line
from labelgate.extras import as_missing_extra
from labelgate.gate.decision import EXIT_CODES

try:  # Typer 0.29 carries its own copy of Click; earlier releases use Click itself
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - depends on the installed Typer
    from click import exceptions as _click_errors  # type: ignore[no-redef]

UsageError = _click_errors.UsageError


class PrefectMode(enum.StrEnum):
    """``--prefect``: how ``gate`` and ``monitor`` run (:func:`labelgate.flows.api.choose`)."""

    auto = "auto"
    always = "always"
    never = "never"


PREFECT_HELP = ("auto: as a Prefect flow when a Prefect API is named (PREFECT_API_URL or the active Prefect profile), "
                "else in this process without Prefect; always: as a Prefect flow (on Prefect's temporary local API "
                "when none is named); never: in this process.")


def enable_debug(ctx: typer.Context, value: bool) -> bool:
    """``--debug``: tracebacks instead of one-line errors, and Prefect's logs.

    Called for the root command on every invocation (which starts from "off": an application invoked twice in one
    process, as tests do, forgets the first invocation's flag) and for the command after it, where it only turns
    the flag on.
    """
    if ctx.parent is None:
        Debug.enabled, Debug.command = False, "labelgate"
    if value:
        Debug.enabled = True
        os.environ["PREFECT_LOGGING_LEVEL"] = "INFO"
    return value


def print_version(value: bool) -> bool:
    """``--version``: ``labelgate <version>`` and exit 0 (eager: before any command is looked at)."""
    if value:
        typer.echo(f"labelgate {__version__}")
        raise typer.Exit(0)
    return value


class LabelGateGroup(TyperGroup):
    """The ``labelgate`` group (and its sub-groups): usage errors exit 3, ``--debug`` after the command, extras."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command, given the root's ``--debug`` option (the same option object: one callback, one flag)."""
        command = super().get_command(ctx, cmd_name)
        debug = next((p for p in ctx.find_root().command.params if p.name == "debug"), None)
        if command is not None and debug is not None and all(p.name != "debug" for p in command.params):
            command.params.append(debug)
        return command

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:  # messages name the command ("labelgate gate: the 'gate' extra is not installed")
            Debug.command = f"{ctx.command_path} {command.name}"
        return name, command, rest

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """A group run without a command prints its help and is a usage error (Click's own rule, exit 2 from Click 8.2
        and exit 0 before it, is replaced by one rule for every version)."""
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            typer.echo(ctx.get_help())
            raise _said("missing command",
                        f"choose one of the commands above ('{ctx.command_path} COMMAND --help' for its options)")
        result: list[str] = super().parse_args(ctx, args)
        return result

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with _faults():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _faults():
            return super().invoke(ctx)


@contextmanager
def _faults() -> Iterator[None]:
    """Usage errors and missing extras as one ``error:`` line, a ``hint:`` line and exit 3."""
    try:
        yield
    except UsageError as exc:
        raise _usage_error(exc) from None
    except ImportError as exc:
        missing = as_missing_extra(exc, Debug.command)
        if missing is None:
            raise
        raise fail(missing, missing.hint) from None


def _usage_error(exc: Any) -> typer.Exit:
    ctx = getattr(exc, "ctx", None)
    message = exc.format_message().strip() if hasattr(exc, "format_message") else first_line(exc)
    return _said(message.splitlines()[0] if message else type(exc).__name__,
                 f"see '{ctx.command_path if ctx is not None else 'labelgate'} --help'")


def _said(message: str, hint: str) -> typer.Exit:
    """``error:`` and ``hint:`` on stderr; the ERROR exit to raise."""
    typer.echo(f"error: {message}", err=True)
    typer.echo(f"hint: {hint}", err=True)
    return typer.Exit(EXIT_CODES["ERROR"])
