"""The gate's audit log seen from the gate: serving a decision already taken for the same inputs, reading the log, and
how a request ran (in-process or as a Prefect flow run: :class:`Orchestration`).

Light on purpose (no validation, GX or Prefect): the CLI answers a request whose inputs were decided before from
here, before anything heavy starts, and ``labelgate runs`` reads the log from here.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from labelgate.gate import alerting
from labelgate.pipeline import sources, units
from labelgate.pipeline.config import ConfigError, GateConfig, config_from_dict, load_config
from labelgate.pipeline.migrations import SCHEMA_VERSION
from labelgate.pipeline.sources.tables import batch_id_of
from labelgate.pipeline.store import GateRecord, ResultsStore, inputs_digest, record_summary

#: The key of a record's ``validation`` JSON that says how its request ran. The audit log has no column for it, so
#: the store's schema stays as it is; ``validation`` already holds a finding that is not a table (the rater policy's).
ORCHESTRATION_KEY = "orchestration"


@dataclass(frozen=True)
class Orchestration:
    """How one request ran, as its record, the run summary and ``labelgate gate --json`` say it.

    Attributes
    ----------
    mode : {"in-process", "prefect"}
        In the requesting process without Prefect, or as a Prefect flow run.
    reason : str
        Why it ran that way ("no Prefect API is named", "--prefect never", ...).
    api : {"server", "cloud", "ephemeral"} or None
        The Prefect API the flow run reported to: a named server, Prefect Cloud, or Prefect's temporary local API.
    api_url : str or None
        The named API's URL, without credentials.
    flow_run_id : str or None
        The Prefect flow run.

    Examples
    --------
    >>> Orchestration("in-process", "--prefect never").to_dict()["mode"]
    'in-process'
    """

    mode: str
    reason: str = ""
    api: str | None = None
    api_url: str | None = None
    flow_run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form kept in the record."""
        return asdict(self)


#: A run through the Python API (``labelgate.gate.run`` without an orchestrator's hooks).
IN_PROCESS = Orchestration("in-process", "labelgate.gate.run, without Prefect")


