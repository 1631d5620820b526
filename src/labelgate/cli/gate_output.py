"""What ``labelgate gate`` prints of a run summary: the ``--json`` object (:func:`gate_json`) and the text
(:func:`gate_text`), for a fresh decision, a stored one served again and an ERROR alike. Every value a person reads is
escaped (:func:`labelgate.cli._output.safe`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labelgate.cli._output import num, orchestration_text, safe
from labelgate.gate.decision import question_verdicts


def gate_json(summary: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` object: decision, batch_id, reasons, ``next_steps`` (what to do about a REVIEW or REJECT,
    :mod:`labelgate.gate.next_steps`), ``questions`` (each question's verdict), coverage, metrics, ``validation``
    (each table's rows, invalid rows by check and rows left out by cause), report (+ run details), the flagged
    raters with the rater policy's outcome (``raters``), the rows each row selection left out (``selection``) and how
    the request ran (``orchestration``: ``mode`` "in-process" or "prefect", ``reason``, ``api``, ``api_url``,
    ``flow_run_id``; null for a request refused before it had a configuration)."""
    from labelgate.gate.next_steps import of_summary

    section = _raters(summary)
    if section is not None and section.get("with_flagged"):
        kept = dict(section["with_flagged"])
        section["with_flagged"] = {**kept, "metrics": _compact_metrics(kept.get("metrics"))}
    return {"decision": summary.get("decision"), "batch_id": summary.get("batch_id"),
            "reasons": summary.get("reasons", []), "next_steps": of_summary(summary),
            "warnings": _warnings(summary, section), "questions": question_verdicts(summary.get("metrics")),
            "coverage": summary.get("coverage", {}), "metrics": _compact_metrics(summary.get("metrics")),
            "raters": section, "selection": _selection(summary), "validation": _validation(summary),
            "report": summary.get("report"),
            "run_id": summary.get("run_id"), "reused": summary.get("reused", False),
            "reused_from": summary.get("reused_from"), "inputs_digest": summary.get("inputs_digest"),
            "orchestration": _orchestration(summary), "alerts": summary.get("alerts", [])}


