"""SciPy, imported where it is first used: ``import labelgate`` stays as light as numpy.

``sp = lazy("scipy.sparse")`` behaves like the module and ``norm = lazy("scipy.stats", "norm")`` like the object; the
import happens on the first attribute access or call (SciPy's statistics alone take ≈0.4 s to import).
"""

from __future__ import annotations

import importlib
from typing import Any


class _Lazy:
    __slots__ = ("_module", "_name")

    def __init__(self, module: str, name: str | None) -> None:
        self._module = module
        self._name = name

    def _target(self) -> Any:
        module = importlib.import_module(self._module)
        return module if self._name is None else getattr(module, self._name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._target(), attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)


def lazy(module: str, name: str | None = None) -> Any:
    """A stand-in for ``module`` (or ``module.name``) that imports it on first use.

    >>> special = lazy("scipy.special")
    >>> float(special.expit(0.0))
    0.5
    """
    return _Lazy(module, name)
