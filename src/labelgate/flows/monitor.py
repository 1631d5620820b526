"""The ``monitor`` Prefect flow (one pass: collect → merge, measure, detect → alert) and ``serve``.

Tasks are thin wrappers over :class:`labelgate.monitor.Monitor`: the merge, the window measurements, the drift
detection and the bookkeeping of a pass happen in one database transaction (a failure leaves the stored state
as it was and records an ``error`` pass; a SQL source read in chunks commits each chunk's merge on its own, and the
measurements run in the last chunk's transaction: docs/monitoring.md, "A SQL source, read in chunks"); alerts
are sent after the commit. Scheduling needs a Prefect server (``prefect server start``): the ephemeral API runs
flows but cannot schedule them. See ``flows/README.md``.

Run it on a schedule::

    prefect server start --host 127.0.0.1 --port 4200 &
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python flows/serve_monitor.py --config configs/monitor.example.yaml --interval 600
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from labelgate.flows.api import flow_orchestration
from labelgate.flows.markdown import markdown_text
from labelgate.monitor.engine import Monitor
from labelgate.pipeline.sources.deliveries import Delivery

FLOW_NAME = "labelgate-monitor"


@task(name="collect", cache_policy=NO_CACHE)
def collect_task(monitor: Monitor) -> list[Delivery]:
    return monitor.collect()


@task(name="merge-measure-detect", cache_policy=NO_CACHE)
def merge_task(
    monitor: Monitor, deliveries: list[Delivery], pass_id: str, started: datetime, replay: bool
) -> dict[str, Any]:
    return monitor.merge(deliveries, pass_id=pass_id, started=started, replay=replay)


@task(name="alert", cache_policy=NO_CACHE)
def alert_task(monitor: Monitor) -> list[dict[str, Any]]:
    from labelgate.monitor.alerting import send_pending

    return send_pending(monitor.engine, monitor.cfg)


@flow(name=FLOW_NAME, log_prints=False, validate_parameters=False)
def monitor_flow(config: str | dict[str, Any], replay: bool = False) -> dict[str, Any]:
    """One monitor pass; returns its summary (see :meth:`labelgate.monitor.Monitor.merge`).

    Parameters
    ----------
    config : path or mapping
        The monitor configuration (YAML path, or the parsed mapping).
    replay : bool, default False
        Measure every window again from the stored judgements (no alert is sent twice).

    Returns
    -------
    dict
        The pass summary, with ``orchestration``: this flow run and the API it reports to.
    """
    logger = get_run_logger()
    monitor = Monitor(config)
    pass_id, started = str(uuid.uuid4()), datetime.now(UTC)
    try:
        deliveries = collect_task(monitor)
        summary = merge_task(monitor, deliveries, pass_id, started, replay)
    except Exception as exc:
        monitor.record_failure(pass_id, started, exc)
        logger.error("monitor pass %s failed: %s", pass_id, exc)
        raise
    summary["alerts"] = alert_task(monitor)
    for outcome in summary["alerts"]:
        if not outcome.get("ok"):
            logger.warning("alert to %s failed: %s", outcome.get("channel"), outcome.get("error"))
    logger.info(
        "monitor %s: %d new judgement(s), %d window(s) measured",
        summary["monitor"],
        summary["n_new"],
        sum(q.get("windows", 0) for q in summary["questions"].values()),
    )
    _artifacts(summary)
    summary["orchestration"] = flow_orchestration().to_dict()
    return summary


def _artifacts(summary: dict[str, Any]) -> None:
    rows, lines = (
        [],
        [
            f"# LabelGate monitor {markdown_text(summary['monitor'])}",
            "",
            f"{summary['n_new']} new judgement(s) in pass {markdown_text(summary['pass_id'])}",
            "",
        ],
    )
    for question, q in summary["questions"].items():
        for metric, row in (q.get("cumulative") or {}).items():
            rows.append(
                {
                    "question": question,
                    "metric": metric,
                    "value": row["value"],
                    "ci_low": row["ci_low"],
                    "ci_high": row["ci_high"],
                    "n_items": row["n_items"],
                    "threshold": row["threshold"],
                }
            )
        for event in q.get("events") or []:
            lines.append(
                f"- **{markdown_text(event['transition'])}** \\[{markdown_text(question)}\\] "
                f"{markdown_text(event['metric'])} ({markdown_text(event['kind'])}) since "
                f"{markdown_text(event['since'])}: {markdown_text(event['reason'])}"
            )
    create_markdown_artifact(
        key="labelgate-monitor", markdown="\n".join(lines), description="LabelGate monitor"
    )
    if rows:
        create_table_artifact(
            key="labelgate-monitor-cumulative", table=rows, description="Cumulative agreement"
        )


def serve(
    config: str | Path,
    *,
    interval_seconds: float | None = None,
    cron: str | None = None,
    name: str = FLOW_NAME,
) -> None:
    """Serve the monitor as a scheduled deployment (blocks; needs ``PREFECT_API_URL`` of a Prefect server).

    Parameters
    ----------
    config : path
        The monitor configuration; the absolute path is the deployment's parameter.
    interval_seconds, cron : optional
        The schedule: every ``interval_seconds`` seconds, or a cron expression (default: every 10 minutes).
    name : str
        Deployment name.
    """
    from prefect import serve as prefect_serve

    schedule: dict[str, Any] = (
        {"cron": cron}
        if cron
        else {"interval": timedelta(seconds=interval_seconds if interval_seconds else 600)}
    )
    deployment: Any = monitor_flow.to_deployment(
        name=name, parameters={"config": str(Path(config).resolve())}, **schedule
    )
    prefect_serve(deployment)
