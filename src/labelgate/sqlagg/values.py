"""Values the SQL backend compares with a column or reads back, as pandas would see them.

:func:`bound` binds a string without SQLAlchemy's type cast (so a PostgreSQL ENUM column compares with it);
:func:`missing_label` tells a missing label the database returned (None, or a NaN: missing on pandas) and
:func:`holds_nan` whether a label column's type can hold a NaN (then excluded in the queries). SQLAlchemy is imported
lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from functools import cache
from typing import Any

from labelgate.errors import InputError, Reason

#: PostgreSQL type OIDs of a result column (a domain is described as its base type). int8:
INT8_OID = 20
#: int8, int2, int4, oid (psycopg returns ints)
INTEGER_OIDS = frozenset({INT8_OID, 21, 23, 26})
#: float4, float8, numeric: the types whose values can be NaN
NAN_OIDS = frozenset({700, 701, 1700})
#: the other types psycopg does not return as ints: text, varchar, bpchar, name, uuid, and the NaN types
OTHER_OIDS = frozenset({25, 1043, 1042, 19, 2950}) | NAN_OIDS


def is_nan(v: Any) -> bool:
    """A float or decimal NaN (pandas reads either as a missing value)."""
    return isinstance(v, (float, Decimal)) and v != v


def holds_nan(dialect: str, type_code: Callable[[], Any]) -> bool:
    """Whether a label column can hold a NaN, decided by its type in the database.

    PostgreSQL: a ``real``, ``double precision`` or ``numeric`` column (``type_code()``: the column's type OID,
    asked only here). SQLite: never — it stores a NaN as NULL and computes NULL where a NaN would arise
    (``0.0 / 0.0``), whatever a column's declared type (which does not constrain its values). Any other database:
    its driver's type codes are its own, so no type is read and no NaN is excluded; a NaN label it returns is
    refused (:func:`missing_label`) rather than counted as a category.
    """
    return dialect == "postgresql" and type_code() in NAN_OIDS


def missing_label(value: Any, dialect: str) -> bool:
    """Whether a label the database returned is missing: None, or a NaN (as pandas reads it).

    Raises
    ------
    InputError
        A NaN from a database other than PostgreSQL (reason ``unreadable_input``): :func:`holds_nan` does not read
        its types, so its queries would count the NaN as a label.
    """
    if is_nan(value) and dialect != "postgresql":
        raise InputError(f"The label column holds NaN on a {dialect or 'an unnamed'} database, whose column types "
                         "LabelGate does not read to count NaN labels as missing (as pandas does); select the rows "
                         "without them (WHERE label <> 'NaN') or make them NULL.", Reason.UNREADABLE_INPUT,
                         value="NaN")
    return value is None or is_nan(value)


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
