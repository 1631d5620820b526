"""What to do next about a REVIEW or a REJECT: the lines, their numbers, and every surface that carries them."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app, gate_json, gate_text, write_synthetic
from labelgate.gate.decision import GateDecision, Outcome, Reliability, check_numbers, decide, question_verdicts
from labelgate.gate.next_steps import next_steps, of_summary
from labelgate.metrics.planning import items_for_width, raters_needed, spearman_brown
from labelgate.pipeline.alerts import _text_body, build_message
from labelgate.pipeline.config import GateConfig
from labelgate.reporting.report import render_gate_report

CONFIG = GateConfig.model_validate({"gates": [
    {"type": "normalized_cross_kappa", "min_value": 0.8},
    {"type": "irr_baseline", "tolerance": 0.1, "max_excess": 0.25},
]})


def check(parameter, statistic, op, threshold, point, low, high):
    passes = point >= threshold if op == ">=" else point <= threshold
    bound = low if op == ">=" else high
    return {"parameter": parameter, "statistic": statistic, "op": op, "threshold": threshold, "point": point,
            "ci_low": low, "ci_high": high, "passes_on_point": passes,
            "passes_on_bound": bound >= threshold if op == ">=" else bound <= threshold}


def baseline(crowd, low, high, trusted=0.397, n_items=505, verdict="straddle"):
    """An IRR-baseline outcome: the crowd IRR with its interval, the difference's interval shifted alike."""
    diff = (crowd - trusted, low - trusted, high - trusted)
    checks = [check("tolerance", "difference", ">=", -0.1, *diff), check("max_excess", "difference", "<=", 0.25, *diff)]
    return Outcome("label", "irr_baseline", "blocking", crowd, diff[0] >= -0.1, verdict,
                   description="irr_baseline (tolerance 0.1, max_excess 0.25)",
                   details={"value": crowd, "ci_low": low, "ci_high": high, "ci_level": 0.95, "n_items": n_items,
                            "crowd_pool": "crowd", "trusted_pool": "trusted", "checks": checks,
                            "components": {"irr_trusted": trusted, "difference": diff[0]}},
                   reliability=Reliability(crowd, trusted, high, 0.35))


def nkx(value, low, high, n_items=400, verdict="straddle"):
    return Outcome("label", "normalized_cross_kappa", "blocking", value, value >= 0.8, verdict,
                   description="normalized_cross_kappa (min_value 0.8)",
                   details={"value": value, "ci_low": low, "ci_high": high, "ci_level": 0.95, "n_items": n_items,
                            "checks": [check("min_value", "value", ">=", 0.8, value, low, high)]},
                   reliability=Reliability(0.6, 0.7))


def test_the_reason_of_an_irr_baseline_says_its_threshold_and_how_it_is_derived():
    o = baseline(0.330, 0.286, 0.380)
    [reason] = decide([o]).reasons
    assert "crowd IRR 0.330 vs threshold 0.297 = trusted IRR 0.397 − tolerance 0.1" in reason
    assert "difference crowd − trusted −0.067, 95% interval [−0.111, −0.017], must be ≥ −0.1" in reason
    assert "straddles the threshold (point passes)" in reason
    ceiling = check_numbers(o, o.details["checks"][1])
    assert ceiling.startswith("crowd IRR 0.330 vs ceiling 0.647 = trusted IRR 0.397 + max_excess 0.25")


def test_a_rejected_point_quotes_its_value_interval_and_threshold():
    [reason] = decide([nkx(0.5, 0.4, 0.6, verdict="fail")]).reasons
    assert reason.endswith("fails on the point value and on the whole interval: normalized_cross_kappa 0.500, 95% "
                           "interval [0.400, 0.600], must be ≥ 0.8")


def test_a_straddle_gets_the_items_that_clear_the_threshold_and_the_key_that_would():
    o = nkx(0.85, 0.75, 0.95)
    lines = next_steps(CONFIG, decide([o]), [o])
    # the lower end is 0.10 below the point, the threshold 0.05: (0.10 / 0.05)² × 400 items
    assert items_for_width(400, 0.10, 0.05) == 1600
    assert lines[0] == ("[label] normalized_cross_kappa: more items: about 1600 items shared with the trusted "
                        "replication (now 400) would bring the interval's lower end (0.750) above 0.8, if the point "
                        "stays at 0.850")
    assert lines[1].startswith("[label] normalized_cross_kappa: or, deliberately, a looser threshold: "
                               "gates[0].min_value: 0.75 ")


