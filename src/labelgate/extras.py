"""Which optional extra a feature needs, and a one-line error when it is not installed.

``pip install labelgate`` is the numerical core (numpy, scipy, pandas) and the ``labelgate metrics`` command. Every
other job is an extra of its own (``pyproject.toml``, ``[project.optional-dependencies]``). This module is the one
place that knows which import belongs to which extra: a feature asks :func:`require` before it starts, and the
command line turns :class:`MissingExtraError` (or a :class:`ModuleNotFoundError` that :func:`extra_for_module`
recognises) into ``error: …`` / ``hint: pip install 'labelgate[…]'`` and exit 3, never a traceback.

It asks :func:`importlib.util.find_spec`, which looks for a module without importing it, so that the check costs
microseconds and never loads Great Expectations or Prefect.

>>> extra_for_module("great_expectations.core")
'gx'
>>> extra_for_module("numpy") is None
True
>>> install_hint("label-studio")
"pip install 'labelgate[label-studio]'"
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from labelgate.errors import LabelGateError, Reason

#: The top-level modules each extra brings (the import names, not the distribution names). ``gate`` holds
#: everything ``labelgate gate`` and ``labelgate monitor`` need without Prefect; ``prefect`` adds the flows,
#: ``serve`` and deployments on top of it.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "gx": ("great_expectations",),
    "gate": ("great_expectations", "pandera", "pydantic", "yaml", "sqlalchemy", "pyarrow", "jinja2"),
    "prefect": ("prefect",),
    "postgres": ("psycopg",),
    "label-studio": ("httpx",),
    "dask": ("dask", "distributed", "prefect_dask"),
    "spark": ("pyspark",),
    "report": ("matplotlib",),
}

#: A missing module reported by an import error → the smallest extra that brings it (``extra_for_module``).
MODULE_EXTRA: dict[str, str] = {
    "great_expectations": "gx", "pandera": "gate", "pydantic": "gate", "yaml": "gate", "sqlalchemy": "gate",
    "pyarrow": "gate", "jinja2": "gate", "markupsafe": "gate", "httpx": "label-studio", "prefect": "prefect",
    "fastapi": "prefect", "uvicorn": "prefect",
    "psycopg": "postgres", "dask": "dask", "distributed": "dask", "prefect_dask": "dask", "pyspark": "spark",
    "matplotlib": "report",
}


class MissingExtraError(LabelGateError, ImportError):
    """A feature's optional dependencies are not installed; ``extra`` names what to install."""

    default_code = Reason.MISSING_SETTING

    def __init__(self, message: str, extra: str, missing: Iterable[str] = ()) -> None:
        super().__init__(message, extra=extra, missing=", ".join(missing))
        self.extra = extra
        self.hint = install_hint(extra)


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (pip normalises the dashed names the docs use)."""
    return f"pip install 'labelgate[{extra}]'"


def missing_modules(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be found in this environment (empty when it is installed)."""
    return [name for name in EXTRA_MODULES[extra] if importlib.util.find_spec(name) is None]


def require(extra: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed.

    Parameters
    ----------
    extra : str
        A key of :data:`EXTRA_MODULES`.
    feature : str
        What needs it, for the message ("labelgate gate", "the Great Expectations expectations", …).
    """
    if extra not in EXTRA_MODULES:
        raise ValueError(f"unknown extra {extra!r}")
    missing = missing_modules(extra)
    if missing:
        raise _not_installed(feature, extra, missing)


def require_module(name: str, feature: str) -> None:
    """Raise :class:`MissingExtraError` naming the smallest extra that brings the module ``name`` when it cannot be
    found (a feature that needs one module of an extra, e.g. pyarrow to read a Parquet file).

    >>> require_module("json", "reading JSON")
    """
    if importlib.util.find_spec(name) is None:
        extra = extra_for_module(name)
        if extra is None:
            raise ValueError(f"no extra brings the module {name!r}")
        raise MissingExtraError(f"{feature}: {name} is not installed (the '{extra}' extra brings it)",
                                extra=extra, missing=[name])


def extra_for_module(name: str | None) -> str | None:
    """The extra that brings the module ``name`` (a dotted name is judged by its top-level package), or None."""
    if not name:
        return None
    return MODULE_EXTRA.get(name.split(".")[0])


def as_missing_extra(error: BaseException, feature: str) -> MissingExtraError | None:
    """The :class:`MissingExtraError` an import failure stands for, or None when it is not an extra's module."""
    if isinstance(error, MissingExtraError):
        return error
    if isinstance(error, ModuleNotFoundError):
        extra = extra_for_module(error.name)
        if extra is not None:
            return _not_installed(feature, extra, [str(error.name)])
    return None


def _not_installed(feature: str, extra: str, missing: list[str]) -> MissingExtraError:
    """The one wording of an extra that is not installed (the command line prints it as ``error: …``)."""
    return MissingExtraError(f"{feature}: the '{extra}' extra is not installed (missing: {', '.join(missing)})",
                             extra=extra, missing=missing)
