"""Values the SQL backend compares with a column or reads back, as pandas would see them.

:func:`bound` binds a string without SQLAlchemy's type cast (so a PostgreSQL ENUM column compares with it), and
:func:`is_nan` tells a NaN the database returned (a missing label on pandas). SQLAlchemy is imported lazily.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import Any


def is_nan(v: Any) -> bool:
    """A float or decimal NaN (pandas reads either as a missing value)."""
    return isinstance(v, (float, Decimal)) and v != v


def bound(v: Any) -> Any:
    """A value compared with a column: a string is bound without a type cast.

    SQLAlchemy's psycopg dialect casts a string parameter to ``VARCHAR`` (``%(p)s::VARCHAR``), and PostgreSQL has no
    ``=`` between an ENUM and ``varchar``; bound untyped, the server reads it as the column's type (text, varchar or
    the ENUM), so an ENUM label, pool or question column is compared with its values as pandas compares the strings
    ``read_sql`` returns. Other values keep SQLAlchemy's typing (e.g. a date bound as SQLite stores it).
    """
    import sqlalchemy as sa

    return sa.bindparam(None, v, type_=_untyped()) if isinstance(v, str) else v


@cache
def _untyped() -> Any:
    """The type of an untyped string parameter (built once: SQLAlchemy is imported lazily)."""
    import sqlalchemy as sa

    class UntypedString(sa.types.UserDefinedType[str]):
        """A string bound as is: no cast rendered, the driver's own (psycopg: an unknown-typed literal)."""

        cache_ok = True

        def get_col_spec(self, **kw: Any) -> str:
            return "TEXT"

        def literal_processor(self, dialect: Any) -> Any:
            return sa.String().literal_processor(dialect)

    return UntypedString()
