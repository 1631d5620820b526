"""The gate's ``format: label_studio`` batch source: its batch (tasks, a view or a time range) and its questions.

A gate's batch is the crowd's annotations of a task filter (``tasks``: ids, or ``view``: a data manager tab) or of a
time range (``annotated_after`` / ``annotated_before`` on ``time_field``), gated against the trusted annotations of
the same tasks whenever they were made. A project URL given as the batch (``labelgate gate --batch URL``, or the
``path`` of a ``labelgate.batch.ready`` event) may carry the same selection in its query
(``.../projects/7?tasks=1,2,3``); it then replaces the configuration's.

The gate's questions read the control: their categories come from the labeling config (the configuration may list
them, and must list the config's), their level is one the control supports (:func:`gate_categories`).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.label_studio.client import DEFAULT_TOKEN_ENV
from labelgate.pipeline.sources.label_studio.labeling_config import Control, question_categories
from labelgate.pipeline.sources.label_studio.reader import Selection, as_time, read_label_studio, selection_of_url

if TYPE_CHECKING:
    from labelgate.pipeline.config import Columns, GateConfig, Source


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
    return read_label_studio(given, source.control or "", source.trusted, project=source.project,
                             label_config=source.label_config, token_env=source.token_env or DEFAULT_TOKEN_ENV,
                             columns=columns, selection=source_selection(source, str(given)))


def gate_categories(config: GateConfig, table: pd.DataFrame) -> dict[str, Any] | None:
    """The categories of the gate's questions over a Label Studio table: the labeling config's, in its order.

    Parameters
    ----------
    config : GateConfig
        A configuration whose batch source is ``format: label_studio``.
    table : DataFrame
        The table read from it (its ``attrs["label_studio"]`` names the control, its type and its categories).

    Returns
    -------
    dict or None
        The categories of each question, by name (None for a question of a ``Number``); None when the table was
        not read from Label Studio.

    Raises
    ------
    InputError
        A question's level is not one the control supports, or its listed categories are not the config's.
    """
    info = table.attrs.get("label_studio")
    if not info:
        return None
    spec = Control(info["control"], info["type"], info["level"], info["categories"])
    return {q.name: question_categories(spec, q.level, q.categories, q.name, info["source"])
            for q in config.questions}