def test_a_failing_point_inside_a_straddling_interval_is_told_that_more_items_confirm_the_failure():
    o = nkx(0.78, 0.70, 0.86)
    lines = next_steps(CONFIG, decide([o]), [o])
    n = items_for_width(400, 0.86 - 0.78, 0.80 - 0.78)
    assert f"about {n} items" in lines[0] and "upper end (0.860) below 0.8 and confirm the failure" in lines[0]
    assert lines[1].endswith("only a looser standard passes this batch, not a fix of it: gates[0].min_value: 0.78 for the point, 0.7 for the whole interval (now 0.8)")


def test_the_tolerance_that_would_pass_is_written_as_the_key_takes_it():
    o = baseline(0.330, 0.267, 0.380)  # the difference's lower end is −0.130
    lines = next_steps(CONFIG, decide([o]), [o])
    assert any("gates[1].tolerance: 0.14 (the interval's lower end −0.130 passes it)" in line
               or "gates[1].tolerance: 0.13 (the interval's lower end −0.130 passes it)" in line for line in lines)


def test_a_noisier_crowd_gets_the_raters_per_item_of_spearman_brown():
    o = baseline(0.20, 0.15, 0.25, verdict="fail")
    diagnostics = {"label": {"design": {"crowd": {"ratings_per_item_hist": {3: 100}},
                                        "trusted": {"ratings_per_item_hist": {2: 50, 4: 50}}}}}
    lines = next_steps(CONFIG, decide([o]), [o], diagnostics=diagnostics)
    target = spearman_brown(0.397, 3.0)
    needed = math.ceil(raters_needed(0.20, target))
    [line] = [line for line in lines if "raters per item" in line]
    assert line.startswith(f"[label] irr_baseline: more raters per item: {needed} crowd ratings per item (now 3.0)")
    assert "it does not pass the check" in line


def test_flagged_raters_are_named_lowest_agreement_first_and_unjudged_ones_get_their_workload():
    o = nkx(0.5, 0.4, 0.6, verdict="fail")
    flagged = [{"rater_id": f"r{i}", "flags": ["low_agreement"], "agreement": a, "ci_low": a - 0.1,
                "ci_high": a + 0.1, "agreement_basis": "trusted", "n_agreement_items": 12}
               for i, a in enumerate([0.1, -0.3, 0.0, -0.1, 0.05, -0.2, 0.15])]
    section = {"flagged": flagged, "policy": {"low_agreement": "warn"}}
    [line] = [x for x in next_steps(CONFIG, decide([o]), [o], raters=section) if x.startswith("raters flagged")]
    assert re.findall(r"r\d", line) == ["r1", "r5", "r3", "r2", "r4"]
    assert "and 2 more" in line and "raters.low_agreement: exclude" in line and "(now warn)" in line
    judging = {"label": {"n_raters": 200, "n_too_few": 200, "needs_min": 107, "needs_max": 1124}}
    lines = next_steps(CONFIG, decide([o]), [o], raters={"flagged": [], "judging": judging})
    assert lines[-1] == ("[label] raters: 200 of 200 raters have too few items to be judged; give each at least 107 "
                         "items for the diagnostics to flag a spammer or a colluder")


def test_coverage_and_validation_problems_name_their_numbers_and_keys():
    o = nkx(0.9, 0.85, 0.95, verdict="pass")
    decided = decide([o], coverage_problems=["only 12 items are shared"])
    lines = next_steps(CONFIG, decided, [o], coverage={"common_items": 12, "batch_items": 500},
                       coverage_problems=["only 12 items are shared"])
    assert lines == ["coverage: add trusted labels for 38 more batch items (shared now 12, needed 50: "
                     "coverage.min_common_items = 20, coverage.min_coverage = 0.1 of 500 items)"]
    rejected = GateDecision("REJECT", ["validation (crowd): 3 invalid rows"], [])
    lines = next_steps(CONFIG, rejected, [o], rejection="validation (crowd): 3 invalid rows",
                       validation={"crowd": {"n_rows": 200, "n_invalid": 3}})
    assert lines == ["validation (crowd): fix the 3 invalid row(s) listed in its quarantine file, or set "
                     "validation.on_invalid: continue with validation.max_invalid_share: 0.02 (now 0) to decide "
                     "without them"]


def test_accept_and_error_have_no_next_steps():
    o = nkx(0.9, 0.85, 0.95, verdict="pass")
    assert next_steps(CONFIG, decide([o]), [o]) == []
    assert next_steps(CONFIG, GateDecision("ERROR", ["load: no file"], []), []) == []


def test_question_verdict_is_apart_from_each_expectations_own():
    rows = {"normalized_cross_kappa": {"value": 0.979, "verdict": "pass", "severity": "blocking"},
            "irr_baseline": {"value": 0.33, "verdict": "review", "severity": "blocking"},
            "spa": {"value": 0.3, "verdict": "reject", "severity": "warning"}, "irr_crowd": {"value": 0.33}}
    assert question_verdicts({"label": rows}) == {"label": "REVIEW"}
    text = gate_text({"decision": "REVIEW", "batch_id": "b", "metrics": {"label": rows}})
    assert "  [label]  question: REVIEW" in text
    assert re.search(r"normalized_cross_kappa\s+0\.979 .*  pass", text)