def orchestration_of(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """How the request of a run summary or record ran (None for records written before it was recorded)."""
    direct = summary.get(ORCHESTRATION_KEY)
    if isinstance(direct, Mapping):
        return dict(direct)
    validation = summary.get("validation")
    stored = validation.get(ORCHESTRATION_KEY) if isinstance(validation, Mapping) else None
    return dict(stored) if isinstance(stored, Mapping) else None


def as_config(config: Any) -> GateConfig:
    """A parsed :class:`GateConfig` from a path, a mapping or a config."""
    if isinstance(config, GateConfig):
        return config
    if isinstance(config, Mapping):
        return config_from_dict(dict(config))
    return load_config(config)


def default_batch_id(batch: str | None) -> str:
    """The batch file's name without its table extensions (``batch`` when there is no file).

    See :func:`labelgate.pipeline.sources.tables.batch_id_of`, the one rule for a default batch id.
    """
    return batch_id_of(batch)


def digest_of(cfg: GateConfig, crowd: Any, trusted: Any) -> tuple[str, str, str]:
    """``(batch_hash, trusted_hash, inputs_digest)`` of loaded tables under ``cfg`` (of a batch kept in its database:
    the digests of its aggregates, :attr:`labelgate.pipeline.sources.sql_batch.SqlBatch.hashes`)."""
    if crowd is not None and not isinstance(crowd, pd.DataFrame):
        batch_hash, trusted_hash = crowd.hashes
    else:
        batch_hash, trusted_hash = sources.content_hash(crowd), sources.content_hash(trusted)
    return batch_hash, trusted_hash, inputs_digest(batch_hash, trusted_hash, cfg.digest())


def reuse(store: ResultsStore, previous: GateRecord, batch_id: str, run_id: str | None = None,
          started: datetime | None = None, orchestration: Orchestration | None = None) -> GateRecord:
    """Record that ``batch_id`` received the decision of ``previous`` (same inputs), without recomputing it; the record
    says how this request ran (``orchestration``), never how the earlier one did."""
    validation = {k: v for k, v in previous.validation.items() if k != ORCHESTRATION_KEY}
    if orchestration is not None:
        validation[ORCHESTRATION_KEY] = orchestration.to_dict()
    record = GateRecord(batch_id=batch_id, batch_hash=previous.batch_hash, trusted_hash=previous.trusted_hash,
                        config_hash=previous.config_hash, inputs_digest=previous.inputs_digest,
                        decision=previous.decision, reasons=previous.reasons, metrics=previous.metrics,
                        coverage=previous.coverage, validation=validation, reports=previous.reports,
                        reused_from=previous.run_id, run_id=run_id or str(uuid.uuid4()),
                        created_at=started or datetime.now(UTC), finished_at=datetime.now(UTC))
    return store.append(record)


def recovered_summary(record: GateRecord) -> dict[str, Any]:
    """The summary of a decision recorded by a run that did not finish its request (the drop folder's recovery after
    a crash): the record's summary with the span / box section kept with the decision, as the run showed it."""
    summary = record_summary(record)
    section = units.of_summary({"validation": record.validation})
    if section is not None:
        summary["units"] = section
    return summary


def reused_summary(store: ResultsStore, previous: GateRecord, batch_id: str, selection: Mapping[str, Any],
                   run_id: str | None = None, started: datetime | None = None,
                   orchestration: Orchestration | None = None) -> dict[str, Any]:
    """The run summary of a request served the decision of ``previous`` (:func:`reuse` records it): what a fresh
    decision's summary shows, from the record — the span / box section kept with the decision, with what this
    request's loading expanded (``selection["units"]``, :func:`labelgate.pipeline.units.of_summary`)."""
    summary = record_summary(reuse(store, previous, batch_id, run_id, started, orchestration))
    section = units.of_summary(summary, selection.get("units"))
    if section is not None:
        summary["units"] = section
    return summary


def stored_decision(config: Any, batch: str | Path | None, trusted: str | Path | None = None, *,
                    batch_id: str | None = None, orchestration: Orchestration | None = None) -> dict[str, Any] | None:
    """The summary of a request whose inputs were decided before — recorded for ``batch_id`` (with how this request
    ran, ``orchestration``), its owed alerts sent — or None when they were not (then the gate must run). Never creates
    or migrates the store.

    Raises whatever loading the inputs raises; the caller decides whether that is an answer or a reason to run.
    """
    cfg = as_config(config)
    store = ResultsStore.from_config(cfg.store, auto_migrate=False)
    if store.schema_version() != SCHEMA_VERSION:
        return None
    from labelgate.gate.steps import load_inputs  # the run's own loading: one rule for what keys a decision

    cfg, crowd, trusted_df, selection = load_inputs(cfg, batch, trusted)
    previous = store.find(digest_of(cfg, crowd, trusted_df)[2])
    if previous is None:
        return None
    name = batch_id or default_batch_id(None if batch is None else str(batch))
    summary = reused_summary(store, previous, name, selection, orchestration=orchestration)
    summary["alerts"] = alerting.alert_run(store, cfg, summary)
    summary[ORCHESTRATION_KEY] = orchestration_of(summary)
    return summary


def runs(config: Any, *, batch_id: str | None = None, since: datetime | str | None = None,
         decision: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """The audit log of a configuration's store, newest first, as JSON-ready records.

    Each record has ``run_id``, ``batch_id``, ``decision``, ``reasons``, ``created_at``, ``inputs_digest``,
    ``reused_from`` (the run whose decision a request received), the hashes, metrics, reports and alert outcomes.
    The latest record of a batch id is its current decision.

    Raises
    ------
    ConfigError
        ``since`` is not an ISO 8601 time.
    """
    cfg = as_config(config)
    if isinstance(since, str):
        try:
            since = datetime.fromisoformat(since)
        except ValueError:
            raise ConfigError(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-21 or "
                              "2026-11-21T08:00:00Z).") from None
    store = ResultsStore.from_config(cfg.store)
    return [record.to_dict() for record in store.list_runs(limit, batch_id=batch_id, since=since, decision=decision)]
