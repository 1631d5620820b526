"""A statistic computed on first read and kept on the instance, with no lock shared between instances.

``functools.cached_property`` of Python 3.11 holds one lock per attribute for *every* instance of the class, so
two threads computing the same statistic of two different `Ratings` (two pools, :mod:`labelgate.core.parallel`)
wait for each other. This descriptor keeps the value in the instance's ``__dict__`` as ``cached_property`` does
(a later read finds it there without calling the descriptor; callers may seed it the same way), and takes no
lock: two threads reading one new attribute of one instance at once may both compute it — the same value, as every
statistic is a pure function of the instance's judgements. numpy-free, stdlib only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_statistic(Generic[T]):  # noqa: N801 - named like the decorator it replaces
    """Decorator: the method's value, computed on first read and stored in the instance's ``__dict__``.

    Examples
    --------
    >>> class Box:
    ...     calls = 0
    ...     @cached_statistic
    ...     def value(self) -> int:
    ...         Box.calls += 1
    ...         return 42
    >>> box = Box()
    >>> box.value, box.value, Box.calls
    (42, 42, 1)
    """

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_statistic[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_statistic[T]:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.name] = value
        return value


class PairCache(dict[int, tuple[Any, ...]]):
    """Results that one `Ratings` keeps for another, keyed by the other's ``id`` with the other held weakly as
    each entry's first item (:func:`pair_entry`, :func:`keep_pair_entry`).

    Pickled and copied as an empty cache: a weak reference cannot be pickled, and a copy's partner is another
    object. Kept in the instance's ``__dict__``, so a `Ratings` that measured a pair still pickles.
    """

    def __reduce__(self) -> tuple[type[PairCache], tuple[()]]:
        return (PairCache, ())

    def __copy__(self) -> PairCache:
        return PairCache()

    def __deepcopy__(self, memo: dict[int, Any]) -> PairCache:
        return PairCache()


def pair_entry(owner: Any, name: str, other: Any) -> tuple[Any, ...] | None:
    """What ``owner`` keeps under ``name`` for ``other`` (its items after the weak reference), or None."""
    cache = owner.__dict__.get(name)
    hit = None if cache is None else cache.get(id(other))
    return hit[1:] if hit is not None and hit[0]() is other else None


def keep_pair_entry(owner: Any, name: str, other: Any, *values: Any) -> None:
    """Keep ``values`` on ``owner`` under ``name`` for ``other`` (held weakly); entries of dead partners go."""
    cache = owner.__dict__.setdefault(name, PairCache())
    for dead in [key for key, entry in cache.items() if entry[0]() is None]:
        del cache[dead]
    cache[id(other)] = (weakref.ref(other), *values)
