"""The rater policy: the raters the diagnose step flags, with their evidence, and what each flag does to the decision.

The diagnose step (:mod:`labelgate.gate.diagnose`, :func:`labelgate.metrics.diagnostics.rater_diagnostics`) flags a
crowd rater ``low_agreement`` (the one-sided test of "its kappa is at least ``raters.min_agreement``" is rejected by
Benjamini-Hochberg across the question's raters at the false discovery rate ``raters.fdr``: spammers, who guess, end
up here once they have the workload each row reports) or ``collusion`` (it belongs to a pair that agrees far more
with each other than with anyone else). The configuration's ``raters`` section gives every flag an action:

=========  =====================================================================================================
action     effect
=========  =====================================================================================================
``warn``   (default) the decision stands; one warning line per flag names the raters
``review`` the batch goes to REVIEW, with a reason naming the raters and the flag
``exclude`` the batch is decided without every judgement of the raters (in every question: a flag is evidence
           about the worker); the rows excluded are written to ``excluded-raters.csv`` next to the report, and the
           decision with them is kept in the record for the audit
=========  =====================================================================================================

A rater with several flags gets the action of each (an excluded colluder that is also flagged ``low_agreement``
under ``review`` still sends the batch to REVIEW). Everything here is a pure function of the diagnostics and the
tables, so the runner decides and the tests check it without Great Expectations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from labelgate.gate.decision import Decision, GateDecision, worse
from labelgate.metrics.diagnostics import judgement_summary
from labelgate.pipeline.config import GateConfig
from labelgate.pipeline.sources import as_str

#: The key of the rater section inside the record's ``validation`` JSON (the summary carries it as ``raters``).
RECORD_KEY = "rater_policy"
#: The file, next to the report, that lists every row the ``exclude`` action left out.
EXCLUDED_FILE = "excluded-raters.csv"
#: Rater ids named in one reason or warning line; the record lists them all.
_NAMED = 10


@dataclass
class RaterFindings:
    """The flagged raters of a batch and what the policy makes of them.

    Attributes
    ----------
    policy : dict
        ``flag -> action`` as configured.
    flagged : list of dict
        One row per flagged (rater, question): ``rater_id, question, flags, actions, n_items, n_shared_items,
        agreement, ci_low, ci_high, agreement_basis, p_value, n_agreement_items, partners`` (``p_value``: of the
        one-sided test behind ``low_agreement``).
    excluded : list of str
        Rater ids whose judgements the batch is decided without (sorted).
    reviews, warnings : list of str
        Reason lines of the ``review`` flags, warning lines of the ``warn`` flags.
    judging : dict
        Per question, how many raters the data could judge
        (:func:`~labelgate.metrics.diagnostics.judgement_summary`), with the ``fdr`` of the flags.
    """

    policy: dict[str, str]
    flagged: list[dict[str, Any]] = field(default_factory=list)
    judging: dict[str, dict[str, Any]] = field(default_factory=dict)
    excluded: list[str] = field(default_factory=list)
    reviews: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def find(config: GateConfig, diagnostics: Mapping[str, Any]) -> RaterFindings:
    """The flagged raters of the diagnose step's ``diagnostics`` (question → ``{"raters": rows}``) under the policy.

    Examples
    --------
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig.model_validate({"raters": {"collusion": "exclude"}})
    >>> rows = [{"rater_id": "c1", "flags": ["collusion"], "partners": ["c2"], "n_ratings": 40, "n_shared_items": 20,
    ...          "kappa_vs_trusted": 0.1, "kappa_ci_low": 0.0, "kappa_ci_high": 0.2, "agreement_basis": "trusted"},
    ...         {"rater_id": "ok", "flags": [], "n_ratings": 40}]
    >>> found = find(cfg, {"label": {"raters": rows}})
    >>> found.excluded, [(r["rater_id"], r["actions"]) for r in found.flagged]
    (['c1'], [('c1', {'collusion': 'exclude'})])
    """
    policy = config.raters.actions()
    found = RaterFindings(policy=policy)
    by_flag: dict[tuple[str, str], list[str]] = {}
    for question, diag in diagnostics.items():
        summary = judgement_summary((diag or {}).get("raters") or [])
        if summary is not None:
            found.judging[str(question)] = {**summary, "fdr": config.raters.fdr}
        for row in (diag or {}).get("raters") or []:
            flags = [f for f in row.get("flags") or [] if f in policy]
            if not flags:
                continue
            found.flagged.append(evidence(str(question), row, {f: policy[f] for f in flags}))
            for flag in flags:
                by_flag.setdefault((flag, str(question)), []).append(str(row["rater_id"]))
    found.excluded = sorted({r["rater_id"] for r in found.flagged if "exclude" in r["actions"].values()})
    for (flag, question), raters in sorted(by_flag.items()):
        action = policy[flag]
        named = _named(raters)
        if action == "review":
            found.reviews.append(f"[{question}] {len(raters)} rater(s) flagged {flag} (rater policy: review): {named}")
        elif action == "warn":
            found.warnings.append(f"[{question}] {len(raters)} rater(s) flagged {flag}: {named}")
    return found


def evidence(question: str, row: Mapping[str, Any], actions: dict[str, str]) -> dict[str, Any]:
    """The evidence of one flagged rater: flags, items, agreement and its interval on the basis it was judged on."""
    peers = row.get("agreement_basis") == "peers"
    return {"rater_id": str(row["rater_id"]), "question": question, "flags": list(actions), "actions": actions,
            "n_items": row.get("n_ratings"), "n_shared_items": row.get("n_shared_items"),
            "agreement": row.get("loo_agreement" if peers else "kappa_vs_trusted"),
            "ci_low": row.get("loo_ci_low" if peers else "kappa_ci_low"),
            "ci_high": row.get("loo_ci_high" if peers else "kappa_ci_high"),
            "agreement_basis": row.get("agreement_basis"), "p_value": row.get("p_value"),
            "n_agreement_items": row.get("n_loo_items" if peers else "n_shared_items"),
            "partners": [str(p) for p in row.get("partners") or []]}


def split_rows(config: GateConfig, crowd: pd.DataFrame, excluded: Iterable[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(kept, excluded)`` rows of the crowd table: the judgements of the ``excluded`` raters, and the others.

    Rater ids compare as the text the diagnostics use (the canonical ``rater_id``); the index is kept, so an
    excluded row is traced back to its data row in the file.
    """
    out = as_str(crowd[config.columns.rater]).isin(set(excluded)).to_numpy(dtype=bool)
    return crowd.loc[~out], crowd.loc[out]


