"""What to do next about a REVIEW or a REJECT: lines computed from the run's own numbers.

One implementation for every surface: the runner stores the lines in the record (``validation["next_steps"]``) and
the summary carries them as ``next_steps``; the terminal output, ``--json``, the HTML / Markdown report and the alert
payload print them as they are. Each line says one thing a team lead can do, with its number:

* **more items** — for a check whose interval straddles its threshold, the items that narrow the interval until its
  end clears the threshold, if the point stays where it is. Interval widths shrink as :math:`1/\\sqrt{n}`
  (:func:`labelgate.metrics.planning.items_for_width`), so with ``n₀`` items, a point ``p``, the interval's end
  ``b`` on the threshold's side and the threshold ``t``: :math:`n = \\lceil n_0 ((p - b) / (p - t))^2 \\rceil`.
* **more raters per item** — when the crowd's single-rating IRR falls short of the trusted pool's, the ratings per
  item for the crowd's consensus label to be as reliable as the trusted consensus (Spearman–Brown,
  :func:`labelgate.metrics.planning.raters_needed`). The gate compares single ratings, so this plans the
  aggregation of the labels; it does not make the check pass.
* **the raters to look at** — the raters the diagnose step flagged, lowest agreement first, with their evidence;
  when none could be judged, the items each rater needs to be judged.
* **the configuration key** — the key and the value under which the interval would pass (a deliberate loosening,
  said as such), the coverage or validation key that raised the problem, or the rater policy's key.

ACCEPT and ERROR get no next steps (an ERROR's reason says what failed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from labelgate.gate.decision import GateDecision, Outcome, deciding_checks, fmt
from labelgate.metrics.planning import items_for_width, raters_needed, spearman_brown

if TYPE_CHECKING:
    from labelgate.pipeline.config import GateConfig

#: The key of the next steps inside the record's ``validation`` JSON (the summary carries them as ``next_steps``).
RECORD_KEY = "next_steps"
#: Raters named in the "look at" line; the report's rater table lists them all.
_NAMED = 5
#: Plans beyond this many times the items measured are said as "not within reach" rather than as a number.
_MAX_FACTOR = 100


def next_steps(config: GateConfig, decision: GateDecision, outcomes: Sequence[Outcome], *,
               coverage: Mapping[str, Any] | None = None, coverage_problems: Sequence[str] = (),
               rejection: str | None = None, validation: Mapping[str, Any] | None = None,
               raters: Mapping[str, Any] | None = None,
               diagnostics: Mapping[str, Any] | None = None) -> list[str]:
    """The "what to do next" lines of a decision (empty for ACCEPT and ERROR).

    Parameters
    ----------
    config : GateConfig
    decision : GateDecision
        The batch decision (under the rater policy).
    outcomes : sequence of Outcome
        The expectation outcomes the decision was made on.
    coverage, coverage_problems
        :func:`labelgate.gate.steps.coverage`'s info and problems.
    rejection : str, optional
        The validation rejection (``Prepared.rejection``), if any.
    validation : mapping, optional
        The validation summary (table → :meth:`ValidationResult.to_dict`), for the invalid rows' counts.
    raters : mapping, optional
        The rater section (:func:`labelgate.gate.raters.section`).
    diagnostics : mapping, optional
        The diagnose step's per-question diagnostics (for the ratings-per-item design).

    Examples
    --------
    >>> from labelgate.gate.decision import decide
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig.model_validate({"gates": [{"type": "cross_kappa", "min_value": 0.2}]})
    >>> o = Outcome("label", "cross_kappa", "blocking", 0.3, True, "straddle", details={
    ...     "value": 0.3, "ci_low": 0.14, "ci_high": 0.46, "n_items": 100, "ci_level": 0.95,
    ...     "checks": [{"parameter": "min_value", "statistic": "value", "op": ">=", "threshold": 0.2,
    ...                 "point": 0.3, "ci_low": 0.14, "ci_high": 0.46, "passes_on_point": True,
    ...                 "passes_on_bound": False}]})
    >>> for line in next_steps(cfg, decide([o]), [o]):  # doctest: +NORMALIZE_WHITESPACE
    ...     print(line)
    [label] cross_kappa: more items: about 256 items shared with the trusted replication (now 100) would bring
    the interval's lower end (0.140) above 0.2, if the point stays at 0.300
    [label] cross_kappa: or, deliberately, a looser threshold: gates[0].min_value: 0.14
    (the interval's lower end 0.140 passes it)
    """
    if decision.decision not in ("REVIEW", "REJECT"):
        return []
    lines: list[str] = []
    if rejection:
        lines.extend(_validation_steps(config, validation or {}))
    if coverage_problems:
        lines.extend(_coverage_steps(config, coverage or {}))
    for o in outcomes:
        if o.severity != "blocking" or o.verdict == "pass":
            continue
        lines.extend(_outcome_steps(config, o, diagnostics or {}))
    lines.extend(_rater_steps(raters or {}, bool(outcomes)))
    return list(dict.fromkeys(lines))  # one line once, in order


# ----------------------------------------------------------------------------------------- outcomes
def _outcome_steps(config: GateConfig, o: Outcome, diagnostics: Mapping[str, Any]) -> list[str]:
    where = f"[{o.question}] {o.gate}"
    cause = o.cause
    if cause is not None:
        # a crowd at chance: the raters to look at say what to do (a trusted pool at chance is an ERROR, which gets
        # no next steps)
        return []
    if o.is_undefined:
        n = o.details.get("n_items")
        now = f" (now {n})" if isinstance(n, int) else ""
        return [f"{where}: undefined ({o.reason or 'no reason given'}): share more items rated by both pools{now}, "
                f"at least coverage.min_common_items = {config.coverage.min_common_items}"]
    lines: list[str] = []
    for check in deciding_checks(o):
        lines.extend(_check_steps(config, o, check, where))
    lines.extend(_raters_per_item(o, diagnostics, where))
    return lines


def _check_steps(config: GateConfig, o: Outcome, check: Mapping[str, Any], where: str) -> list[str]:
    point, threshold = check.get("point"), check.get("threshold")
    op = check.get("op")
    if not (_finite(point) and _finite(threshold)):
        return []
    upward = op in (">=", ">")
    passes = bool(check.get("passes_on_point"))
    low, high = check.get("ci_low"), check.get("ci_high")
    lines = []
    # the interval's end that must clear the threshold: the conservative end when the point passes, the optimistic
    # end when it fails (then more items settle it the other way)
    end = (low if upward else high) if passes else (high if upward else low)
    n_items = o.details.get("n_items")
    if _finite(end) and isinstance(n_items, int) and n_items > 0 and o.interval_verdict == "straddle":
        margin, stretch = abs(point - threshold), abs(point - end)
        side = "lower" if (upward == passes) else "upper"
        if margin > 1e-9 * max(1.0, abs(threshold)) and stretch > 0:
            needed = items_for_width(n_items, stretch, margin)
            what = _items_of(o)
            direction = "above" if upward == passes else "below"
            outcome = "" if passes else " and confirm the failure (a REJECT)"
            if needed > _MAX_FACTOR * n_items:
                lines.append(f"{where}: more items would not settle it: the point {fmt(point)} is only {fmt(margin)} "
                             f"from the threshold {_setting(threshold)}; settling it would take over {_MAX_FACTOR}× "
                             f"the {n_items} {what}")
            else:
                lines.append(f"{where}: more items: about {needed} {what} (now {n_items}) would bring the interval's "
                             f"{side} end ({fmt(end)}) {direction} {_setting(threshold)}{outcome}, if the point stays "
                             f"at {fmt(point)}")
    key = _gate_key(config, o, str(check.get("parameter")))
    loose = _looser(check)
    if key is None or loose is None:
        return lines
    if passes:
        lines.append(f"{where}: or, deliberately, a looser threshold: {key}: {loose[0]} (the interval's "
                     f"{loose[1]} end {fmt(loose[2])} passes it)")
    else:
        at_point = _looser({**check, "ci_low": point, "ci_high": point})
        lines.append(f"{where}: only a looser standard passes this batch, not a fix of it: {key}: "
                     f"{at_point[0] if at_point else '?'} for the point, {loose[0]} for the whole interval "
                     f"(now {_setting(_configured(check))})")
    return lines


def _items_of(o: Outcome) -> str:
    return "crowd items" if o.gate == "spa" else "items shared with the trusted replication"


def _looser(check: Mapping[str, Any]) -> tuple[str, str, float] | None:
    """The configured value under which the check's conservative end passes: ``(value, end name, end)``."""
    parameter, op = check.get("parameter"), check.get("op")
    low, high = check.get("ci_low"), check.get("ci_high")
    if op in (">=", ">") and _finite(low):
        if parameter == "tolerance":  # the check is difference ≥ −tolerance
            return _up(-low), "lower", low
        return _down(low), "lower", low
    if op == "<=" and _finite(high):
        return _up(high), "upper", high
    return None


def _configured(check: Mapping[str, Any]) -> float:
    threshold = float(check.get("threshold") or 0.0)
    return -threshold if check.get("parameter") == "tolerance" else threshold


def _up(x: float) -> str:
    return _setting(math.ceil(x * 100 - 1e-9) / 100)


def _down(x: float) -> str:
    return _setting(math.floor(x * 100 + 1e-9) / 100)


def _setting(value: Any) -> str:
    return f"{value + 0.0:g}".replace("-", "−") if _finite(value) else str(value)  # + 0.0: no "−0"


def _gate_key(config: GateConfig, o: Outcome, parameter: str) -> str | None:
    """``gates[i].<parameter>`` of the configured gate this outcome comes from."""
    for i, gate in enumerate(config.gates):
        if gate.type == o.gate and (gate.questions is None or o.question in gate.questions):
            return f"gates[{i}].{parameter}" if parameter in type(gate).model_fields else None
    return None


def _raters_per_item(o: Outcome, diagnostics: Mapping[str, Any], where: str) -> list[str]:
    """Spearman–Brown: ratings per item for the crowd's consensus to be as reliable as the trusted consensus."""
    if o.gate != "irr_baseline" or o.reliability is None or o.passes_on_point:
        return []
    crowd, trusted = o.reliability.crowd, o.reliability.trusted
    if not (0 < crowd < 1 and 0 < trusted < 1) or crowd >= trusted:
        return []
    design = ((diagnostics.get(o.question) or {}).get("design") or {})
    pools = [p for p in (o.details.get("crowd_pool"), o.details.get("trusted_pool")) if p]
    if len(pools) != 2:
        return []
    k_crowd, k_trusted = (_per_item(design.get(p)) for p in pools)
    if k_trusted is None or k_crowd is None:
        return []
    target = float(spearman_brown(trusted, k_trusted))
    if not 0 < target < 1:
        return []
    needed = math.ceil(raters_needed(crowd, target) - 1e-9)
    return [f"{where}: more raters per item: {needed} crowd ratings per item (now {k_crowd:.1f}) make the crowd's "
            f"consensus label as reliable as the trusted consensus of {k_trusted:.1f} ({fmt(target)}, Spearman–Brown "
            f"from the crowd IRR {fmt(crowd)}); the check compares single ratings, so this plans the aggregation, "
            "it does not pass the check"]


def _per_item(pool: Any) -> float | None:
    """Mean ratings per item of a design summary's pool entry."""
    hist = (pool or {}).get("ratings_per_item_hist") or {}
    items = sum(int(c) for c in hist.values())
    return sum(int(k) * int(c) for k, c in hist.items()) / items if items else None


# ----------------------------------------------------------------------------------------- the rest
def _coverage_steps(config: GateConfig, info: Mapping[str, Any]) -> list[str]:
    common, batch_items = info.get("common_items"), info.get("batch_items")
    if not isinstance(common, int) or not isinstance(batch_items, int):
        return []
    needed = max(config.coverage.min_common_items, math.ceil(config.coverage.min_coverage * batch_items - 1e-9))
    if needed <= common:
        return []
    return [f"coverage: add trusted labels for {needed - common} more batch items (shared now {common}, needed "
            f"{needed}: coverage.min_common_items = {config.coverage.min_common_items}, coverage.min_coverage = "
            f"{config.coverage.min_coverage:g} of {batch_items} items)"]


def _validation_steps(config: GateConfig, summary: Mapping[str, Any]) -> list[str]:
    lines = []
    for table, result in summary.items():
        if not isinstance(result, Mapping) or not result.get("n_invalid"):
            continue
        n_invalid, n_rows = int(result["n_invalid"]), int(result.get("n_rows") or 0)
        share = n_invalid / n_rows if n_rows else 1.0
        lines.append(f"validation ({table}): fix the {n_invalid} invalid row(s) listed in its quarantine file, or "
                     f"set validation.on_invalid: continue with validation.max_invalid_share: {_up(share + 0.005)} "
                     f"(now {config.validation.max_invalid_share:g}) to decide without them")
        pool = config.columns.pool
        other_pools = (result.get("error_counts") or {}).get(f"{pool}:pool")
        if other_pools and table == config.pools.crowd and not config.batch.where \
                and config.pools.unknown == "invalid":
            # rows of a third pool in one export (refused by pools.unknown: invalid): a row selection counts them as
            # outside it, the default leaves them out of the measurement; neither counts them as invalid
            lines.append(f"validation ({table}): if the {other_pools} row(s) of other pools belong to another "
                         f"vendor or round, select the batch's own: batch.where: {{{pool}: {config.pools.crowd}}} "
                         "counts them outside the selection instead, or pools.unknown: leave_out counts them as "
                         "left out of the measurement")
    return lines


def _rater_steps(section: Mapping[str, Any], measured: bool) -> list[str]:
    flagged = [r for r in section.get("flagged") or [] if isinstance(r, Mapping)]
    lines = []
    for flag in sorted({f for r in flagged for f in r.get("flags") or []}):
        rows = sorted((r for r in flagged if flag in (r.get("flags") or [])),
                      key=lambda r: r["agreement"] if _finite(r.get("agreement")) else math.inf)
        named = ", ".join(_rater_text(r) for r in rows[:_NAMED])
        more = f" and {len(rows) - _NAMED} more (the report lists them)" if len(rows) > _NAMED else ""
        action = (section.get("policy") or {}).get(flag, "warn")
        lines.append(f"raters flagged {flag}: look at {named}{more}; raters.{flag}: exclude decides without them "
                     f"(now {action})")
    if flagged or not measured:
        return lines
    for question, judging in sorted((section.get("judging") or {}).items()):
        if judging.get("n_too_few") and judging.get("needs_min") is not None:
            lines.append(f"[{question}] raters: {judging['n_too_few']} of {judging['n_raters']} raters have too few "
                         f"items to be judged; give each at least {judging['needs_min']} items for the diagnostics "
                         "to flag a spammer or a colluder")
    return lines


def _rater_text(row: Mapping[str, Any]) -> str:
    basis = "trusted items" if row.get("agreement_basis") == "trusted" else "co-raters' items"
    n = row.get("n_agreement_items")
    interval = f" [{fmt(row.get('ci_low'))}, {fmt(row.get('ci_high'))}]" if _finite(row.get("ci_low")) else ""
    on = f" on {n} {basis}" if n is not None else ""
    return f"{row.get('rater_id')} (κ {fmt(row.get('agreement'))}{interval}{on})"


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def of_summary(summary: Mapping[str, Any]) -> list[str]:
    """The next steps of a run summary or a stored record (its ``validation`` holds them), or an empty list."""
    direct = summary.get("next_steps")
    if isinstance(direct, list):
        return [str(line) for line in direct]
    validation = summary.get("validation")
    stored = validation.get(RECORD_KEY) if isinstance(validation, Mapping) else None
    return [str(line) for line in stored] if isinstance(stored, list) else []


__all__ = ["RECORD_KEY", "next_steps", "of_summary"]
