"""A monitor pass for a Label Studio project, as a webhook receiver triggers it.

The receiver (Label Studio webhooks ``ANNOTATION_CREATED``, ``ANNOTATIONS_CREATED``, ``ANNOTATION_UPDATED``,
``ANNOTATIONS_DELETED``, ``TASKS_DELETED``) debounces the deliveries of a burst, merges what they ask for
(:func:`hints_from_event`, ``|`` on :class:`~labelgate.pipeline.sources.label_studio_delivery.Hints`) and calls
:func:`run_label_studio_pass` once per burst::

    hints = hints_from_event(payload_1) | hints_from_event(payload_2)
    summary = run_label_studio_pass("monitor.yaml", project=7, hints=hints)

The pass is an ordinary monitor pass (one transaction, recorded, alerts sent after the commit; a fault records an
``error`` pass and raises): it restates the tasks changed since the watermark, plus the tasks the events named, and
reconciles (finds deleted annotations and tasks) when an event deleted something. Without any webhook a scheduled
``labelgate monitor`` pass does the same reading; webhooks only make it sooner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from labelgate.errors import InputError, Reason
from labelgate.monitor import intake
from labelgate.monitor.engine import Monitor
from labelgate.pipeline.sources.deliveries import Delivery
from labelgate.pipeline.sources.label_studio_delivery import Hints

#: Webhook actions whose payload names the annotations' tasks.
ANNOTATION_ACTIONS = frozenset({"ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED"})
#: Webhook actions that delete what Label Studio's change listing cannot show.
DELETING_ACTIONS = frozenset({"ANNOTATIONS_DELETED", "TASKS_DELETED"})


class _HintedMonitor(Monitor):
    """A monitor whose next pass also restates the hinted tasks (and reconciles when asked)."""

    def __init__(self, config: Any, hints: Hints) -> None:
        super().__init__(config)
        self.hints = hints

    def collect(self) -> list[Delivery]:
        return intake.collect(self.engine, self.cfg, self.hints)


def run_label_studio_pass(config: Any, project: int | None = None, *, hints: Hints | None = None,
                          tasks: Iterable[int] = (), reconcile: bool = False,
                          send_alerts: bool = True) -> dict[str, Any]:
    """Run one monitor pass of a configuration whose source is a Label Studio project.

    Parameters
    ----------
    config : path, mapping or MonitorConfig
        The monitor configuration (``monitor.source.kind: label_studio``).
    project : int, optional
        The project the event came from; refused when it is not the configuration's (a receiver serving several
        projects keeps one configuration per project).
    hints : Hints, optional
        What the events of a burst asked for (:func:`hints_from_event`).
    tasks : iterable of int
        More tasks to restate.
    reconcile : bool, default False
        Look for deleted annotations and tasks in this pass whatever ``reconcile_every`` says.
    send_alerts : bool, default True

    Returns
    -------
    dict
        The pass summary (:meth:`labelgate.monitor.Monitor.merge`); its deliveries count ``n_new``, ``n_replaced``
        and ``n_removed`` judgements.

    Raises
    ------
    InputError
        The configuration's source is not Label Studio, or is another project; the server failed (the pass is
        recorded as an error first).
    """
    combined = (hints or Hints()) | Hints(frozenset(int(t) for t in tasks), reconcile)
    monitor = _HintedMonitor(config, combined)
    src = monitor.cfg.monitor.source
    if src.kind != "label_studio":
        raise InputError(f"Monitor {monitor.name!r} reads a {src.kind!r} source, not a Label Studio project.",
                         Reason.INVALID_PARAMETER, setting="monitor.source.kind")
    if project is not None and int(project) != src.project:
        raise InputError(f"The event is about Label Studio project {project}, but monitor {monitor.name!r} reads "
                         f"project {src.project}.", Reason.INVALID_PARAMETER, project=project)
    return monitor.run_pass(send_alerts=send_alerts)


def hints_from_event(payload: Mapping[str, Any]) -> Hints:
    """What one Label Studio webhook delivery asks of the next pass.

    ``ANNOTATION_CREATED`` / ``ANNOTATIONS_CREATED`` / ``ANNOTATION_UPDATED``: restate the annotations' tasks (the
    incremental reading would find them too; naming them spares waiting for the watermark). ``ANNOTATIONS_DELETED``
    (its payload holds only annotation ids): reconcile. ``TASKS_DELETED``: restate those tasks (gone: their judgements
    are removed) and reconcile. Other actions: a plain pass.

    Examples
    --------
    >>> hints_from_event({"action": "ANNOTATION_UPDATED", "annotation": {"id": 5, "task": 12}, "task": {"id": 12}})
    Hints(tasks=frozenset({12}), reconcile=False)
    >>> hints_from_event({"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 5}]}).reconcile
    True
    """
    action = str(payload.get("action") or "")
    tasks: set[int] = set()
    if action in ANNOTATION_ACTIONS:
        found = payload.get("annotation") or payload.get("annotations") or []
        for annotation in found if isinstance(found, list) else [found]:
            tasks |= _task_ids([annotation.get("task")] if isinstance(annotation, Mapping) else [])
        task = payload.get("task")
        tasks |= _task_ids(task if isinstance(task, list) else [task])
    elif action == "TASKS_DELETED":
        tasks |= _task_ids(payload.get("tasks") or [])
    return Hints(frozenset(tasks), action in DELETING_ACTIONS)


def _task_ids(values: Iterable[Any]) -> set[int]:
    out = set()
    for value in values:
        ident = value.get("id") if isinstance(value, Mapping) else value
        if isinstance(ident, int) and not isinstance(ident, bool):
            out.add(ident)
        elif isinstance(ident, str) and ident.isdigit():
            out.add(int(ident))
    return out
