"""Write a gate's decision back into Label Studio, where the labelling team works.

The decision goes into each task's ``meta`` under the key ``labelgate`` (``PATCH /api/tasks/{id}``): Label Studio
shows task metadata in the data manager and returns it in exports, and the route never touches the annotations,
so no annotator's work is overwritten. The task's other ``meta`` keys are kept (the current ``meta`` is read and
merged before the update).

**Per annotator.** Where the rater policy flagged crowd raters (:mod:`labelgate.gate.raters`: ``low_agreement``,
``collusion``), each task a flagged annotator annotated in the batch also gets ``meta.labelgate.flagged_annotators``:
``{annotator id: {"questions": {question: {"flags", "actions", "agreement", "ci_low", "ci_high"}}}}`` (``actions``:
flag → action). Label Studio's community edition has no per-user notes or comments API, and annotations must not be
edited: the task's meta, keyed by annotator, is the place a reviewer opening the task sees which of its annotators
LabelGate flagged and why.

The gate runs it (:func:`write_back_run`) for every decision of a batch whose source says ``write_back: true``; a
failure is reported on the summary and never changes the decision.

>>> from labelgate.gate import run                                                   # doctest: +SKIP
>>> from labelgate.gate.label_studio import write_back                              # doctest: +SKIP
>>> summary = run(config)                                                            # doctest: +SKIP
>>> write_back(summary, config.batch, task_ids=batch_table["item_id"].unique())       # doctest: +SKIP
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import Source
from labelgate.pipeline.sources.label_studio import DEFAULT_TOKEN_ENV, LabelStudioClient, project_url

#: The key of the task's ``meta`` that holds LabelGate's verdict.
META_KEY = "labelgate"
#: The key, inside it, of the flagged annotators of the task.
FLAGGED_KEY = "flagged_annotators"


def verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What is written on each task: the decision, the run and the headline metrics (value and interval).

    Examples
    --------
    >>> verdict({"decision": "ACCEPT", "run_id": "r1", "batch_id": "b", "reasons": [],
    ...          "metrics": {"label": {"normalized_cross_kappa": {"value": 0.91234, "ci_low": 0.8, "ci_high": 1.0},
    ...                                "n_items": 40}}})["metrics"]
    {'label': {'normalized_cross_kappa': {'value': 0.9123, 'ci_low': 0.8, 'ci_high': 1.0}}}
    """
    metrics: dict[str, dict[str, Any]] = {}
    for question, rows in (summary.get("metrics") or {}).items():
        for name, row in (rows or {}).items():
            if isinstance(row, Mapping) and "value" in row:
                metrics.setdefault(str(question), {})[str(name)] = {
                    k: _rounded(row.get(k)) for k in ("value", "ci_low", "ci_high") if k in row}
    return {"decision": summary.get("decision"), "run_id": summary.get("run_id"),
            "batch_id": summary.get("batch_id"), "reasons": list(summary.get("reasons") or [])[:10],
            "decided_at": str(summary.get("created_at") or summary.get("finished_at") or ""), "metrics": metrics}