def _orchestration(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """How the request of a summary ran (its record keeps it in ``validation``)."""
    how = summary.get("orchestration")
    if how is None and isinstance(summary.get("validation"), Mapping):
        how = summary["validation"].get("orchestration")
    return dict(how) if isinstance(how, Mapping) else None


def _compact_metrics(metrics: Any) -> dict[str, Any]:
    """``{question: {metric: {value, ci_low, ci_high}}}``."""
    return {question: {name: {k: row.get(k) for k in ("value", "ci_low", "ci_high")} for name, row in rows.items()}
            for question, rows in (metrics or {}).items()}


def _raters(summary: dict[str, Any]) -> dict[str, Any] | None:
    """The rater section of a run summary (a stored decision served by the CLI keeps it in ``validation``)."""
    section = summary.get("raters")
    if section is None and isinstance(summary.get("validation"), dict):
        from labelgate.gate.raters import RECORD_KEY

        section = summary["validation"].get(RECORD_KEY)
    return dict(section) if isinstance(section, dict) else None


def _warnings(summary: dict[str, Any], section: dict[str, Any] | None) -> list[str]:
    """The run's warnings; a stored decision served again has the rater policy's, which its record keeps."""
    warnings = list(summary.get("warnings") or [])
    if not warnings and summary.get("reused") and section:
        warnings = list(section.get("warnings") or [])
    return warnings


def _validation(summary: dict[str, Any]) -> dict[str, Any]:
    """``{table: {n_rows, n_valid, n_invalid, error_counts, left_out}}``: the rows each table lost, by cause."""
    keys = ("n_rows", "n_valid", "n_invalid", "error_counts", "left_out")
    return {str(table): {k: info.get(k) for k in keys} for table, info in (summary.get("validation") or {}).items()
            if isinstance(info, dict) and "n_rows" in info}


def _selection(summary: dict[str, Any]) -> dict[str, Any]:
    """``{"batch" | "trusted": {where, n_rows, n_selected, n_outside}}`` of the tables with a row selection."""
    out = {}
    for info in (summary.get("validation") or {}).values():
        selection = info.get("selection") if isinstance(info, dict) else None
        if isinstance(selection, dict):
            out[str(selection.get("role"))] = {k: v for k, v in selection.items() if k != "role"}
    return out


#: Flagged raters listed one per line in the text output (the --json output and the record list them all).
_TEXT_RATERS = 20


def _rater_lines(section: dict[str, Any] | None) -> list[str]:
    """The text lines of the rater policy: each flagged rater with its evidence, exclusions, the other decision."""
    if not section:
        return []
    lines = []
    flagged = section.get("flagged") or []
    for row in flagged[:_TEXT_RATERS]:
        actions = row.get("actions") or {}
        basis = "trusted" if row.get("agreement_basis") != "peers" else "co-raters'"
        partners = f"; partners {', '.join(map(safe, row['partners']))}" if row.get("partners") else ""
        lines.append(f"  rater {safe(row.get('rater_id'))} [{safe(row.get('question'))}]: "
                     + ", ".join(f"{safe(f)} → {safe(a)}" for f, a in actions.items())
                     + f"; {row.get('n_items')} items, agreement {num(row.get('agreement'))} "
                       f"[{num(row.get('ci_low'))}, {num(row.get('ci_high'))}] on {row.get('n_agreement_items')} "
                       f"{basis} items{partners}")
    if len(flagged) > _TEXT_RATERS:
        lines.append(f"  … and {len(flagged) - _TEXT_RATERS} more flagged raters (--json lists them all)")
    from labelgate.metrics.diagnostics import too_few_text

    for question, judging in (section.get("judging") or {}).items():
        if text := too_few_text(judging):
            lines.append(f"  [{safe(question)}] {text}; low_agreement at FDR {num(judging.get('fdr'))}")
    excluded = section.get("excluded")
    if excluded:
        lines.append(f"  excluded: {len(excluded.get('raters') or [])} raters, {excluded.get('n_rows')} rows → "
                     f"{safe(excluded.get('file'))}")
    kept = section.get("with_flagged")
    if kept:
        lines.append(f"  with the excluded raters the decision would be {safe(kept.get('decision'))}")
        lines.extend(f"    reason: {safe(reason)}" for reason in kept.get("reasons") or [])
    return lines


def gate_text(summary: dict[str, Any]) -> str:
    """A readable summary of a gate run."""
    from labelgate.gate.next_steps import of_summary

    lines = [f"{summary.get('decision')}  batch {safe(summary.get('batch_id'))}"
             + ("  (stored decision reused; --force recomputes)" if summary.get("reused") else "")]
    run = f"  run: {summary.get('run_id')}"
    lines.append(run + (f" (the decision of run {summary['reused_from']})" if summary.get("reused_from") else ""))
    if how := orchestration_text(_orchestration(summary)):
        lines.append(f"  ran: {how}")
    for reason in summary.get("reasons") or []:
        lines.append(f"  reason: {safe(reason)}")
    section = _raters(summary)
    for warning in _warnings(summary, section):
        lines.append(f"  warning: {safe(warning)}")
    for step in of_summary(summary):
        lines.append(f"  next: {safe(step)}")
    lines.extend(_rater_lines(section))
    for table, info in _validation(summary).items():
        if info.get("left_out"):
            causes = ", ".join(f"{safe(cause)} {n}" for cause, n in info["left_out"].items())
            lines.append(f"  validation ({safe(table)}): rows left out of the measurement: {causes}")
    for role, info in _selection(summary).items():
        lines.append(f"  selection: {info.get('n_outside')} of {info.get('n_rows')} {safe(role)} rows are outside "
                     f"{safe(role)}.where {safe(info.get('where'))}")
    coverage = summary.get("coverage") or {}
    if coverage:
        lines.append(f"  coverage: {coverage.get('common_items')} of {coverage.get('batch_items')} batch items are "
                     f"in the trusted replication ({num(coverage.get('coverage'))})")
    verdicts = question_verdicts(summary.get("metrics"))
    for question, rows in (summary.get("metrics") or {}).items():
        judged = f"  question: {verdicts[question]}" if question in verdicts else ""
        lines.append(f"  [{safe(question)}]{judged}")
        for name, row in rows.items():
            verdict = f"  {row['verdict']}" if row.get("verdict") else ""
            lines.append(f"    {safe(name):<26} {num(row.get('value'))}  [{num(row.get('ci_low'))}, "
                         f"{num(row.get('ci_high'))}]{verdict}")
    for outcome in summary.get("alerts") or []:
        lines.append(f"  alert {outcome.get('channel')}: {'sent' if outcome.get('ok') else safe(outcome.get('error'))}")
    if summary.get("report"):
        lines.append(f"  report: {summary['report']}")
    return "\n".join(lines)
