"""A statistic computed on first read and kept on the instance, with no lock shared between instances.

``functools.cached_property`` of Python 3.11 holds one lock per attribute for *every* instance of the class, so
two threads computing the same statistic of two different `Ratings` (two pools, :mod:`labelgate.core.parallel`)
wait for each other. This descriptor keeps the value in the instance's ``__dict__`` as ``cached_property`` does
(a later read finds it there without calling the descriptor; callers may seed it the same way), and takes no
lock: two threads reading one new attribute of one instance at once may both compute it — the same value, as every
statistic is a pure function of the instance's judgements. numpy-free, stdlib only.
"""

from __future__ import annotations

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
