"""Label Studio annotations as LabelGate's long table: a project on a server, or a JSON export file.

One LabelGate question is one control of the project's labeling config, chosen by its ``name`` (the ``from_name`` of
the annotations' results; :mod:`.labeling_config` maps it); several controls are read in one pass over the tasks (a
``question`` column then names each judgement's control). Annotations become judgements: item = task id, rater =
annotator id (``completed_by``), label = the control's value; the trusted pool is the annotations marked
``ground_truth``, or the annotations of a list of annotator ids or e-mails. Cancelled (skipped) annotations, drafts,
and annotations that do not answer a control are left out and counted in ``df.attrs["label_studio"]``.

A :class:`Selection` narrows what is read: some tasks (ids), a data manager view, or a time range of the
annotations' ``updated_at`` (or ``created_at``). Tasks are fetched page by page and each page is turned into rows
before the next is asked for, so a project is never held twice in memory. Every failure is an
:class:`~labelgate.errors.InputError` naming the project, the control and, for a bad annotation, its id (the gate
turns it into ERROR, never ACCEPT).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.label_studio.client import DEFAULT_TOKEN_ENV, PAGE_SIZE, LabelStudioClient
from labelgate.pipeline.sources.label_studio.labeling_config import (
    KINDS,
    VALUE_KEYS,
    Control,
    config_text,
    control_names,
    parse_control,
)
from labelgate.pipeline.sources.label_studio.regions import regions
from labelgate.pipeline.sources.label_studio.selection import Selection, as_time, selection_of_url

if TYPE_CHECKING:
    from labelgate.pipeline.config import Columns

#: The value of ``trusted`` that selects the annotations marked ground truth.
GROUND_TRUTH = "ground_truth"
#: The columns after the four of the long table.
EXTRA_COLUMNS = ("annotation_id", "updated_at")
#: The columns of a region after those: a span's offsets and its text's length, a box's percent coordinates (the
#: defaults of a question's ``spans`` / ``boxes`` columns).
REGION_COLUMNS = {"spans": ("start", "end", "length"), "boxes": ("x", "y", "width", "height")}
#: The column naming each judgement's control when several are read.
QUESTION_COLUMN = "question"
#: Controls read at most in one reading.
MAX_CONTROLS = 100
_PROJECT_URL = re.compile(r"^(?P<base>https?://[^/?#]+(?:/[^?#]*?)?)/projects/(?P<id>\d+)(?:/data)?/?"
                          r"(?:\?(?P<query>[^#]*))?(?:#.*)?$")


@dataclass
class _Counts:
    """What was read and what was left out (``df.attrs["label_studio"]``)."""

    tasks: int = 0
    annotations: int = 0
    judgements: int = 0
    cancelled: int = 0
    drafts: int = 0
    without_answer: int = 0
    outside_selection: int = 0
    trusted: int = 0

    def report(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class _Reading:
    """One reading of a project or export: the controls, the pool rule, the selection, the counts.

    ``several``: the rows carry the control's name (a ``question`` column), as when a list of controls was asked for.
    """

    specs: list[Control]
    names: frozenset[str]
    trusted: frozenset[str] | None
    what: str
    selection: Selection
    several: bool = False
    counts: _Counts = field(default_factory=_Counts)


def control_list(control: str | Sequence[str]) -> list[str]:
    """The controls asked for: one name, or a non-empty list of distinct names.

    Raises
    ------
    InputError
        An empty list, a repeated or empty name, or more than :data:`MAX_CONTROLS` names.

    Examples
    --------
    >>> control_list("sentiment"), control_list(["sentiment", "stars"])
    (['sentiment'], ['sentiment', 'stars'])
    """
    names = [control] if isinstance(control, str) else [str(c) for c in control]
    if not names or len(names) > MAX_CONTROLS or len(set(names)) != len(names) or not all(n.strip() for n in names):
        raise InputError(f"The Label Studio control is one name or a list of 1 to {MAX_CONTROLS} distinct names; got "
                         f"{control!r}.", Reason.INVALID_PARAMETER, control=str(control)[:200])
    return names


def read_label_studio(source: str | Path, control: str | Sequence[str], trusted: str | Sequence[Any] = GROUND_TRUTH, *,
                      project: int | None = None, label_config: str | Path | None = None,
                      token_env: str = DEFAULT_TOKEN_ENV, columns: Columns | None = None,
                      page_size: int = PAGE_SIZE, timeout: float = 30.0, selection: Selection | None = None
                      ) -> pd.DataFrame:
    """The judgements of one or several controls of a Label Studio project, as LabelGate's long table.

    Parameters
    ----------
    source : str or Path
        A JSON export file (``Export → JSON`` or ``GET /api/projects/{id}/export?exportType=JSON``), a project URL
        ``http(s)://host:port/projects/<id>`` (its query may select tasks, a view or a time range, see
        :func:`selection_of_url`), or the server's base URL with ``project``.
    control : str or sequence of str
        The ``name`` of the control (the results' ``from_name``), or a list of them: one question per control, all
        read in one pass over the tasks, each judgement's control in a ``question`` column.
    trusted : "ground_truth" or sequence, default "ground_truth"
        The trusted pool: the annotations marked ground truth, or those of these annotators (user ids, or e-mails:
        for a server, the e-mails are looked up in ``/api/users``).
    project : int, optional
        The project id, with a base URL (a project URL carries its own).
    label_config : str or Path, optional
        The labeling config (XML text, or an ``.xml`` file): needed for an export file, which does not hold it;
        for a server it overrides the project's.
    token_env : str, default "LABEL_STUDIO_TOKEN"
        The environment variable holding the server's token (legacy or personal access token).
    columns : labelgate.pipeline.config.Columns, optional
        Column names of the table (default ``item_id``, ``rater_id``, ``label``, ``pool``).
    page_size : int, default 100
        Tasks per request.
    timeout : float, default 30
        Seconds to wait for each answer of the server.
    selection : Selection, optional
        Only some tasks, a view or a time range (a URL's query is used when this is None).

    Returns
    -------
    DataFrame
        ``item_id`` (task id), ``rater_id`` (annotator id), ``label`` (the control's value: text for Choices and
        Taxonomy, an integer for Rating, a number for Number), ``pool`` (``"trusted"`` / ``"crowd"``), with a list of
        controls ``question`` (the control's name), then ``annotation_id`` and ``updated_at``; ids as text.
        ``df.attrs["label_studio"]`` holds the source, the control (its name or list of names; ``type``, ``level``
        and ``categories`` for one control, ``controls``: ``{name: {type, level, categories}}`` always), the server
        and project (None for a file) and the counts (``tasks``, ``annotations``, ``judgements``, ``cancelled``,
        ``drafts``, ``without_answer`` — an annotation leaving a control unanswered, counted per control —,
        ``outside_selection``, ``trusted``).

    Raises
    ------
    InputError
        Missing file or token, unparsable export, unknown control, several choices in a single-choice answer, a bad
        region (several labels, a span outside its text, a rotated box or one outside the image), a result of an
        unknown ``from_name`` or a label outside the config's choices (naming the annotation and the task), the
        server down or answering 401 / 403 / 404.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> xml = '<View><Choices name="s" toName="t"><Choice value="neg"/><Choice value="pos"/></Choices></View>'
    >>> ann = lambda i, u, v, gt=False: {"id": i, "completed_by": u, "ground_truth": gt, "was_cancelled": False,
    ...     "result": [{"from_name": "s", "type": "choices", "value": {"choices": [v]}}]}
    >>> tasks = [{"id": 1, "annotations": [ann(10, 1, "pos", True), ann(11, 2, "neg")], "drafts": []}]
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "export.json"
    >>> _ = p.write_text(json.dumps(tasks))
    >>> df = read_label_studio(p, "s", label_config=xml)
    >>> df[["item_id", "rater_id", "label", "pool"]].values.tolist()
    [['1', '1', 'pos', 'trusted'], ['1', '2', 'neg', 'crowd']]
    """
    several = not isinstance(control, str)
    report: dict[str, Any] = {}
    pages = list(iter_annotations(source, control, trusted, project=project, label_config=label_config,
                                  token_env=token_env, columns=columns, page_size=page_size, timeout=timeout,
                                  selection=selection, report=report))
    names = _names(columns)
    frame = pd.concat(pages, ignore_index=True) if pages else _frame([], names, report["controls"], several)
    frame.attrs["label_studio"] = report
    return frame


def iter_annotations(source: str | Path, control: str | Sequence[str], trusted: str | Sequence[Any] = GROUND_TRUTH, *,
                     project: int | None = None, label_config: str | Path | None = None,
                     token_env: str = DEFAULT_TOKEN_ENV, columns: Columns | None = None,
                     page_size: int = PAGE_SIZE, timeout: float = 30.0, selection: Selection | None = None,
                     updated_after: datetime | str | None = None, updated_before: datetime | str | None = None,
                     report: dict[str, Any] | None = None) -> Iterator[pd.DataFrame]:
    """The judgements of one or several controls, one page of tasks at a time (the monitor's incremental reading).

    Takes the arguments of :func:`read_label_studio`, and yields one DataFrame per page of tasks (the columns of
    :func:`read_label_studio`'s table; a page without a judgement is skipped), so that a large project is never held
    in memory at once.

    Parameters
    ----------
    updated_after, updated_before : datetime or ISO text, optional
        Only the annotations (both pools) whose ``updated_at`` is in ``[updated_after, updated_before)``: what changed
        since a watermark. An updated annotation keeps its ``annotation_id`` and comes back with its new label and
        ``updated_at``, so a reader keyed by ``annotation_id`` replaces the earlier judgement. Deleted annotations do
        not come back: compare the ids of a full reading (no time range) to find them. Overrides the time range of
        ``selection`` (its tasks and view are kept).
    report : dict, optional
        Filled, once the iteration is over, with what ``df.attrs["label_studio"]`` holds in
        :func:`read_label_studio` (the control and the counts).

    Yields
    ------
    DataFrame
        The judgements of one page of tasks.

    Raises
    ------
    InputError
        As :func:`read_label_studio`; raised when the page that holds the fault is read.
    """
    text = str(source)
    wanted, several = control_list(control), not isinstance(control, str)
    match = _PROJECT_URL.match(text)
    if selection is None:
        selection = selection_of_url(match.group("query") or "") if match else Selection()
    if updated_after is not None or updated_before is not None:
        selection = Selection(tasks=selection.tasks, view=selection.view, time_field="updated_at",
                              after=None if updated_after is None else as_time(updated_after, "updated_after"),
                              before=None if updated_before is None else as_time(updated_before, "updated_before"))
    names = _names(columns)
    if match is not None or text.startswith(("http://", "https://")):
        base = match.group("base") if match else text.rstrip("/")
        pid = int(match.group("id")) if match else project
        if pid is None:
            raise InputError(f"The Label Studio URL {text!r} names no project: use .../projects/<id> or pass "
                             "'project'.", Reason.MISSING_SETTING, control=control)
        with LabelStudioClient(base, token_env, timeout=timeout) as client:
            what = f"Label Studio project {pid} at {base}"
            xml = config_text(label_config) if label_config is not None else client.project(pid)["label_config"]
            reading = _Reading(_specs(xml, wanted, what), control_names(xml, what),
                               _trusted_ids(trusted, client), what, selection, several)
            pages = client.tasks(pid, page_size, task_ids=selection.tasks, view=selection.view,
                                 filters=_server_filter(selection))
            yield from _frames(pages, reading, names)
        server: dict[str, Any] = {"server": base, "project": pid}
    else:
        path = Path(source)
        what = f"Label Studio export {path.name}"
        if label_config is None:
            raise InputError(f"Reading the {what} needs the project's labeling config: pass 'label_config' (XML "
                             "text or an .xml file; Label Studio shows it under Settings → Labeling Interface → "
                             "Code).", Reason.MISSING_SETTING, file=str(path), control=control)
        xml = config_text(label_config)
        reading = _Reading(_specs(xml, wanted, what), control_names(xml, what),
                           _trusted_ids(trusted, None), what, selection, several)
        yield from _frames(_export_tasks(path, what, selection), reading, names)
        server = {"server": None, "project": None}
    if report is not None:
        report.update(_described(reading.specs, several))
        report.update({"source": what, **server, "selection": selection.describe() or None,
                       **reading.counts.report()})


def _specs(xml: str, wanted: list[str], what: str) -> list[Control]:
    """The controls asked for; a region control (spans, boxes: one row per region) only on its own."""
    specs = [parse_control(xml, c, what) for c in wanted]
    regions = [s.name for s in specs if s.kind != "labels"]
    if regions and len(specs) > 1:
        raise InputError(f"The controls {regions} of {what} hold regions (spans or boxes, one row per region): read "
                         "each in a source of its own, not in a list of controls (a gate's batch: 'control: "
                         f"{regions[0]}'; the monitor reads each question's region control on its own).",
                         Reason.INVALID_PARAMETER, project=what, control=regions[0])
    return specs


def _described(specs: list[Control], several: bool) -> dict[str, Any]:
    """The controls of a reading, as ``df.attrs["label_studio"]`` holds them."""
    out: dict[str, Any] = {"controls": {s.name: {"type": s.type, "level": s.level, "categories": s.categories,
                                                 **({"data_key": s.data_key} if s.data_key else {})}
                                        for s in specs}}
    if several:
        return {"control": [s.name for s in specs], **out}
    spec = specs[0]
    return {"control": spec.name, "type": spec.type, "level": spec.level, "categories": spec.categories, **out}


def _server_filter(selection: Selection) -> dict[str, Any] | None:
    """A data manager filter narrowing the tasks of a time range on the server (the range is checked again on every
    annotation: the filter only spares reading tasks without any annotation work since ``after``)."""
    if selection.after is None or selection.tasks is not None or selection.view is not None:
        return None
    # A task's updated_at moves with every annotation saved on it; its completed_at is its latest annotation.
    after = selection.after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # the only form the server parses
    return {"conjunction": "and", "items": [{"filter": "filter:tasks:updated_at", "operator": "greater_or_equal",
                                             "type": "Datetime", "value": after}]}


def _frames(pages: Iterable[list[dict[str, Any]]], reading: _Reading, names: list[str]) -> Iterator[pd.DataFrame]:
    for page in pages:
        rows: list[tuple[Any, ...]] = []
        for task in page:
            _task_rows(task, reading, rows)
        if rows:
            yield _frame(rows, names, {s.name: {"level": s.level, "type": s.type} for s in reading.specs},
                         reading.several)


def _frame(rows: list[tuple[Any, ...]], names: list[str], controls: Mapping[str, Mapping[str, Any]],
           several: bool) -> pd.DataFrame:
    region = REGION_COLUMNS.get(KINDS.get(str(next(iter(controls.values())).get("type")), ""), ())
    frame = pd.DataFrame(rows, columns=[*names, *([QUESTION_COLUMN] if several else []), *EXTRA_COLUMNS, *region])
    if not several and next(iter(controls.values()))["level"] == "interval":  # several: labels of mixed kinds
        frame[names[2]] = pd.to_numeric(frame[names[2]]).astype("float64")
    if region:  # offsets as integers, coordinates as floats; empty where the annotation marked nothing
        kind = "Int64" if region == REGION_COLUMNS["spans"] else "float64"
        frame = frame.astype({column: kind for column in region})
    return frame


def _names(columns: Columns | None) -> list[str]:
    if columns is None:
        return ["item_id", "rater_id", "label", "pool"]
    return [columns.item, columns.rater, columns.label, columns.pool]


def _export_tasks(path: Path, what: str, selection: Selection) -> Iterator[list[dict[str, Any]]]:
    # The export is one JSON list: read once, handed over as a single page (no second copy is made from it).
    try:
        with path.open(encoding="utf-8") as handle:
            tasks = json.load(handle)
    except FileNotFoundError:
        raise InputError(f"The {what} does not exist ({str(path)!r}).", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"The {what} is not a readable JSON export ({exc}).", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    if not isinstance(tasks, list):
        raise InputError(f"The {what} is not a Label Studio JSON export (a list of tasks); export as JSON, not "
                         "JSON-MIN or CSV.", Reason.UNREADABLE_INPUT, file=str(path))
    if selection.view is not None:
        raise InputError(f"A data manager view selects tasks on a server, not in the {what}: select by tasks or "
                         "time range.", Reason.INVALID_PARAMETER, file=str(path))
    if selection.tasks is not None:
        wanted = set(selection.tasks)
        tasks = [t for t in tasks if isinstance(t, dict) and t.get("id") in wanted]
    yield tasks


def _trusted_ids(trusted: str | Sequence[Any], client: LabelStudioClient | None) -> frozenset[str] | None:
    """None for ground truth, else the trusted annotators' ids as text (e-mails looked up on the server)."""
    if isinstance(trusted, str):
        if trusted == GROUND_TRUTH:
            return None
        trusted = [trusted]
    wanted = {str(t) for t in trusted}
    emails = {t for t in wanted if "@" in t}
    if emails and client is not None:
        for user in client.users():
            if str(user.get("email")) in emails:
                wanted.add(str(user.get("id")))
    return frozenset(wanted)


def _task_rows(task: Mapping[str, Any], reading: _Reading, rows: list[tuple[Any, ...]]) -> None:
    counts, selection = reading.counts, reading.selection
    counts.tasks += 1
    counts.drafts += len(task.get("drafts") or ())
    found: list[tuple[tuple[Any, ...], bool, Mapping[str, Any]]] = []
    for annotation in task.get("annotations") or ():
        counts.annotations += 1
        if annotation.get("was_cancelled"):
            counts.cancelled += 1
            continue
        for result in annotation.get("result") or ():
            if result.get("from_name") not in reading.names:
                raise InputError(f"Annotation {annotation.get('id')} (task {task.get('id')}) of {reading.what} has a "
                                 f"result of {result.get('from_name')!r}, a control the labeling config does not "
                                 f"have (reading {', '.join(repr(s.name) for s in reading.specs)}); is the "
                                 "labeling config the project's?",
                                 Reason.MISSING_COLUMN, project=reading.what, control=result.get("from_name"),
                                 annotation=annotation.get("id"), task=task.get("id"))
        user = annotation.get("completed_by")
        rater = str(user.get("id") if isinstance(user, Mapping) else user)
        email = str(user.get("email")) if isinstance(user, Mapping) else None
        if reading.trusted is None:
            is_trusted = bool(annotation.get("ground_truth"))
        else:
            is_trusted = rater in reading.trusted or (email is not None and email in reading.trusted)
        for spec in reading.specs:
            results = [r for r in annotation.get("result") or () if r.get("from_name") == spec.name]
            key = (str(task.get("id")), rater)
            pool = "trusted" if is_trusted else "crowd"
            tail = (*((spec.name,) if reading.several else ()), str(annotation.get("id")), annotation.get("updated_at"))
            if spec.kind != "labels":  # one row per region; an annotation that marked none: one empty row
                for label, geometry in regions(results, spec, reading.what, annotation, task):
                    found.append(((*key, label, pool, *tail, *geometry), is_trusted, annotation))
                continue
            if not results and spec.level == "set":  # nothing chosen: the empty set, "none applies"
                found.append(((*key, (), pool, *tail), is_trusted, annotation))
                continue
            if not results:
                counts.without_answer += 1
                continue
            label = _label(results[0], spec, reading.what, annotation, task)
            found.append(((*key, label, pool, *tail), is_trusted, annotation))
    if selection.timed:
        kept = [(row, t, a) for row, t, a in found if (t and selection.trusted_any_time) or selection.in_range(a)]
        if selection.trusted_any_time and not any(not t for _, t, _ in kept):
            kept = []  # a task without crowd work in the range is not in the batch
        counts.outside_selection += len(found) - len(kept)
        found = kept
    for row, is_trusted, _ in found:
        counts.trusted += is_trusted
        counts.judgements += 1
        rows.append(row)


def _label(result: Mapping[str, Any], spec: Control, what: str, annotation: Mapping[str, Any],
           task: Mapping[str, Any]) -> Any:
    where = f"annotation {annotation.get('id')} (task {task.get('id')}) of {what}, control {spec.name!r}"
    context = {"annotation": annotation.get("id"), "task": task.get("id"), "control": spec.name, "project": what}
    value = (result.get("value") or {}).get(VALUE_KEYS[spec.type])
    if spec.level == "set":  # the set chosen, as a tuple (a Taxonomy's paths joined by " / ")
        if not isinstance(value, list):
            raise InputError(f"The answer of {where} is {value!r}, not a list of choices.", Reason.INVALID_PARAMETER,
                             value=value, **context)
        chosen = tuple(" / ".join(map(str, v)) if isinstance(v, list) else v for v in value)
        outside = [v for v in chosen if spec.categories is not None and v not in spec.categories]
        if outside:
            raise InputError(f"The answer {value!r} of {where} holds {outside}, not among the labeling config's "
                             f"choices {spec.categories}.", Reason.UNKNOWN_CATEGORY, value=value, **context)
        return chosen
    if spec.type in ("Choices", "Taxonomy"):
        if not isinstance(value, list) or len(value) != 1:
            raise InputError(f"The answer of {where} is {value!r}, not exactly one choice (the control is "
                             "single-choice).", Reason.INVALID_PARAMETER, value=value, **context)
        value = value[0]
        if spec.type == "Taxonomy":
            value = " / ".join(map(str, value)) if isinstance(value, list) else str(value)
    elif spec.type == "Rating":
        value = int(value) if isinstance(value, (int, float)) and float(value).is_integer() else value
    elif not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"The answer of {where} is {value!r}, not a number.", Reason.NON_NUMERIC_VALUE,
                         value=value, **context)
    if spec.categories is not None and value not in spec.categories:
        raise InputError(f"The answer {value!r} of {where} is not one of the labeling config's choices "
                         f"{spec.categories}.", Reason.UNKNOWN_CATEGORY, value=value, **context)
    return value