def write_excluded(rows: pd.DataFrame, findings: RaterFindings, config: GateConfig, out_dir: Path) -> Path:
    """Write the excluded rows to ``<out_dir>/excluded-raters.csv`` in the quarantine file's layout.

    Columns ``_row`` (the data row in the file), the table's own columns and ``_reasons`` (why the rater is out).
    """
    why: dict[str, list[str]] = {}
    for r in findings.flagged:
        flags = [f for f, action in r["actions"].items() if action == "exclude"]
        if flags:
            why.setdefault(r["rater_id"], []).append(f"{'/'.join(flags)} on question {r['question']!r}")
    raters = as_str(rows[config.columns.rater])
    frame = rows.copy()
    frame.insert(0, "_row", rows.index)
    frame["_reasons"] = [f"{config.columns.rater}: excluded by the rater policy: flagged "
                         f"{'; '.join(why.get(r, []))}" for r in raters]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EXCLUDED_FILE
    frame.to_csv(path, index=False)
    return path


def decide(batch: GateDecision, findings: RaterFindings, with_flagged: GateDecision | None = None,
           n_excluded_rows: int = 0) -> GateDecision:
    """The batch decision under the policy: ``batch`` (decided without the excluded raters, when any), REVIEW for
    the ``review`` flags, warnings for the ``warn`` flags and a warning recording the exclusion.

    Examples
    --------
    >>> from labelgate.pipeline.config import GateConfig
    >>> found = RaterFindings({"collusion": "review"}, reviews=["[label] 2 rater(s) flagged collusion ..."])
    >>> decide(GateDecision("ACCEPT", [], []), found).decision
    'REVIEW'
    """
    decision: Decision = batch.decision
    reasons = list(batch.reasons)
    for line in findings.reviews:
        decision = worse(decision, "REVIEW")
        reasons.append(line)
    return GateDecision(decision, reasons, batch.warnings + policy_warnings(findings, with_flagged, n_excluded_rows))


def policy_warnings(findings: RaterFindings, with_flagged: GateDecision | None = None,
                    n_excluded_rows: int = 0) -> list[str]:
    """The warning lines of the policy: the ``warn`` flags, and the exclusion with the decision it changed."""
    lines = list(findings.warnings)
    if findings.excluded:
        with_them = f"; with them the batch would be {with_flagged.decision}" if with_flagged is not None else ""
        lines.append(f"decided without {len(findings.excluded)} rater(s) excluded by the rater policy "
                     f"({n_excluded_rows} judgement rows): {_named(findings.excluded)}{with_them}")
    return lines


def nothing_left(findings: RaterFindings, n_rows: int) -> GateDecision:
    """REJECT: the policy excluded every judgement of the batch, so nothing in it can be accepted."""
    return GateDecision("REJECT", [f"the rater policy excludes every rater of the batch ({len(findings.excluded)} "
                                   f"rater(s), {n_rows} judgement rows): nothing is left to accept"], [])


def section(findings: RaterFindings, *, excluded_rows: int = 0, excluded_file: str | None = None,
            with_flagged: GateDecision | None = None, with_flagged_metrics: Mapping[str, Any] | None = None,
            with_flagged_coverage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The rater section of the record (``validation["rater_policy"]``) and of the summary (``raters``).

    ``excluded`` is None when nobody was excluded; ``with_flagged`` (the decision on the whole batch, kept for the
    audit) likewise.
    """
    excluded = None
    if findings.excluded:
        excluded = {"raters": findings.excluded, "n_rows": excluded_rows, "file": excluded_file}
    kept = None
    if with_flagged is not None:
        kept = {"decision": with_flagged.decision, "reasons": with_flagged.reasons,
                "warnings": with_flagged.warnings, "coverage": dict(with_flagged_coverage or {}),
                "metrics": dict(with_flagged_metrics or {})}
    return {"policy": findings.policy, "flagged": findings.flagged, "excluded": excluded, "with_flagged": kept,
            "warnings": policy_warnings(findings, with_flagged, excluded_rows), "judging": findings.judging}


def of_summary(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The rater section of a run summary or a stored record (its ``validation`` holds it), or None."""
    direct = summary.get("raters")
    if isinstance(direct, Mapping):
        return dict(direct)
    validation = summary.get("validation")
    stored = validation.get(RECORD_KEY) if isinstance(validation, Mapping) else None
    return dict(stored) if isinstance(stored, Mapping) else None


def _named(raters: list[str]) -> str:
    shown = ", ".join(raters[:_NAMED])
    return shown + (f" and {len(raters) - _NAMED} more" if len(raters) > _NAMED else "")