def flagged_annotators(summary: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The flagged raters of a run, by annotator id: ``{id: {"questions": {question: evidence}}}``.

    Examples
    --------
    >>> flagged_annotators({"raters": {"flagged": [{"rater_id": "7", "question": "label", "flags": ["low_agreement"],
    ...     "actions": {"low_agreement": "warn"}, "agreement": 0.1234567, "ci_low": 0.0, "ci_high": 0.3}]}})
    {'7': {'questions': {'label': {'flags': ['low_agreement'], 'actions': {'low_agreement': 'warn'}, \
'agreement': 0.1235, 'ci_low': 0.0, 'ci_high': 0.3}}}}
    """
    out: dict[str, dict[str, Any]] = {}
    for row in ((summary.get("raters") or {}).get("flagged") or []):
        if not isinstance(row, Mapping) or row.get("rater_id") is None:
            continue
        actions = row.get("actions") or {}
        evidence = {"flags": list(row.get("flags") or []),
                    "actions": {str(k): str(v) for k, v in actions.items()} if isinstance(actions, Mapping) else {},
                    **{k: _rounded(row.get(k)) for k in ("agreement", "ci_low", "ci_high")}}
        out.setdefault(str(row["rater_id"]), {"questions": {}})["questions"][str(row.get("question"))] = evidence
    return out


def _rounded(value: Any) -> Any:
    # JSON has no NaN: an undefined metric is written as null
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 4)
    return value


def write_back(summary: Mapping[str, Any], source: Source | None = None, *, task_ids: Iterable[Any],
               url: str | None = None, token_env: str | None = None, timeout: float = 30.0,
               annotators: Mapping[str, Iterable[Any]] | None = None) -> int:
    """Write the decision of ``summary`` into the ``meta`` of the batch's tasks; return how many were updated.

    Parameters
    ----------
    summary : mapping
        A gate run's summary (:func:`labelgate.gate.run`).
    source : labelgate.pipeline.config.Source, optional
        The ``format: label_studio`` batch source (its ``url_env`` / project URL ``path`` and ``token_env``).
    task_ids : iterable
        The tasks of the batch (the ``item_id`` of the table that was gated).
    url : str, optional
        The server's base URL or a project URL (overrides the source's).
    token_env : str, optional
        The environment variable holding the token (overrides the source's; default ``LABEL_STUDIO_TOKEN``).
    timeout : float, default 30
    annotators : mapping, optional
        ``task id -> annotator ids`` of the batch: a task whose annotators include flagged raters gets their flags
        under ``meta.labelgate.flagged_annotators`` (without it, no task gets any).

    Raises
    ------
    InputError
        No server given, the token variable unset, the server down or refusing a task (401 / 403 / 404).
    """
    base = url or _server_of(source)
    env = token_env or (source.token_env if source is not None else None) or DEFAULT_TOKEN_ENV
    payload = verdict(summary)
    flagged = flagged_annotators(summary)
    by_task = {str(t): {str(a) for a in raters} for t, raters in (annotators or {}).items()}
    updated = 0
    with LabelStudioClient(base.split("/projects/")[0], env, timeout=timeout) as client:
        for task in dict.fromkeys(str(t) for t in task_ids):
            meta = dict(client.task(task).get("meta") or {})
            ours = dict(payload)
            here = {a: flagged[a] for a in sorted(by_task.get(task, ())) if a in flagged}
            if here:
                ours[FLAGGED_KEY] = here
            meta[META_KEY] = ours
            client.patch_task(task, {"meta": meta})
            updated += 1
    return updated


def _server_of(source: Source | None) -> str:
    if source is not None and source.path and source.path.startswith(("http://", "https://")):
        return source.path
    base = os.environ.get(source.url_env or "", "") if source is not None else ""
    if not base:
        raise InputError("Writing the decision back to Label Studio needs the server: a project URL in the source's "
                         "'path', or 'url_env' naming a set environment variable.", Reason.MISSING_SETTING,
                         env=None if source is None else source.url_env)
    return base


def write_back_run(summary: Mapping[str, Any], source: Source, batch: Any, task_ids: Iterable[Any],
                   annotators: Mapping[str, Iterable[Any]] | None = None) -> dict[str, Any]:
    """:func:`write_back` for one gate run, never raising: ``{"tasks": n, "flagged_annotators": k}`` or
    ``{"error": "..."}``.

    ``batch`` is what the run was given (a project URL is the server to write to; an export file has none, and then
    ``source.url_env`` names it).
    """
    url = project_url(batch)
    try:
        tasks = write_back(summary, source, task_ids=task_ids, url=url, annotators=annotators)
    except Exception as exc:  # the decision is recorded already: a write-back that fails is reported, not fatal
        return {"error": f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"}
    return {"tasks": tasks, "flagged_annotators": len(flagged_annotators(summary))}
