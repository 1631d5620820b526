"""The gate's ``format: label_studio`` batch source: its batch (tasks, a view or a time range) and its questions.

A gate's batch is the crowd's annotations of a task filter (``tasks``: ids, or ``view``: a data manager tab) or of a
time range (``annotated_after`` / ``annotated_before`` on ``time_field``), gated against the trusted annotations of
the same tasks whenever they were made. A project URL given as the batch (``labelgate gate --batch URL``, or the
``path`` of a ``labelgate.batch.ready`` event) may carry the same selection in its query
(``.../projects/7?tasks=1,2,3``); it then replaces the configuration's.

The gate's questions read the controls: ``control: sentiment`` is read into the label column (``columns.label``), and
``control: [sentiment, stars]`` into one column per control, named after it, so that each question names its control
in ``label_column`` (the monitor's rule too) and one gate run decides every question. A question's categories come
from the labeling config (the configuration may list them, and must list the config's), its level is one the control
supports, and a question that states no level takes the control's (:func:`gate_categories`).

The batch's id, when the command line gives none (``labelgate gate --config ls.yaml``), is derived from what selects
it (:func:`batch_id_of`): the same selection always keys the same audit-log entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.label_studio.client import DEFAULT_TOKEN_ENV
from labelgate.pipeline.sources.label_studio.labeling_config import Control, question_categories
from labelgate.pipeline.sources.label_studio.reader import EXTRA_COLUMNS, QUESTION_COLUMN, read_label_studio
from labelgate.pipeline.sources.label_studio.selection import Selection, as_time, selection_of_url

if TYPE_CHECKING:
    from labelgate.pipeline.config import Columns, GateConfig, Question, Source


def source_selection(source: Source, given: str | None = None) -> Selection:
    """The batch a ``label_studio`` source selects: the query of the URL ``given`` when it has one, else the source's
    ``tasks`` / ``view`` / ``annotated_after`` / ``annotated_before`` / ``time_field``; the trusted annotations of
    the selected tasks are read whenever they were made."""
    query = urlsplit(given).query if given and given.startswith(("http://", "https://")) else ""
    if query:
        return replace(selection_of_url(query), trusted_any_time=True)
    return Selection(tasks=tuple(source.tasks) if source.tasks is not None else None, view=source.view,
                     after=as_time(source.annotated_after, "annotated_after") if source.annotated_after else None,
                     before=as_time(source.annotated_before, "annotated_before") if source.annotated_before else None,
                     time_field=source.time_field,
                     trusted_any_time=True)


def project_url(given: str | Path | None) -> str | None:
    """``given`` as a URL when it is one (a command line's path collapses ``http://`` to ``http:/``), else None.

    Examples
    --------
    >>> project_url(Path("http://ls:8080/projects/5")), project_url("export.json")
    ('http://ls:8080/projects/5', None)
    """
    text = re.sub(r"^(https?):/(?!/)", r"\1://", str(given)) if given is not None else ""
    return text if text.startswith(("http://", "https://")) else None


def load_label_studio(source: Source, path: str | Path | None, columns: Columns | None, role: str) -> pd.DataFrame:
    """The table of a ``format: label_studio`` source (what :func:`labelgate.pipeline.sources.load_table` reads).

    ``path`` (the command line) or ``source.path`` is an export file or a project URL; without either, the server's
    base URL is read from ``$url_env`` and the project from ``source.project``.
    """
    given = path if path is not None else source.path
    given = project_url(given) or given
    if given is None:
        base = os.environ.get(source.url_env or "", "")
        if not base or source.project is None:
            raise InputError(f"The {role} source 'label_studio' needs 'path' (an export file or a project URL), or "
                             f"'url_env' naming a set environment variable (the server URL) and 'project'; "
                             f"{source.url_env!r} is {'set' if base else 'unset'}, project is {source.project!r}.",
                             Reason.MISSING_SETTING, table=role, env=source.url_env)
        given = f"{base.rstrip('/')}/projects/{source.project}"
    table = read_label_studio(given, source.control or "", source.trusted, project=source.project,
                              label_config=source.label_config, token_env=source.token_env or DEFAULT_TOKEN_ENV,
                              columns=columns, selection=source_selection(source, str(given)))
    return wide(table, source.control, columns) if isinstance(source.control, list) else table


def event_project_url(source: Source, given: str | Path) -> str | None:
    """The project URL an event names as its batch, if the source is ``label_studio`` and ``given`` is a URL; it is
    read only on the configured server (None: ``given`` is not such a URL, and is a file to check against the roots).

    The server is the one of ``source.path`` (a project URL) or of ``$url_env``. A URL of any other server is an
    ``outside_roots`` error, and nothing is fetched: an event sender must not make the gate send the API token to a
    host of its choosing, nor read a project the configuration does not name the server of.

    >>> from labelgate.pipeline.config import Source
    >>> source = Source.model_validate({"format": "label_studio", "control": "mood",
    ...                                 "path": "https://ls.example/projects/3"})
    >>> event_project_url(source, "https://LS.example/projects/3?tasks=1,2")
    'https://LS.example/projects/3?tasks=1,2'
    >>> event_project_url(source, "drop/wk1.csv") is None
    True
    >>> event_project_url(source, "https://elsewhere.example/projects/3")
    Traceback (most recent call last):
    ...
    labelgate.errors.InputError: The Label Studio URL named by the event is not on the configured server ...
    """
    url = project_url(given)
    if source.format != "label_studio" or url is None:
        return None
    configured = project_url(source.path) if source.path else os.environ.get(source.url_env or "", "") or None
    match = re.search(r"/projects/\d+", url)
    server = _normal_server(url[:match.start()] if match else url)
    allowed = _normal_server(re.split(r"/projects/\d+", configured)[0]) if configured else None
    if allowed is None or server != allowed:
        raise InputError("The Label Studio URL named by the event is not on the configured server "
                         f"({allowed or 'none configured: set batch.path to a project URL or url_env'}): it was not "
                         "read.", Reason.OUTSIDE_ROOTS, file=str(given))
    return url


def wide(table: pd.DataFrame, controls: list[str], columns: Columns | None = None) -> pd.DataFrame:
    """The long table of several controls as one row per annotation and one label column per control (named after
    it; empty where the annotation leaves the control unanswered); ``attrs`` are kept.

    Raises
    ------
    InputError
        A control is named like one of the table's other columns.

    Examples
    --------
    >>> long = pd.DataFrame({"item_id": ["1", "1"], "rater_id": ["2", "2"], "label": ["pos", 4],
    ...                      "pool": ["crowd"] * 2, "question": ["sentiment", "stars"],
    ...                      "annotation_id": ["9", "9"], "updated_at": ["t", "t"]})
    >>> wide(long, ["sentiment", "stars", "score"]).values.tolist()
    [['1', '2', 'crowd', '9', 't', 'pos', 4, nan]]
    """
    names = ["item_id", "rater_id", "label", "pool"] if columns is None else \
        [columns.item, columns.rater, columns.label, columns.pool]
    key = [names[0], names[1], names[3], *EXTRA_COLUMNS]
    clash = sorted(set(controls) & set(key))
    if clash:
        raise InputError(f"The Label Studio controls {clash} are named like the table's columns {key}; rename the "
                         "table's columns (config 'columns').", Reason.INVALID_PARAMETER, control=clash[0])
    labels = table.pivot(index="annotation_id", columns=QUESTION_COLUMN, values=names[2])
    rows = table.drop(columns=[names[2], QUESTION_COLUMN]).drop_duplicates("annotation_id")
    out = rows.set_index("annotation_id").join(labels.reindex(columns=list(controls)).astype(object)).reset_index()
    out = out[[*key, *controls]]
    out.columns.name = None
    out.attrs = dict(table.attrs)
    return out


def batch_id_of(source: Source) -> str:
    """The id of the batch a ``label_studio`` source selects, derived from what selects it (its project or export,
    controls, tasks, view, time range and trusted pool): the same selection always gets the same id.

    ``ls-<project>`` (or the export's stem) for the whole project, then ``-tasks-<first>-<last>-<n>``, ``-view-<id>``,
    ``-<time field>-<after>-<before>``, and a digest of the whole selection (so that two task lists with the same
    ends differ). The digest names the server by its URL (scheme and host in lower case, no trailing slash; for a
    configuration, the value of ``url_env``, not the variable's name), an export by its path as given, and the tasks
    sorted, so a project URL and a configuration that select the same tasks of the same server get one id, and the
    webhook receiver's ``labelgate.batch.ready`` events carry that id too.

    Examples
    --------
    >>> from labelgate.pipeline.config import Source
    >>> batch_id_of(Source(format="label_studio", control="s", url_env="LS", project=5, tasks=[7, 3, 9]))
    'ls-5-tasks-3-9-3-3fb44d0bd0'
    >>> same = [batch_id_of(Source(format="label_studio", control="s", path=url))
    ...         for url in ("http://LS:8080/projects/5/?tasks=9,3,7", "http://ls:8080/projects/5?tasks=3,7,9")]
    >>> same[0] == same[1]
    True
    >>> batch_id_of(Source(format="label_studio", control="s", url_env="LS", project=5, view=2,
    ...                    annotated_after="2026-11-24T00:00:00Z"))
    'ls-5-view-2-updated_at-20261124T000000Z-now-441c04829e'
    """
    given = project_url(source.path)
    match = re.search(r"/projects/(\d+)", given or "")
    export: str | None = None
    if given and match:  # a project URL: its server and project (the selection in its query is read below)
        server, project = given[:match.start()], int(match.group(1))
    elif source.path:  # an export file: named by its path as given (two folders' exports are two batches)
        server, project, export = None, None, Path(source.path).as_posix()
    else:  # the server in the environment: the batch is named by the server, not by the variable's name
        server, project = os.environ.get(source.url_env or "", "").strip() or None, source.project
    where = (f"ls-{project}" if export is None else
             "ls-" + re.sub(r"[^A-Za-z0-9_-]+", "_", Path(export).name.split(".")[0])[:40])
    chosen = source_selection(source, given)
    tasks = sorted(set(chosen.tasks or ()))  # the same tasks in any order are the same batch
    parts = [where]
    if tasks:
        parts.append(f"tasks-{tasks[0]}-{tasks[-1]}-{len(tasks)}")
    if chosen.view is not None:
        parts.append(f"view-{chosen.view}")
    if chosen.timed:
        stamp = [t.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ") if t else edge
                 for t, edge in ((chosen.after, "start"), (chosen.before, "now"))]
        parts.append(f"{chosen.time_field}-{stamp[0]}-{stamp[1]}")
    what = {"server": _normal_server(server), "project": project, "export": export, "control": source.control,
            "trusted": source.trusted, "tasks": tasks, "view": chosen.view, "time_field": chosen.time_field,
            "after": chosen.after.astimezone(UTC).isoformat() if chosen.after else None,
            "before": chosen.before.astimezone(UTC).isoformat() if chosen.before else None}
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return "-".join([*parts, digest])


def _normal_server(url: str | None) -> str | None:
    """A server URL in one spelling: scheme and host in lower case, no trailing slash."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def gate_categories(config: GateConfig, table: pd.DataFrame) -> dict[str, Any] | None:
    """The categories of the gate's questions over a Label Studio table: the labeling config's, in its order.

    Each question reads the control its label column names: with one ``control``, the label column
    (``columns.label``); with a list, the column named after the control (``label_column: <control>``).

    Parameters
    ----------
    config : GateConfig
        A configuration whose batch source is ``format: label_studio``.
    table : DataFrame
        The table read from it (its ``attrs["label_studio"]`` names the controls, their types and categories).

    Returns
    -------
    dict or None
        The categories of each question, by name (None for a question of a ``Number``); None when the table was
        not read from Label Studio.

    Raises
    ------
    InputError
        A question reads no control of the source (the message lists them), its level is not one the control
        supports or is not stated for a control that is not nominal, or its listed categories are not the config's.
    """
    # here, not at the top: the config models need the 'gate' extra, and the table readers must not
    from labelgate.pipeline.config.models import UNIT_LABELS
    info = table.attrs.get("label_studio")
    if not info:
        return None
    specs = _specs(info)
    several = isinstance(info["control"], list)
    out: dict[str, Any] = {}
    for q in config.questions:
        spec = question_control(specs, q, config.label_column(q), None if several else config.columns.label,
                                info["source"])
        if q.kind != spec.kind:
            raise InputError(f"Question {q.name!r} is kind {q.kind!r}, but control {spec.name!r} of {info['source']} "
                             f"is a {spec.type} (kind {spec.kind!r}).", Reason.INVALID_PARAMETER,
                             project=info["source"], control=spec.name, question=q.name)
        categories = question_categories(spec, q.level, q.categories, q.name, info["source"],
                                         stated="level" in q.model_fields_set)
        blank = UNIT_LABELS.get(q.kind)  # spans / boxes: the table measured is the units', with "O" / "none"
        out[q.name] = categories if blank is None or categories is None else (*categories, blank)
    return out


def _specs(info: dict[str, Any]) -> dict[str, Control]:
    """The controls a table read from Label Studio describes (``attrs["label_studio"]["controls"]``)."""
    return {name: Control(name, c["type"], c["level"], c["categories"], c.get("data_key"))
            for name, c in info["controls"].items()}


def with_control_levels(config: GateConfig, table: pd.DataFrame) -> GateConfig:
    """The configuration with each question that states no level given its control's level (labeling config).

    A ``Rating`` is ordinal, a ``Number`` interval, a ``Choices`` / ``Taxonomy`` nominal (:data:`LEVELS`), a
    multi-select one ``set`` (Jaccard distance); a ``Labels`` / ``RectangleLabels`` control makes the question
    ``kind: spans`` / ``boxes`` (the reader's columns, :data:`~.reader.REGION_COLUMNS`). The run's
    configuration, and so the digest that keys its decision, carries the level the question was decided at. A question
    that states a level keeps it (:func:`gate_categories` checks that the control supports it); a table not read from
    Label Studio, or a question that reads no control, leaves the configuration as it is (the latter is refused by
    :func:`gate_categories`, with the controls listed).
    """
    # here, not at the top: the config models need the 'gate' extra, and the table readers must not
    from labelgate.pipeline.config.models import Question
    info = table.attrs.get("label_studio")
    if not info:
        return config
    specs = _specs(info)
    single = None if isinstance(info["control"], list) else config.columns.label
    questions = []
    for q in config.questions:
        column = config.label_column(q)
        spec = next(iter(specs.values())) if single is not None and column == single else specs.get(column)
        if spec is not None and spec.kind != "labels" and "kind" not in q.model_fields_set:
            # a Labels / RectangleLabels control: spans / boxes in the reader's columns
            columns = getattr(Question.model_validate({"name": q.name, "kind": spec.kind}), spec.kind)
            q = q.model_copy(update={"kind": spec.kind, spec.kind: columns})
        stated = "level" in q.model_fields_set
        if not stated and spec is not None and spec.level != q.level:
            update: dict[str, Any] = {"level": spec.level}
            if spec.level == "set":  # a multi-select control: Jaccard unless the question says otherwise
                update["distance"] = q.distance or "jaccard"
            q = q.model_copy(update=update)
        questions.append(q)
    if all(a is b for a, b in zip(questions, config.questions, strict=True)):
        return config
    return config.model_copy(update={"questions": questions})


def question_control(specs: dict[str, Control], question: Question, column: str, single: str | None,
                     what: str) -> Control:
    """The control a question reads: the only one when ``single`` (the label column's name) is given and the question
    reads that column, else the one named by the question's label column.

    Raises
    ------
    InputError
        No control of ``specs`` is read by the question (the message lists them and says how to map one).
    """
    if single is not None and column == single:
        return next(iter(specs.values()))
    if single is None and column in specs:
        return specs[column]
    listed = sorted(specs)
    how = (f"list the controls in 'control' ({[*listed, column]}) and name each in its question's label_column"
           if single is not None else f"set its label_column to one of {listed}")
    raise InputError(f"Question {question.name!r} reads column {column!r}, but the label_studio source of {what} "
                     f"reads the control(s) {listed} only: {how}.", Reason.MISSING_COLUMN, project=what,
                     control=column, question=question.name)