def test_every_surface_prints_the_same_lines():
    steps = ["[label] irr_baseline: more items: about 1787 items", "raters flagged low_agreement: look at r1"]
    summary = {"decision": "REVIEW", "batch_id": "b", "reasons": ["why"], "metrics": {},
               "validation": {"next_steps": steps}}
    assert of_summary(summary) == steps  # a stored record keeps them in its validation JSON
    assert gate_json(summary)["next_steps"] == steps
    assert [line for line in gate_text(summary).splitlines() if "next:" in line] == [f"  next: {s}" for s in steps]
    _, payload = build_message("REVIEW", {**summary, "next_steps": steps})
    assert payload["next_steps"] == steps
    assert "Next steps:\n- [label] irr_baseline" in _text_body(payload)
    page = render_gate_report({**summary, "next_steps": steps})
    assert "What to do next" in page and "about 1787 items" in page


# ------------------------------------------------------------------------- end to end, on synthetic scenarios
runner = CliRunner()


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    root = tmp_path_factory.mktemp("next")
    config = root / "gate.yaml"
    # a crowd from the trusted pool's own process, held to no shortfall at all: its interval straddles the rule
    config.write_text(f"""
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
  - {{type: irr_baseline, tolerance: 0.0}}
interval: {{n_boot: 200}}
store: {{url: "sqlite:///{(root / 'results.db').as_posix()}"}}
reports: {{dir: "{(root / 'reports').as_posix()}"}}
""", encoding="utf-8")
    return {"good": write_synthetic(root / "good", "good", 600, seed=3),
            "random": write_synthetic(root / "random", "random", 600, seed=4), "config": config}


@pytest.mark.parametrize(("scenario", "decision", "code"), [("good", "REVIEW", 2), ("random", "REJECT", 1)])
def test_review_and_reject_carry_threshold_interval_and_a_numbered_next_step_everywhere(scenarios, scenario,
                                                                                        decision, code):
    files = scenarios[scenario]
    args = ["gate", "--batch", str(files["batch"]), "--trusted", str(files["trusted"]), "--config",
            str(scenarios["config"]), "--prefect", "never", "--force"]
    text = runner.invoke(app, args)
    assert text.exit_code == code, text.output
    reasons = [line for line in text.stdout.splitlines() if line.startswith("  reason:")]
    steps = [line for line in text.stdout.splitlines() if line.startswith("  next:")]
    assert any("threshold" in r and "interval [" in r for r in reasons), text.stdout
    assert steps and any(re.search(r"\d", s) for s in steps), text.stdout
    result = runner.invoke(app, [*args, "--json"])
    payload = json.loads(result.stdout)
    assert payload["decision"] == decision
    assert payload["next_steps"] == [s.removeprefix("  next: ") for s in steps]
    assert any(re.search(r"about \d+ items|\d+ crowd ratings per item|gates\[\d\]\.\w+|raters\.\w+", s)
               for s in payload["next_steps"])
    page = open(payload["report"], encoding="utf-8").read()
    stored = json.loads(open(payload["report"].replace("report.html", "result.json"), encoding="utf-8").read())
    assert stored["next_steps"] == payload["next_steps"]
    assert "What to do next" in page and "irr_crowd" in stored["metrics"]["label"]
    shown = html.unescape(page)
    for line in payload["next_steps"] + payload["reasons"]:
        assert line in shown


def test_rows_of_a_third_pool_get_the_row_selection_that_leaves_them_outside():
    rejected = GateDecision("REJECT", ["validation (crowd): 31 invalid rows"], [])
    validation = {"crowd": {"n_rows": 2968, "n_invalid": 31, "error_counts": {"pool:pool": 31}}}
    refusing = CONFIG.model_copy(update={"pools": CONFIG.pools.model_copy(update={"unknown": "invalid"})})
    lines = next_steps(refusing, rejected, [], rejection="validation (crowd): 31 invalid rows", validation=validation)
    assert lines[-1] == ("validation (crowd): if the 31 row(s) of other pools belong to another vendor or round, "
                         "select the batch's own: batch.where: {pool: crowd} counts them outside the selection "
                         "instead, or pools.unknown: leave_out counts them as left out of the measurement")
    # by default a third pool is left out, so pool:pool failures are empty pools or the trusted pool's rows
    lines = next_steps(CONFIG, rejected, [], rejection="validation (crowd): 31 invalid rows", validation=validation)
    assert not any("other pools" in line for line in lines)
