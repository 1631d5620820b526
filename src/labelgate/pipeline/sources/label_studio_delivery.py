"""A Label Studio project as the monitor's source: each pass restates the tasks that changed.

Label Studio lists what changed, not what was deleted. A task's ``updated_at`` moves whenever an annotation on it is
created, updated (a new label, turned cancelled, marked or unmarked ground truth) or deleted — one by one (the API's
``DELETE /api/annotations/{id}``, the labelling interface) or in bulk from the data manager; in Label Studio 1.23.2
deleting an annotation saves its task. So a pass reads the tasks with ``updated_at >=`` the watermark, each with all its
annotations as they are now, and hands them to the monitor as a
:func:`~labelgate.pipeline.sources.deliveries.restatement`: an updated annotation replaces the earlier judgement, a
deleted or cancelled one removes it (an annotator's second annotation of a task deleted: the first one counts
again). What does not move any task's ``updated_at`` — a task deleted — is found by :meth:`ProjectReader.vanished`:
the project's annotated tasks and their annotators, compared with the raters the monitor holds for each task; a task
whose stored raters are not all among its annotators any more (or that is gone) is restated. A webhook receiver can
name tasks to restate (:class:`Hints`).

Judgements: item = task id, rater = annotator id, label = the control's value (one column per control the monitor's
questions read, all controls read in one pass over the tasks; a span or box question's control read on its own, one
row per region), pool = the source's ``trusted`` rule; one judgement (or one annotation's regions) per (task,
annotator, pool): when an annotator has several annotations of one task, the most recently updated one counts.
The judgement's time is the annotation's ``updated_at`` (column ``columns.timestamp``, when set). The annotations are
read with :func:`labelgate.pipeline.sources.label_studio.iter_annotations` (one page of tasks at a time). Each
question is checked against the project's labeling config at every pass (its level one the control supports, stated
when the control is not nominal; its categories the config's), so a relabelled project config fails the pass with a
message naming the control instead of feeding the monitor labels it does not know.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.deliveries import Delivery, now_us, parse_timestamps, restatement
from labelgate.pipeline.sources.label_studio import (
    DEFAULT_TOKEN_ENV,
    PAGE_SIZE,
    LabelStudioClient,
    Selection,
    iter_annotations,
    parse_control,
)
from labelgate.pipeline.sources.label_studio.labeling_config import question_categories
from labelgate.pipeline.sources.label_studio.reader import QUESTION_COLUMN
from labelgate.pipeline.sources.pools import question_value

#: Tasks listed per request when only their ids, times and annotators are read.
LIST_PAGE_SIZE = 1000
#: Tasks restated at most in one pass (a larger change is restated over the next passes, oldest first).
MAX_TASKS_PER_PASS = 100_000
#: The watermark stays this far behind the time a pass started listing (microseconds): a task updated while the
#: listing pages through the project may be missed by it, and is read again by the next passes.
SETTLE_US = 120_000_000


@dataclass(frozen=True)
class Hints:
    """What a caller (a webhook receiver) asks the next pass to do beyond the incremental reading.

    Attributes
    ----------
    tasks : frozenset of int
        Tasks to restate whatever their ``updated_at`` (``ANNOTATION_*`` and ``TASKS_DELETED`` events name them).
    reconcile : bool
        Look for deleted annotations and tasks in this pass (``ANNOTATIONS_DELETED`` events name only annotation ids).
    """

    tasks: frozenset[int] = field(default_factory=frozenset)
    reconcile: bool = False

    def __or__(self, other: Hints) -> Hints:
        """Both hints at once (a debounced receiver merges the events of a burst)."""
        return Hints(self.tasks | other.tasks, self.reconcile or other.reconcile)


class ProjectReader:
    """The monitor's reading of its Label Studio project (``monitor.source``, kind ``label_studio``).

    Parameters
    ----------
    cfg : MonitorConfig
        Its source names the project, the server URL's and token's environment variables, the control and the
        trusted pool; each question reads the control named by its ``label_column``, else ``source.control``.
    timeout : float, default 30
        Seconds to wait for each answer of the server.

    Raises
    ------
    InputError
        The server URL's variable is unset, a question has no control, contradicts the labeling config (level,
        categories) or names a control the config does not have, or the server fails (401 / 403 / 404, down).
    """

    def __init__(self, cfg: MonitorConfig, *, timeout: float = 30.0) -> None:
        src = cfg.monitor.source
        self.cfg, self.project, self.timeout = cfg, int(src.project or 0), timeout
        self.token_env = src.token_env or DEFAULT_TOKEN_ENV
        self.base = os.environ.get(src.url_env or "", "").strip().rstrip("/")
        if not self.base:
            raise InputError(
                f"The environment variable {src.url_env!r} (the Label Studio server URL of monitor "
                f"{cfg.monitor.name!r}) is not set.", Reason.MISSING_SETTING, env=src.url_env,
            )
        self.controls: dict[str, str] = {}  # label column -> control name
        for question in cfg.questions:
            control = question.label_column or src.control
            if not control:
                raise InputError(
                    f"Question {question.name!r} of monitor {cfg.monitor.name!r} reads no Label Studio control: set "
                    "monitor.source.control, or the question's label_column to the control's name.",
                    Reason.MISSING_SETTING, question=question.name,
                )
            self.controls[cfg.label_column(question)] = control
        self.what = f"Label Studio project {self.project} at {self.base}"
        self.listed_at: int | None = None
        self._client = LabelStudioClient(self.base, self.token_env, timeout=timeout)
        try:
            self._check_questions()
        except BaseException:
            self._client.close()
            raise

    def _check_questions(self) -> None:
        """Every question against the control it reads in the project's labeling config (read once per pass)."""
        xml = self._client.project(self.project)["label_config"]
        for question in self.cfg.questions:
            spec = parse_control(xml, self.controls[self.cfg.label_column(question)], self.what)
            if spec.kind != question.kind:  # spans are read from a Labels control, labels from any other
                raise InputError(
                    f"Question {question.name!r} is 'kind: {question.kind}', but control {spec.name!r} of "
                    f"{self.what} is a {spec.type} ({spec.kind}): set the question's kind to {spec.kind!r}.",
                    Reason.INVALID_PARAMETER, control=spec.name, question=question.name)
            question_categories(spec, question.level, question.categories, question.name, self.what,
                                stated="level" in question.model_fields_set)

    def __enter__(self) -> ProjectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def changed_tasks(self, since_us: int | None) -> dict[int, int]:
        """The tasks whose ``updated_at`` is at or after ``since_us`` (all tasks the first time): id -> updated_at
        in microseconds since the epoch."""
        filters = None
        if since_us is not None:
            # the data manager parses exactly this form (an ISO text with "+00:00" is answered with a 500)
            since = pd.Timestamp(int(since_us), unit="us", tz="UTC").strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            filters = {"conjunction": "and", "items": [{"filter": "filter:tasks:updated_at",
                                                        "operator": "greater_or_equal", "type": "Datetime",
                                                        "value": since}]}
        out: dict[int, int] = {}
        self.listed_at = now_us()
        for page in self._client.tasks(self.project, LIST_PAGE_SIZE, fields="task_only", filters=filters):
            stamps = parse_timestamps(pd.Series([task.get("updated_at") for task in page], dtype=object))
            for task, stamp in zip(page, stamps.tolist(), strict=True):
                if stamp is pd.NA or stamp is None:
                    raise InputError(f"Task {task.get('id')} of {self.what} has no readable updated_at "
                                     f"({task.get('updated_at')!r}).", Reason.UNREADABLE_INPUT, task=task.get("id"))
                if since_us is None or int(stamp) >= since_us:  # the server's filter is checked again
                    out[int(task["id"])] = int(stamp)
        return out

    def vanished(self, stored: Mapping[str, set[str]]) -> set[int]:
        """Tasks among ``stored`` (task id as text -> raters the monitor holds) that lost an annotation or are gone.

        A task is restated when one of its stored raters is no longer among its annotators (``annotators`` of the
        data manager: every annotation's ``completed_by``, cancelled ones included), or when it no longer has any
        annotation or no longer exists. (A deleted annotation also moves its task's ``updated_at``, so the
        incremental reading restates its task even when its annotator keeps another annotation of it.)
        """
        current: dict[str, set[str]] = {}
        annotated = {"conjunction": "and", "items": [{"filter": "filter:tasks:annotators", "operator": "empty",
                                                      "type": "List", "value": False}]}
        for page in self._client.tasks(self.project, LIST_PAGE_SIZE, fields="task_only", filters=annotated):
            for task in page:
                current[str(task.get("id"))] = {str(a) for a in _annotators(task.get("annotators"))}
        return {int(item) for item, raters in stored.items()
                if item.isdigit() and not raters <= current.get(item, set())}

    def restatement(self, tasks: Iterable[int], changed: Mapping[int, int]) -> Delivery:
        """The delivery restating ``tasks``: every current judgement of them, one column per control.

        ``changed`` (:meth:`changed_tasks`) gives the ``updated_at`` of the tasks found by the watermark; the others
        (named by a webhook, or found by :meth:`vanished`) come first. At most :data:`MAX_TASKS_PER_PASS` tasks, the
        least recently updated first; the delivery's watermark is the latest ``updated_at`` it restates (at most
        :data:`SETTLE_US` before the listing started), so the rest come back in the next passes.
        """
        ids = sorted({int(t) for t in tasks}, key=lambda t: (changed.get(t, -1), t))[:MAX_TASKS_PER_PASS]
        watermark = max((changed[t] for t in ids if t in changed), default=None)
        if watermark is not None and self.listed_at is not None:
            watermark = min(watermark, self.listed_at - SETTLE_US)
        frame = self._judgements(ids)
        stamp = "" if watermark is None else pd.Timestamp(watermark, unit="us", tz="UTC").isoformat()
        delivery_id = f"label_studio:{self.project}:{len(ids)} tasks" + (f" to {stamp}" if stamp else "")
        return restatement(delivery_id, frame, [str(t) for t in ids], source_watermark=watermark)

    def _judgements(self, tasks: list[int]) -> pd.DataFrame:
        """The current judgements of ``tasks`` in the monitor's columns: item, rater, pool, time, a label per
        control; one per (task, annotator, pool), the latest updated.

        A ``kind: spans`` / ``kind: boxes`` question reads its ``Labels`` / ``RectangleLabels`` control on its own (a
        region control is never read in a list) and keeps every region of the latest annotation of each (task,
        annotator, pool) — one row per span or box, one row without offsets or coordinates for an annotation that
        marked nothing — with its offsets and its text's length, or its percent coordinates, in the question's
        ``spans`` / ``boxes`` columns, in the order the reader gives them (that of ``lg.read_label_studio``: an
        image's objects are grouped with ties broken by row order); the monitor expands spans into units and regroups
        an image's boxes as the gate does. With region questions the table is long (each row one question's, named in
        ``columns.question`` when there are several questions).
        """
        regions = [q for q in self.cfg.questions if q.kind != "labels"]
        if not regions:
            return self._wide(tasks)
        cols = self.cfg.columns
        parts = []
        for question in self.cfg.questions:
            column = self.cfg.label_column(question)
            long = self._latest(self._read(tasks, self.controls[column]), regions=question.kind != "labels")
            if question.spans is not None:
                long = long.rename(columns={"start": question.spans.start, "end": question.spans.end,
                                            "length": question.spans.length})
            if question.boxes is not None:
                long = long.rename(columns={"x": question.boxes.x, "y": question.boxes.y,
                                            "width": question.boxes.width, "height": question.boxes.height})
            long = long.rename(columns={cols.label: column})
            if cols.question:
                long[cols.question] = question_value(self.cfg, question)
            parts.append(long)
        out = pd.concat(parts, ignore_index=True).drop(columns=["annotation_id", "_n", "updated_at"])
        out[cols.timestamp or "updated_at"] = pd.to_datetime(out.pop("_t").to_numpy(dtype="int64"), unit="us",
                                                             utc=True)
        return out

    def _read(self, tasks: list[int], control: str | list[str]) -> pd.DataFrame:
        """The rows of ``control`` (one name, or a list read in one pass, with a question column) on ``tasks``."""
        cols = self.cfg.columns
        pages = iter_annotations(
            self.base, control, self.cfg.monitor.source.trusted, project=self.project, token_env=self.token_env,
            columns=cols, page_size=PAGE_SIZE, timeout=self.timeout, selection=Selection(tasks=tuple(tasks)),
        ) if tasks else iter(())
        frames = list(pages)
        several = [QUESTION_COLUMN] if isinstance(control, list) else []
        return (pd.concat(frames, ignore_index=True) if frames else
                pd.DataFrame(columns=[cols.item, cols.rater, cols.label, cols.pool, *several, "annotation_id",
                                      "updated_at"]))

    def _latest(self, long: pd.DataFrame, *, regions: bool = False) -> pd.DataFrame:
        """The rows of the latest updated annotation of each (task, annotator, pool), pools named as configured;
        ``_t`` its time in microseconds. One row per key, or every region row of that annotation (``regions``, in the
        order read)."""
        cols, pools = self.cfg.columns, self.cfg.pools
        key = [cols.item, cols.rater, cols.pool]
        long = long.copy()
        long[cols.pool] = long[cols.pool].map({"trusted": pools.trusted, "crowd": pools.crowd})
        order = parse_timestamps(long["updated_at"]).fillna(0).astype("int64")
        number = pd.to_numeric(long["annotation_id"], errors="coerce").fillna(0)
        long = long.assign(_t=order, _n=number).sort_values(["_t", "_n"], kind="stable")
        last = long.drop_duplicates(key, keep="last")
        if not regions:
            return last
        chosen = long[key].merge(last[[*key, "annotation_id"]], on=key, how="left")["annotation_id"]
        return long.loc[(long["annotation_id"].to_numpy() == chosen.to_numpy())].sort_index(kind="stable")

    def _wide(self, tasks: list[int]) -> pd.DataFrame:
        """:meth:`_judgements` of questions without regions: every control in one pass over the tasks, one row per
        (task, annotator, pool) with a column per control."""
        cols = self.cfg.columns
        key = [cols.item, cols.rater, cols.pool]
        time_column = cols.timestamp or "updated_at"
        wide: pd.DataFrame | None = None
        every = self._read(tasks, list(dict.fromkeys(self.controls.values())))
        for column, control in self.controls.items():
            long = self._latest(every.loc[every[QUESTION_COLUMN] == control].drop(columns=[QUESTION_COLUMN]))
            part = long[[*key, cols.label, "_t"]].rename(columns={cols.label: column, "_t": f"_t_{column}"})
            wide = part if wide is None else wide.merge(part, on=key, how="outer")
        assert wide is not None  # a monitor has at least one question
        times = [c for c in wide.columns if c.startswith("_t_")]
        latest = wide[times].astype("float64").max(axis=1)
        out = wide.drop(columns=times).reset_index(drop=True)
        out[time_column] = pd.to_datetime(latest.to_numpy(), unit="us", utc=True)
        return out


def _annotators(value: Any) -> list[Any]:
    """The data manager's ``annotators`` of a task: a list of ids (or of ``{"id": ...}``), or a text of ids.

    Examples
    --------
    >>> _annotators([2, {"id": 3}]), _annotators("2,3"), _annotators(None)
    ([2, 3], ['2', '3'], [])
    """
    if isinstance(value, str):
        return [v for v in value.replace(";", ",").split(",") if v.strip()]
    out = []
    for v in value or ():
        out.append(v.get("id") if isinstance(v, Mapping) else v)
    return out
