"""One way to read a table from a database named by an environment variable, for the gate and the monitor.

The database URL may hold credentials: it is read from the environment variable the configuration names
(``url_env``), never enters a message, and errors are raised ``from None`` so that the SQLAlchemy error (which can
quote the URL) is not chained into tracebacks or logs. A failing query is reported with the driver's message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pandas as pd

from labelgate.errors import InputError, Reason

#: Builds the statement and its parameters on an open connection (some parameters depend on the dialect).
StatementBuilder = Callable[[Any], tuple[Any, Mapping[str, Any]]]


def read_sql(url_env: str | None, what: str, build: StatementBuilder) -> pd.DataFrame:
    """Run the statement ``build(connection)`` returns on the database whose URL is in ``$url_env``.

    ``what`` names the source in messages ("the batch query", "the monitor SQL source").

    Raises
    ------
    InputError
        The variable is unset, its URL is unusable (bad form, missing driver), the database is unreachable, or
        the statement fails (the message holds the driver's text, never the URL).
    """
    with connected(url_env, what) as connection:
        statement, params = build(connection)
        return pd.read_sql_query(statement, connection, params=dict(params))


@contextmanager
def connected(url_env: str | None, what: str) -> Iterator[Any]:
    """An open SQLAlchemy connection to the database whose URL is in ``$url_env``; every database fault in the
    block becomes an :class:`~labelgate.errors.InputError` naming ``what`` and the driver's message (never the URL).

    Raises
    ------
    InputError
        As :func:`read_sql`.
    """
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    name = url_env or ""
    url = os.environ.get(name, "")
    if not url:
        raise InputError(f"The environment variable {name!r} (the database URL of {what}) is not set.",
                         Reason.MISSING_SETTING, env=name)
    try:
        engine = create_engine(url)
    except Exception as exc:  # malformed URL: ArgumentError; missing driver: ImportError/NoSuchModuleError
        raise InputError(f"The environment variable {name!r} does not hold a usable SQLAlchemy URL "
                         f"({type(exc).__name__}).", Reason.UNREADABLE_INPUT, env=name) from None
    try:
        with engine.connect() as connection:
            try:
                yield connection
            except (DBAPIError, pd.errors.DatabaseError) as exc:
                # pandas wraps the DBAPI error; its `orig` is the driver's message (no URL)
                cause = exc if isinstance(exc, DBAPIError) else exc.__cause__
                detail = cause.orig if isinstance(cause, DBAPIError) else type(exc).__name__
                raise InputError(f"{what[:1].upper()}{what[1:]} failed: {detail}", Reason.UNREADABLE_INPUT,
                                 env=name) from None
    except InputError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise InputError(f"Cannot connect to the database named by {name!r} ({type(exc).__name__}).",
                         Reason.UNREADABLE_INPUT, env=name) from None
    finally:
        engine.dispose()


def read_query(url_env: str | None, query: str, what: str, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """:func:`read_sql` of a SQL text with bound ``params``."""
    from sqlalchemy import text

    return read_sql(url_env, what, lambda _connection: (text(query), params or {}))


def bare_query(query: str) -> str:
    """A query without what may trail it — whitespace, ``;`` and comments (``-- ...`` to the end of a line,
    ``/* ... */``), in any order — so that it can run as a subquery (the monitor's SQL source, the gate's batch).

    One scan of the whole text: quoted strings and identifiers (``'...'``, ``"..."``; a doubled quote is two
    strings in a row) are code, comments are not, and the query ends after its last character of code that is not a
    ``;``. What the scan cannot read is kept as code (an unclosed quote or ``/*`` runs to the end): the database
    refuses it rather than running a query cut short.

    Examples
    --------
    >>> bare_query("SELECT 1 ; -- note")
    'SELECT 1'
    >>> bare_query("SELECT '--;' AS b; /* v2 */")
    "SELECT '--;' AS b"
    """
    end, at, n = 0, 0, len(query)  # end: after the last character of code so far
    while at < n:
        char = query[at]
        if char in "'\"":
            close = query.find(char, at + 1)
            at = end = n if close < 0 else close + 1
        elif query.startswith("--", at):
            newline = query.find("\n", at)
            at = n if newline < 0 else newline + 1
        elif query.startswith("/*", at):
            close = query.find("*/", at + 2)
            if close < 0:  # unclosed: kept, for the database to refuse
                at = end = n
            else:
                at = close + 2
        else:
            if not char.isspace() and char != ";":
                end = at + 1
            at += 1
    return query[:end]


def subquery_text(query: str) -> str:
    """A user's query as the text of a subquery: :func:`bare_query`, then a newline, so that what the scan leaves
    at the end (an unclosed quote or comment, kept for the database to refuse) cannot swallow the text the caller
    appends after it."""
    return bare_query(query) + "\n"
