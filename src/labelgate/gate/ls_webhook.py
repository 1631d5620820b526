"""Label Studio webhook deliveries → debounced gate batches: parsing, verification and the quiet period (no HTTP).

Label Studio posts one delivery per annotation saved (``ANNOTATION_CREATED``, ``ANNOTATION_UPDATED``), per import
(``ANNOTATIONS_CREATED``) and per deletion (``ANNOTATIONS_DELETED``). Gating on every delivery would gate one task at a
time; the :class:`Debouncer` collects a project's deliveries and hands them over as one :class:`ReadyBatch` once the
project has been quiet for ``quiet_seconds`` (or ``max_wait_seconds`` after its first delivery, so that a busy
project is still gated). A ready batch is the tasks whose annotations were created or updated: its
:meth:`~ReadyBatch.payload` is the ``labelgate.batch.ready`` event's payload, whose ``path`` is the project URL with
``?tasks=...`` (:func:`labelgate.pipeline.sources.label_studio.selection_of_url`), so the served gate reads exactly
those tasks. Deleted annotations carry only their ids: they are reported on the batch (``deleted_annotations``), for a
listener such as the monitor, and a batch of deletions only emits no gate event.

Deliveries are authenticated by a shared secret that Label Studio sends as a header (the webhook's ``headers``);
:func:`verify` compares it in constant time.

>>> d = Debouncer(quiet_seconds=5)
>>> d.add(parse_delivery({"action": "ANNOTATION_CREATED", "project": {"id": 7}, "task": {"id": 3},
...                       "annotation": {"id": 30, "task": 3}}), now=100.0)
>>> d.due(now=103.0)
[]
>>> [b.task_ids for b in d.due(now=105.0)]
[(3,)]
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labelgate.errors import InputError, Reason

#: The actions a receiver accepts (Label Studio's names).
ACTIONS = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED")
#: The header carrying the shared secret.
SECRET_HEADER = "X-LabelGate-Secret"
#: Task ids one ready batch holds at most: a longer burst is handed over in several batches.
MAX_TASKS_PER_BATCH = 5_000
#: Annotations one delivery may name at most (an import of more is refused: gate the project instead).
MAX_ANNOTATIONS_PER_DELIVERY = 100_000


@dataclass(frozen=True)
class Delivery:
    """One webhook delivery: its action, project, and the tasks and annotations it names."""

    action: str
    project: int
    task_ids: tuple[int, ...] = ()
    annotation_ids: tuple[int, ...] = ()


def verify(headers: Mapping[str, str], secret: str) -> bool:
    """Whether the delivery's :data:`SECRET_HEADER` equals ``secret`` (constant-time; an empty secret never matches).

    Examples
    --------
    >>> verify({"x-labelgate-secret": "s3"}, "s3"), verify({}, "s3"), verify({"X-LabelGate-Secret": ""}, "")
    (True, False, False)
    """
    given = next((v for k, v in headers.items() if k.lower() == SECRET_HEADER.lower()), "")
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


def parse_delivery(body: Any) -> Delivery:
    """The :class:`Delivery` of a webhook body (the webhook must send its payload: ``send_payload: true``).

    Raises
    ------
    InputError
        Not a JSON object, an action the receiver does not handle, no project id (the webhook was registered
        without ``send_payload``), or ids that are not integers.

    Examples
    --------
    >>> parse_delivery({"action": "ANNOTATIONS_DELETED", "project": {"id": 2}, "annotations": [{"id": 5}]})
    Delivery(action='ANNOTATIONS_DELETED', project=2, task_ids=(), annotation_ids=(5,))
    """
    if not isinstance(body, Mapping):
        raise InputError("A Label Studio webhook delivery is a JSON object.", Reason.UNREADABLE_INPUT)
    action = body.get("action")
    if action not in ACTIONS:
        raise InputError(f"Label Studio webhook action {action!r} is not handled (handled: {list(ACTIONS)}).",
                         Reason.INVALID_PARAMETER, value=str(action))
    project = body.get("project")
    pid = project.get("id") if isinstance(project, Mapping) else None
    if pid is None:
        raise InputError(f"The Label Studio webhook delivery {action} names no project: register the webhook with "
                         "\"send_payload\": true.", Reason.MISSING_SETTING, value=action)
    annotations = body.get("annotations") if "annotations" in body else [body.get("annotation")]
    if not isinstance(annotations, list) or len(annotations) > MAX_ANNOTATIONS_PER_DELIVERY:
        raise InputError(f"The Label Studio webhook delivery {action} of project {pid} does not list its annotations "
                         f"(or lists more than {MAX_ANNOTATIONS_PER_DELIVERY}).", Reason.UNREADABLE_INPUT,
                         project=pid)
    tasks = [body["task"].get("id")] if isinstance(body.get("task"), Mapping) else []
    tasks += [a.get("task") for a in annotations if isinstance(a, Mapping) and a.get("task") is not None]
    try:
        return Delivery(action, _int(pid), tuple(sorted({_int(t) for t in tasks if t is not None})),
                        tuple(sorted({_int(a.get("id")) for a in annotations if isinstance(a, Mapping)})))
    except (TypeError, ValueError):
        raise InputError(f"The Label Studio webhook delivery {action} of project {pid} holds an id that is not an "
                         "integer.", Reason.UNREADABLE_INPUT, project=pid) from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(value)
    return int(value)


@dataclass
class ReadyBatch:
    """A project's deliveries of one quiet period.

    Attributes
    ----------
    project : int
    task_ids : tuple of int
        The tasks whose annotations were created or updated.
    deleted_annotations : tuple of int
        The ids of the annotations deleted.
    actions : dict
        How many deliveries of each action.
    first, last : float
        When the first and the last delivery arrived (the debouncer's clock, seconds).
    """

    project: int
    task_ids: tuple[int, ...]
    deleted_annotations: tuple[int, ...]
    actions: dict[str, int]
    first: float
    last: float

    @property
    def batch_id(self) -> str:
        """``ls-<project>-<first task>-<last task>-<n tasks>-<hash>``: stable for the same tasks, short for any."""
        import hashlib

        digest = hashlib.sha256(",".join(map(str, self.task_ids)).encode()).hexdigest()[:10]
        ends = f"{self.task_ids[0]}-{self.task_ids[-1]}-{len(self.task_ids)}" if self.task_ids else "deleted"
        return f"ls-{self.project}-{ends}-{digest}"

    def path(self, base_url: str) -> str:
        """The project URL selecting the batch's tasks, as the gate reads it."""
        return f"{base_url.rstrip('/')}/projects/{self.project}?tasks={','.join(map(str, self.task_ids))}"

    def payload(self, base_url: str) -> dict[str, Any]:
        """The ``labelgate.batch.ready`` payload: ``batch_id``, ``path`` (:meth:`path`), and what was delivered."""
        return {"batch_id": self.batch_id, "path": self.path(base_url),
                "label_studio": {"project": self.project, "tasks": len(self.task_ids), "actions": dict(self.actions),
                                 "deleted_annotations": list(self.deleted_annotations)[:100]}}


@dataclass
class _Pending:
    first: float
    last: float
    tasks: set[int] = field(default_factory=set)
    deleted: set[int] = field(default_factory=set)
    actions: dict[str, int] = field(default_factory=dict)


class Debouncer:
    """Collects deliveries per project and hands them over after a quiet period (thread-safe).

    Parameters
    ----------
    quiet_seconds : float
        A project is ready once no delivery arrived for this long.
    max_wait_seconds : float, optional
        ... or this long after its first delivery, whatever comes next (default ``10 * quiet_seconds``).
    """

    def __init__(self, quiet_seconds: float = 30.0, max_wait_seconds: float | None = None) -> None:
        if not quiet_seconds >= 0:
            raise InputError(f"The quiet period is a number of seconds >= 0, not {quiet_seconds!r}.",
                             Reason.INVALID_PARAMETER, value=quiet_seconds)
        self.quiet = float(quiet_seconds)
        self.max_wait = float(max_wait_seconds) if max_wait_seconds is not None else 10 * self.quiet
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()

    def add(self, delivery: Delivery, now: float) -> None:
        """Record one delivery received at ``now``."""
        with self._lock:
            pending = self._pending.setdefault(delivery.project, _Pending(now, now))
            pending.last = now
            pending.actions[delivery.action] = pending.actions.get(delivery.action, 0) + 1
            if delivery.action == "ANNOTATIONS_DELETED":
                pending.deleted.update(delivery.annotation_ids)
            else:
                pending.tasks.update(delivery.task_ids)

    def due(self, now: float) -> list[ReadyBatch]:
        """The batches of the projects that are ready at ``now`` (removed from the pending ones)."""
        with self._lock:
            ready = [p for p, pending in self._pending.items()
                     if now - pending.last >= self.quiet or now - pending.first >= self.max_wait]
            return [batch for p in ready for batch in _split(p, self._pending.pop(p))]

    def flush(self) -> list[ReadyBatch]:
        """Every pending batch, quiet or not (at shutdown)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        return [batch for p, item in pending.items() for batch in _split(p, item)]

    def pending(self) -> dict[int, int]:
        """The tasks pending per project."""
        with self._lock:
            return {p: len(item.tasks) for p, item in self._pending.items()}


def _split(project: int, pending: _Pending) -> Iterable[ReadyBatch]:
    tasks = sorted(pending.tasks)
    chunks = [tuple(tasks[i:i + MAX_TASKS_PER_BATCH]) for i in range(0, len(tasks), MAX_TASKS_PER_BATCH)] or [()]
    for k, chunk in enumerate(chunks):
        yield ReadyBatch(project, chunk, tuple(sorted(pending.deleted)) if k == 0 else (), dict(pending.actions),
                         pending.first, pending.last)
