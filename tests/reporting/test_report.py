"""Gate and monitoring HTML reports on synthetic runs: content, escaping, figures and their marks, the
figure limit, the path without matplotlib, self-containment.

The synthetic summaries follow the data contract of ``labelgate.flows.gate`` (metrics rows) and of the
monitor (windows, episodes, per-rater and design rows). ``tests/reporting/test_browser.py`` reuses the builders.
"""

from __future__ import annotations

import html
import json
import math
import random
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from labelgate.reporting import plots, sections
from labelgate.reporting.gate_page import FIGURE_QUESTIONS
from labelgate.reporting.report import (
    history_from_runs,
    render_gate_report,
    render_monitor_report,
    write_gate_report,
    write_monitor_report,
)

HOSTILE_RATER = "<script>alert(1)</script>"
HOSTILE_LABEL = "say \"yes\" & 'no' <b>&amp;</b>"
HOSTILE_QUESTION = 'tone "A" & <B>'
T0 = datetime(2024, 3, 1, tzinfo=UTC)


# ------------------------------------------------------------------------------------------ builders
def metric(value: float | None, half: float = 0.05, **extra: Any) -> dict[str, Any]:
    """A metrics row: value with a symmetric interval (None: not computed)."""
    if value is None:
        return {"value": None, "ci_low": None, "ci_high": None, **extra}
    return {"value": value, "ci_low": value - half, "ci_high": value + half, **extra}


def question_metrics(nk: float, half: float, irr_crowd: float = 0.45, irr_trusted: float = 0.42,
                     min_value: float = 0.8, rho: float | None = None) -> dict[str, Any]:
    """The rows the gate flow stores for one question (normalized κx gate, its components, IRR gate, SPA)."""
    low, high = nk - half, nk + half
    verdict = "pass" if low >= min_value else "reject" if high < min_value else "review"
    kx = nk * math.sqrt(irr_crowd * irr_trusted)
    rows = {
        "normalized_cross_kappa": metric(nk, half, ci_level=0.95, gate="normalized_cross_kappa",
                                         severity="blocking", verdict=verdict,
                                         thresholds={"min_value": min_value}, n_items=480, reason=None),
        "cross_kappa": metric(kx, 0.03, ci_level=0.95, gate="cross_kappa", severity="warning",
                              verdict="pass" if kx >= 0.2 else "reject", thresholds={"min_value": 0.2},
                              n_items=480, reason=None),
        "irr_crowd": metric(irr_crowd, 0.04), "irr_trusted": metric(irr_trusted, 0.04),
        "irr_baseline": metric(irr_crowd, 0.04, ci_level=0.95, gate="irr_baseline", severity="blocking",
                               verdict="pass", thresholds={"tolerance": 0.1}, n_items=480, reason=None),
        "difference": metric(irr_crowd - irr_trusted, 0.05), "ratio": metric(irr_crowd / irr_trusted, 0.1),
        "spa": metric(0.61, 0.02, ci_level=0.95, gate="spa", severity="warning", verdict="pass",
                      thresholds={"min_value": 0.4}, n_items=1000, reason=None),
    }
    if rho is not None:
        rows["disattenuated_correlation"] = metric(rho, 0.06)
    return rows


def rater_rows(rng: random.Random, n_crowd: int = 40, n_trusted: int = 5) -> list[dict[str, Any]]:
    """Per-rater rows: one hostile low-agreement rater, a colluding pair, the rest ordinary."""
    rows = []
    for i in range(n_crowd + n_trusted):
        pool = "crowd" if i < n_crowd else "trusted"
        rater = HOSTILE_RATER if i == 0 else f"{pool}-{i:03d}"
        kappa = 0.05 if i == 0 else rng.uniform(0.25, 0.75)
        flags = ["low_agreement"] if i == 0 else ["collusion"] if i in (1, 2) else []
        n = rng.choice([5, 10, 20, 50, 100, 400])
        rows.append({"rater_id": rater, "pool": pool, "n_ratings": n, "n_shared_items": n // 2,
                     "kappa_vs_trusted": kappa if pool == "crowd" else None,
                     "kappa_ci_low": kappa - 0.1, "kappa_ci_high": kappa + 0.1, "loo_agreement": kappa + 0.05,
                     "bias": rng.uniform(0, 0.2), "flags": flags,
                     "partners": ["crowd-002" if i == 1 else "crowd-001"] if i in (1, 2) else []})
    return rows


def design_row() -> dict[str, Any]:
    return {"crowd": {"n_items": 500, "n_ratings": 1570, "ratings_per_item_hist": {"3": 450, "4": 40, "5": 10}},
            "trusted": {"n_items": 480, "n_ratings": 1440, "ratings_per_item_hist": {"3": 480}}}


def questions(n: int) -> list[str]:
    names = [f"question-{i:02d}" for i in range(n)]
    if n > 1:
        names[1] = HOSTILE_QUESTION
    return names


def gate_summary(decision: str, n_questions: int = 3, diagnostics: bool = True, rho: bool = True,
                 quarantine_file: str | None = None, seed: int = 0) -> dict[str, Any]:
    """A gate run summary whose first question drives ``decision`` (the others pass)."""
    rng = random.Random(seed)
    first = {"ACCEPT": (0.95, 0.05), "REJECT": (0.3, 0.1), "REVIEW": (0.8, 0.1)}[decision]
    metrics, diag = {}, {}
    for i, q in enumerate(questions(n_questions)):
        nk, half = first if i == 0 else (rng.uniform(0.9, 1.05), 0.05)
        metrics[q] = question_metrics(nk, half, rho=nk + rng.uniform(-0.05, 0.05) if rho else None)
        diag[q] = {"raters": rater_rows(rng), "design": design_row()}
    reasons = {"ACCEPT": [], "REJECT": ["[question-00] normalized_cross_kappa (min_value 0.8): fails on the point "
                                       "value and on the whole interval"],
               "REVIEW": ["[question-00] normalized_cross_kappa (min_value 0.8): the interval straddles the "
                          "threshold"]}[decision]
    summary = {
        "decision": decision, "batch_id": f"batch <{decision.lower()}> & co", "run_id": "run-1",
        "batch_hash": "ab" * 32, "config_hash": "cd" * 32, "reasons": reasons,
        "warnings": [f"label {HOSTILE_LABEL} is rare"],
        "coverage": {"batch_items": 1000, "trusted_items": 480, "common_items": 480, "coverage": 0.48},
        "metrics": metrics,
        "validation": {"crowd": {"table": "crowd", "n_rows": 3003, "n_valid": 3000, "n_invalid": 3,
                                 "invalid_share": 0.001, "error_counts": {"label:category": 3},
                                 "passed_policy": True,
                                 "reason": f"3 rows quarantined: label {HOSTILE_LABEL} is not a category"},
                       "trusted": {"table": "trusted", "n_rows": 1440, "n_valid": 1440, "n_invalid": 0,
                                   "invalid_share": 0.0, "error_counts": {}, "passed_policy": True,
                                   "reason": "All 1440 rows of the trusted table passed validation."}},
        "reports": {"data_docs": "file:///tmp/gx/index.html", **({"quarantine_crowd": quarantine_file}
                                                                  if quarantine_file else {})},
        "timing": {"load": 0.01, "measure": 1.2}, "alerts": [], "created_at": T0.isoformat(),
        "finished_at": (T0 + timedelta(seconds=5)).isoformat(),
    }
    if diagnostics:
        summary["diagnostics"] = diag
    return summary


def history(question_names: list[str], n_windows: int = 10, episode: bool = True) -> dict[str, Any]:
    """Monitor windows (window and cumulative) per question; one open drift episode on the first question."""
    windows = []
    for q in question_names:
        for k in range(n_windows):
            start, end = T0 + timedelta(days=k), T0 + timedelta(days=k + 1)
            drop = 0.3 if (episode and q == question_names[0] and k >= 6) else 0.0
            for scope, value in (("window", 0.95 - drop), ("cumulative", 0.95 - drop * (k - 5) / k if drop else 0.95)):
                windows.append({"question": q, "metric": "normalized_cross_kappa", "window_start": start.isoformat(),
                                "window_end": end.isoformat(), "scope": scope, "value": value,
                                "ci_low": value - 0.08, "ci_high": value + 0.08, "n_items": 200,
                                "n_ratings": 600, "threshold": 0.8})
    episodes = []
    if episode:
        episodes.append({"episode_id": "ep-1", "question": question_names[0], "metric": "normalized_cross_kappa",
                         "kind": "change", "opened_at": (T0 + timedelta(days=6)).isoformat(), "closed_at": None,
                         "reason": f"normalized κx dropped; rater {HOSTILE_RATER} labels {HOSTILE_LABEL}",
                         "worst_raters": [HOSTILE_RATER, "crowd-007"]})
    return {"windows": windows, "episodes": episodes}


# ----------------------------------------------------------------------------------------- helpers
class Parsed(HTMLParser):
    """Tags, attributes and text of a page, as a browser's HTML parser sees them."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def svg_kind(svg: str) -> str:
    return re.search(r'class="lg-chart lg-([a-z]+)"', svg).group(1)


def svg_title(svg: str) -> str:
    return re.search(r"<title>([^<]*)</title>", svg).group(1)


def mark_groups(svg: str, kind: str | None = None) -> list[tuple[str, int]]:
    """``(kind, data-n)`` of every data mark of a figure (``kind``: only marks whose class starts with it)."""
    found = [(k, int(n)) for k, n in re.findall(r'<g class="mark ([^"]+)" data-n="(\d+)"', svg)]
    return [(k, n) for k, n in found if kind is None or k == kind or k.startswith(kind + " ")]


def marks_of(svg: str, kind: str) -> int:
    """Data items drawn by the marks of ``kind``."""
    return sum(n for _, n in mark_groups(svg, kind))


def charts_of(page: str, kind: str) -> list[str]:
    return [s for s in svgs(page) if svg_kind(s) == kind]


def chart_titled(page: str, title: str) -> str:
    return next(s for s in svgs(page) if svg_title(s) == title)


def texts(svg: str) -> list[str]:
    return re.findall(r"<text\b[^>]*>([^<]*)</text>", svg)


def tooltips(svg: str, kind: str) -> list[str]:
    """The per-item tooltips inside the marks of ``kind`` (``<g><title>…</title><use/></g>``)."""
    out = []
    for body in re.findall(rf'<g class="mark {kind}[^"]*" data-n="\d+">(.*?)</g></g>(?=<|$)', svg, flags=re.S):
        out += re.findall(r"<g><title>([^<]*)</title><(?:use|path)\b", body)
    return out


# ------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize(("decision", "state"), [("ACCEPT", "pass"), ("REJECT", "reject"), ("REVIEW", "review")])
def test_gate_report_shows_decision_reasons_and_every_expectation(decision: str, state: str) -> None:
    summary = gate_summary(decision)
    page = render_gate_report(summary)
    text = "".join(Parsed(page).text)
    assert f">{decision}</span>" in page
    for reason in summary["reasons"]:
        assert reason in text
    for q, rows in summary["metrics"].items():
        assert q in text
        for name, row in rows.items():
            assert name in text or sections.NAMES[name] in text
            assert f"{row['value']:.3f}" in text
            if row.get("thresholds"):
                assert ", ".join(f"{k} {v}" for k, v in row["thresholds"].items()) in text
            assert f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" in text
    first = summary["metrics"]["question-00"]["normalized_cross_kappa"]
    assert first["verdict"] == state
    assert f'<span class="chip {state}">{state}</span>' in page
    if decision == "ACCEPT":
        assert "every blocking expectation passes" in text


def test_overview_chart_sorts_questions_and_draws_the_threshold() -> None:
    summary = gate_summary("REJECT", n_questions=6)
    page = render_gate_report(summary)
    overview = chart_titled(page, "Normalized κx per question with intervals")
    assert marks_of(overview, "point") == 6 and marks_of(overview, "ci") == 6
    # one shared minimum (0.8): one threshold line, labelled
    assert overview.count('class="threshold"') == 1 and "threshold-label" in overview
    values = {q: summary["metrics"][q]["normalized_cross_kappa"]["value"] for q in summary["metrics"]}
    # each point's tooltip names its question; points go down the figure as the value grows
    dots = re.findall(r"<g><title>([^<:]+): [^<]*</title><use x=\"([\d.]+)\" y=\"([\d.]+)\"", overview)
    assert len(dots) == 6
    top_down = [html.unescape(q) for q, _, y in sorted(dots, key=lambda d: float(d[2]))]
    assert top_down == sorted(values, key=values.get)
    assert [float(x) for _, x, _ in sorted(dots, key=lambda d: float(d[2]))] == sorted(float(x) for _, x, _ in dots)
    table_rows = re.findall(r'<tr><td><a href="#q-', page)
    assert len(table_rows) == 6


def test_triangle_per_question_with_intervals_and_normalized_threshold() -> None:
    summary = gate_summary("REVIEW", n_questions=2)
    page = render_gate_report(summary)
    triangles = charts_of(page, "triangle")
    assert len(triangles) == 2
    rows = summary["metrics"]["question-00"]
    tri = triangles[0]
    assert marks_of(tri, "node") == 3 and marks_of(tri, "edge") == 1
    for name in ("irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa"):
        assert f"[{rows[name]['ci_low']:.3f}, {rows[name]['ci_high']:.3f}]" in tri
    assert "min 0.80" in tri
    # the review verdict colours the apex
    assert "stroke: #9a6700" in tri


def test_overview_of_both_pools_and_fig7_only_when_disattenuated_correlation_is_computed() -> None:
    page = render_gate_report(gate_summary("REJECT", n_questions=4, rho=True))
    pools = chart_titled(page, "IRR crowd, IRR trusted and κx per question")
    assert marks_of(pools, "point") == 3 * 4 and marks_of(pools, "ci") == 3 * 4
    fig7 = chart_titled(page, "Normalized κx against ρxy")
    assert svg_kind(fig7) == "scatter" and 'class="diagonal"' in fig7
    assert marks_of(fig7, "cloud") == 4 and len(tooltips(fig7, "cloud")) == 4
    # the failing question is keyed beside its dot and named in the column
    assert texts(fig7).count("1") >= 1 and "1  question-00" in texts(fig7)
    page = render_gate_report(gate_summary("ACCEPT", n_questions=4, rho=False))
    assert not [s for s in svgs(page) if "ρxy" in svg_title(s)]
    # a section with nothing to show is left out, not announced as "not computed"
    assert "disattenuated correlation" not in page and "Not computed for this run" not in page


def test_rater_diagnostics_highlight_and_key_flagged_raters() -> None:
    summary = gate_summary("REJECT", n_questions=1)
    page = render_gate_report(summary)
    raters = summary["diagnostics"]["question-00"]["raters"]
    scatter = chart_titled(page, "Rater agreement with the trusted pool, question-00")
    drawn = [r for r in raters if r["kappa_vs_trusted"] is not None]
    flagged = [r for r in raters if r["flags"]]
    assert marks_of(scatter, "cloud") + marks_of(scatter, "point highlight") == len(drawn)
    assert marks_of(scatter, "point highlight") == len(flagged) == 3
    # lowest κ first: the hostile rater is key 1 in the figure and row 1 in the table
    keys = [t for t in texts(scatter) if re.match(r"\d  ", t)]
    assert keys[0] == "1  &lt;script&gt;alert(1)&lt;/scr…" and len(keys) == 3
    assert re.search(r'<tr class="labelled"><td class="num">1</td><td><code>&lt;script&gt;', page)
    text = "".join(Parsed(page).text)
    assert "45 raters (crowd: 40, trusted: 5); 3 flagged (collusion × 2, low_agreement × 1)" in text
    assert "5 raters without a κ against the trusted pool are not drawn" in text
    assert "crowd-002" in text  # a partner of the colluding pair


def test_hundreds_of_raters_with_a_hundred_flagged_keep_the_figure_readable() -> None:
    """600 raters, 100 flagged: labels stay bounded, every flagged rater keeps a tooltip, the rest are in the table."""
    rng = random.Random(5)
    raters = rater_rows(rng, n_crowd=600, n_trusted=0)
    for i, r in enumerate(raters):
        r["flags"] = ["low_agreement"] if i % 6 == 0 else []
        r["rater_id"] = f"rater-{i:04d}-with-a-long-identifier"
    summary = gate_summary("REJECT", n_questions=1)
    summary["diagnostics"]["question-00"]["raters"] = raters
    page = render_gate_report(summary)
    scatter = chart_titled(page, "Rater agreement with the trusted pool, question-00")
    assert marks_of(scatter, "point highlight") == 100 and marks_of(scatter, "cloud") == 500
    assert len(tooltips(scatter, "point highlight")) == 100
    labels = [t for t in texts(scatter) if "rater-" in t]
    assert len(labels) == plots.MAX_LABELS  # only the worst are named, whatever the number of raters
    assert len(texts(scatter)) <= 40  # ticks, axis labels, legend, keys: bounded
    # the translucent cloud: more raters, more transparent
    assert re.search(r'fill-opacity: 0\.[0-3]\d*', scatter)
    assert page.count('<tr class="labelled">') == plots.MAX_LABELS
    assert "100 flagged (low_agreement × 100)" in page


def test_design_histogram_and_coverage_with_quarantine_reasons(tmp_path: Path) -> None:
    quarantine = tmp_path / "quarantine-crowd.csv"
    quarantine.write_text('_row,item_id,label,_reasons\n7,i1,x,"label: category: ' + HOSTILE_LABEL.replace('"', '""')
                          + ' is not one of the categories"\n', encoding="utf-8")
    page = render_gate_report(gate_summary("ACCEPT", n_questions=1, quarantine_file=str(quarantine)))
    bars = charts_of(page, "bars")
    assert len(bars) == 1 and marks_of(bars[0], "bar") == 4  # crowd 3, 4, 5 and trusted 3
    text = "".join(Parsed(page).text)
    for needle in ("items in the batch", "48.0%", "label:category", "3,003", "First 1 quarantined rows",
                   f"label: category: {HOSTILE_LABEL} is not one of the categories"):
        assert needle in text
    assert quarantine.as_uri() in page


def test_missing_parts_show_not_computed_notes() -> None:
    summary = gate_summary("ACCEPT", n_questions=1, diagnostics=False, rho=False)
    page = render_gate_report(summary)
    for note in ("Per-rater diagnostics were not computed for this run.",
                 "The ratings-per-item distribution was not computed for this run.",):
        assert note in page
    # what a gate run never has (a monitoring history, ρxy of nominal labels) is left out, not announced
    for absent in ("Agreement over time", "Monitoring history", "disattenuated correlation"):
        assert absent not in page
    error = render_gate_report({"decision": "ERROR", "batch_id": "b", "reasons": ["load: InputError: no file"],
                                "error_step": "load", "metrics": {}})
    assert "No metric was computed for this run." in error and "load: InputError: no file" in error
    assert "No question was measured in this run." in error


def test_monitoring_with_an_episode_in_gate_and_monitor_reports() -> None:
    names = questions(3)
    hist = history(names)
    summary = gate_summary("REJECT", n_questions=3)
    for page in (render_gate_report(summary, hist), render_monitor_report({**hist, "runs": [summary]})):
        series = charts_of(page, "timeseries")
        assert len(series) == 3
        assert [marks_of(s, "episode") for s in series] == [1, 0, 0]
        for chart in series:
            # window (band + line + 10 points) and cumulative (a dashed line only)
            assert marks_of(chart, "band") == 1 and marks_of(chart, "line") == 2 and marks_of(chart, "point") == 10
            assert len(tooltips(chart, "point")) == 10
            assert "threshold 0.80" in chart
        strip = charts_of(page, "strip")
        assert len(strip) == 1 and marks_of(strip[0], "line") == 3 and marks_of(strip[0], "episode") == 1
        text = "".join(Parsed(page).text)
        assert f"normalized κx dropped; rater {HOSTILE_RATER} labels {HOSTILE_LABEL}" in text
        assert "open" in text
    monitor = render_monitor_report({**hist, "runs": [summary], "since": "2024-03-01"})
    # windows, not rows: 3 questions of 10 windows each (their cumulative rows are no window)
    assert "1 gate run(s), 30 window(s), 1 drift episode(s) (1 open) since 2024-03-01" in "".join(Parsed(monitor).text)
    # the question with the open episode comes first and is unfolded
    first = re.search(r'<details id="[^"]+"( open)?><summary>Question <code>([^<]+)</code>', monitor)
    assert first.group(1) == " open" and first.group(2) == "question-00"


def test_time_axis_and_threshold_steps_follow_the_windows() -> None:
    hist = history(["q"], n_windows=4, episode=False)
    for k, w in enumerate(hist["windows"]):
        w["threshold"] = 0.7 if k < 4 else 0.8  # threshold raised half way
    page = render_monitor_report(hist)
    chart = charts_of(page, "timeseries")[0]
    assert "2024-03-02" in texts(chart) and "2024-03-05" in texts(chart)
    assert 'class="threshold step"' in chart  # a step, not one line


def test_hostile_strings_are_text_never_markup(tmp_path: Path) -> None:
    quarantine = tmp_path / "q.csv"
    quarantine.write_text(f'_row,_reasons\n1,"{HOSTILE_RATER}"\n', encoding="utf-8")
    summary = gate_summary("REJECT", quarantine_file=str(quarantine))
    summary["reasons"].append(f"rater {HOSTILE_RATER} has label {HOSTILE_LABEL}")
    summary["metrics"][HOSTILE_QUESTION][HOSTILE_LABEL] = metric(0.5, reason=HOSTILE_RATER)
    summary["reports"]["evil"] = "javascript:alert(1)"
    summary["reports"]["evil2"] = "' onmouseover='alert(1)"
    page = render_gate_report(summary, history(questions(3)))
    parsed = Parsed(page)
    assert "script" not in parsed.tags
    # the only <b> elements are the template's own "open" marks, never a label's <b>
    assert parsed.tags.count("b") == sum(1 for a in parsed.attrs if a == ("b", "class", "reject")) > 0
    assert not [a for a in parsed.attrs if a[1].startswith("on")]  # no event handler attribute
    assert not [a for a in parsed.attrs if a[1] == "href" and (a[2] or "").lower().startswith("javascript")]
    text = "".join(parsed.text)
    assert text.count(HOSTILE_RATER) >= 4  # reason, rater table, episode, quarantine sample
    assert HOSTILE_LABEL in text and HOSTILE_QUESTION in text
    # in the figures too: the rater id is escaped text in its tooltip and in the key column
    scatter = chart_titled(page, "Rater agreement with the trusted pool, question-00")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in scatter and "<script>" not in scatter
    assert any(HOSTILE_QUESTION.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in t
               for t in texts(chart_titled(page, "Normalized κx per question with intervals")))
    # no raw occurrence anywhere in the page
    assert HOSTILE_RATER not in page and HOSTILE_LABEL not in page and HOSTILE_QUESTION not in page


def test_dollar_signs_in_ids_are_drawn_as_typed_never_as_mathtext() -> None:
    summary = gate_summary("REJECT", n_questions=1)
    rows = summary["diagnostics"]["question-00"]["raters"]
    rows[0]["rater_id"] = "$x^2$ and $\\frac{a}$"
    summary["metrics"] = {"q $1$ or $2$": summary["metrics"]["question-00"]}
    summary["diagnostics"] = {"q $1$ or $2$": summary["diagnostics"]["question-00"]}
    page = render_gate_report(summary)
    scatter = chart_titled(page, "Rater agreement with the trusted pool, q $1$ or $2$")
    assert "1  $x^2$ and $\\frac{a}$" in texts(scatter)
    assert "q $1$ or $2$" in texts(chart_titled(page, "Normalized κx per question with intervals"))
    assert "mathdefault" not in page and "<!--" not in page  # no mathtext, no mathtext comment


def test_every_chart_declares_the_marks_it_draws() -> None:
    page = render_gate_report(gate_summary("REJECT", n_questions=3), history(questions(3)))
    charts = svgs(page)
    kinds = {svg_kind(s) for s in charts}
    assert kinds == {"intervals", "groups", "triangle", "scatter", "bars", "timeseries", "strip"}
    for chart in charts:
        declared = int(re.search(r'data-marks="(\d+)"', chart).group(1))
        assert declared == sum(n for _, n in mark_groups(chart)) > 0


def test_thousands_of_raters_become_a_density_map_and_flagged_ones_stay_visible() -> None:
    rng = random.Random(3)
    raters = rater_rows(rng, n_crowd=3000, n_trusted=0)
    summary = gate_summary("ACCEPT", n_questions=1)
    summary["diagnostics"]["question-00"]["raters"] = raters
    page = render_gate_report(summary)
    scatter = chart_titled(page, "Rater agreement with the trusted pool, question-00")
    assert mark_groups(scatter, "cloud") == [("cloud density", 2997)] and marks_of(scatter, "point highlight") == 3
    assert len(tooltips(scatter, "point highlight")) == 3
    assert scatter.count("<use ") < 1500  # hexagons, not one dot per rater
    assert len(page) < 400_000


def test_only_the_worst_questions_get_their_own_figures() -> None:
    n = FIGURE_QUESTIONS + 3
    summary = gate_summary("REJECT", n_questions=n)
    worst = "question-05"
    summary["metrics"][worst]["normalized_cross_kappa"].update(value=0.5, ci_low=0.4, ci_high=0.6, verdict="reject")
    page = render_gate_report(summary, history(questions(n), n_windows=3))
    triangles = [svg_title(s) for s in charts_of(page, "triangle")]
    assert len(triangles) == FIGURE_QUESTIONS
    assert {"xRR triangle of question-00", f"xRR triangle of {worst}"} <= set(triangles)
    assert len([s for s in charts_of(page, "scatter") if "Rater agreement" in svg_title(s)]) == FIGURE_QUESTIONS
    assert len(charts_of(page, "bars")) == len(charts_of(page, "timeseries")) == FIGURE_QUESTIONS
    # the overview figures still cover every question
    assert marks_of(chart_titled(page, "Normalized κx per question with intervals"), "point") == n
    assert marks_of(charts_of(page, "strip")[0], "line") == n
    assert f"Figures are drawn for the {FIGURE_QUESTIONS} questions with the worst verdicts" in page
    # a question without figures keeps its numbers in tables: ratings per item and a summary over time
    assert page.count("<th>ratings per item</th>") == 3 and page.count("<th>latest value</th>") == 3


def test_without_matplotlib_the_report_has_every_table_and_one_install_note(monkeypatch, tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # import matplotlib now raises ImportError
    summary = gate_summary("REJECT", n_questions=2)
    paths = write_gate_report(summary, tmp_path / "run", history=history(questions(2)))
    page = Path(paths["html"]).read_text(encoding="utf-8")
    assert "<svg" not in page
    assert page.count("pip install &#39;labelgate[report]&#39;") == 1
    text = "".join(Parsed(page).text)
    assert "pip install 'labelgate[report]'" in text
    for needle in ("0.300", "[0.200, 0.400]", "45 raters (crowd: 40, trusted: 5)", HOSTILE_RATER, "ratings per item",
                   "latest value", "items in the batch"):
        assert needle in text
    monitor = render_monitor_report({**history(questions(2)), "runs": [summary]})
    assert "<svg" not in monitor and "pip install &#39;labelgate[report]&#39;" in monitor


def test_a_failing_figure_becomes_a_note_not_an_error(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("no <canvas>")

    monkeypatch.setattr(plots, "scatter_chart", boom)
    page = render_gate_report(gate_summary("REJECT", n_questions=1))
    assert "This figure could not be drawn (RuntimeError: no &lt;canvas&gt;)." in page
    assert charts_of(page, "triangle") and not charts_of(page, "scatter")


def test_figures_leave_the_matplotlib_state_of_the_process_alone() -> None:
    """In a fresh process: no pyplot (hence no backend chosen or switched), rcParams as they were."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import matplotlib; "
            "from test_report import gate_summary, history, questions; "
            "from labelgate.reporting.report import render_gate_report; "
            "before = dict(matplotlib.rcParams.copy()); "  # copy(): reading the global would resolve the backend
            "page = render_gate_report(gate_summary('REJECT', n_questions=1), history(questions(1))); "
            "print(page.count('<svg '), dict(matplotlib.rcParams.copy()) == before, 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent)], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.split() == ["8", "True", "False"]


def test_importing_the_reports_imports_neither_matplotlib_nor_jinja2() -> None:
    code = ("import sys, labelgate.reporting.report, labelgate.reporting.plots; "
            "print(sorted(m for m in ('matplotlib', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"


def test_page_is_self_contained() -> None:
    page = render_gate_report(gate_summary("REJECT"), history(questions(3)))
    parsed = Parsed(page)
    assert not {"script", "link", "img", "image", "iframe", "object", "embed", "style"} & set(parsed.tags[1:]) - {"style"}
    assert parsed.tags.count("style") == 1  # the page's own, in <head>; none from the figures
    urls = [v for _, k, v in parsed.attrs if k in ("src", "href") and v and re.match(r"[a-z]+:", v)
            and not v.startswith("file:")]
    assert urls == []
    assert "default-src 'none'" in page
    assert all(v == "http://www.w3.org/2000/svg" for _, k, v in parsed.attrs if k.startswith("xmlns"))
    # figure ids are unique in the page (several figures share it) and every reference resolves
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r'(?:href="#|url\(#)([^")]+)', page))
    assert refs <= set(ids)


def test_write_gate_report_round_trips_through_result_json(tmp_path: Path) -> None:
    summary = gate_summary("REVIEW")
    paths = write_gate_report(summary, tmp_path / "run")
    stored = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
    assert stored["reports"]["html"] == paths["html"] and stored["metrics"] == summary["metrics"]
    first = Path(paths["html"]).read_text(encoding="utf-8")
    again = render_gate_report(stored)
    strip = re.compile(r"Written by LabelGate on [^.]+\.")
    assert strip.sub("", first) == strip.sub("", again)  # figures included: the same data, the same bytes
    # files of the run folder are linked relatively (the folder can be moved), the others by file:// URI
    assert '<a href="result.json">' in first and '<a href="report.html">' in first
    assert '<a href="file:///tmp/gx/index.html">' in first


def test_history_from_runs_gives_one_window_per_run_and_metric() -> None:
    runs = []
    for k, decision in enumerate(["ACCEPT", "REJECT", "ERROR"]):
        run = gate_summary(decision if decision != "ERROR" else "ACCEPT", n_questions=2)
        run.update(decision=decision, batch_id=f"b{k}", created_at=(T0 + timedelta(days=k)).isoformat(),
                   finished_at=None)
        runs.append(run)
    windows = history_from_runs(runs)["windows"]
    followed = {"normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted", "disattenuated_correlation", "spa"}
    assert {w["metric"] for w in windows} == followed  # not irr_baseline, difference, ratio
    assert len(windows) == 2 * 2 * len(followed)  # 2 runs (the ERROR run has no window) x 2 questions
    nk = [w for w in windows if w["metric"] == "normalized_cross_kappa" and w["question"] == "question-00"]
    assert [w["batch_id"] for w in nk] == ["b0", "b1"] and {w["threshold"] for w in nk} == {0.8}
    page = render_monitor_report({**history_from_runs(runs), "runs": runs})
    # per question: normalized κx; IRRs and κx together; ρxy; SPA
    charts = charts_of(page, "timeseries")
    assert len(charts) == 2 * 4
    triangle_sides = [c for c in charts if svg_title(c).startswith("IRR crowd · IRR trusted · κx over time")]
    assert len(triangle_sides) == 2 and all(marks_of(c, "line") == 3 for c in triangle_sides)


def test_write_monitor_report_creates_folders(tmp_path: Path) -> None:
    path = write_monitor_report({"windows": [], "episodes": [], "runs": []}, tmp_path / "a" / "b.html")
    assert Path(path).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def _template_environment(cache: Any) -> Any:
    import jinja2

    from labelgate.reporting import report

    env = jinja2.Environment(loader=report._environment().loader, autoescape=True, bytecode_cache=cache,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["t"] = report._environment().filters["t"]
    return env


def test_compiled_templates_are_reused_and_a_broken_cache_never_fails_a_report(tmp_path, monkeypatch):
    from labelgate.reporting import report

    cache = report._bytecode_cache()
    assert cache is not None
    cache.directory = str(tmp_path)  # type: ignore[attr-defined]
    _template_environment(cache).get_template("gate.html.j2")
    assert list(tmp_path.iterdir())  # the compiled template was written

    fresh = _template_environment(cache)

    def no_compile(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled although the cache holds the template")

    monkeypatch.setattr(fresh, "compile", no_compile)
    assert fresh.get_template("gate.html.j2") is not None  # loaded from the cache, not compiled

    cache.directory = str(tmp_path / "missing")  # type: ignore[attr-defined]  # nothing can be read or written
    assert _template_environment(cache).get_template("gate.html.j2") is not None
    assert not (tmp_path / "missing").exists()


def test_the_rater_chart_reads_at_a_thousand_raters() -> None:
    rng = random.Random(5)
    rows = []
    for i in range(1000):
        kappa, n = rng.uniform(-0.3, 0.9), rng.choice([3, 5, 10, 40])
        # few items: intervals far wider than kappa's range (a Wald interval of 3 items reaches -3)
        rows.append({"rater_id": f"crowd-r{i:04d}", "pool": "crowd", "n_ratings": n, "n_shared_items": n,
                     "kappa_vs_trusted": kappa, "kappa_ci_low": kappa - 9 / n, "kappa_ci_high": kappa + 9 / n,
                     "flags": ["low_agreement"] if i < 30 else []})
    summary = gate_summary("REJECT", n_questions=1)
    summary["diagnostics"]["question-00"]["raters"] = rows
    page = render_gate_report(summary)
    scatter = chart_titled(page, "Rater agreement with the trusted pool, question-00")
    ticks = [float(t.replace("−", "-")) for t in texts(scatter) if re.fullmatch(r"[−-]?\d+(\.\d+)?", t)]
    # the y axis stays within kappa's range: no tick at -3 because of intervals nobody draws
    assert ticks and min(ticks) >= -1.1
    assert "td code{white-space:nowrap}" in page  # rater ids never wrap in the tables


def test_an_episode_of_several_alarms_is_shaded_on_each_of_its_series_and_lists_them():
    windows = [{"question": "q", "metric": m, "window_start": (T0 + timedelta(days=k)).isoformat(),
                "window_end": (T0 + timedelta(days=k + 1)).isoformat(), "scope": "window", "value": 0.5,
                "ci_low": 0.45, "ci_high": 0.55, "n_items": 100, "n_ratings": 300, "threshold": 0.4}
               for m in ("normalized_cross_kappa", "cross_kappa", "spa") for k in range(8)]
    alarms = [{"metric": "cross_kappa", "kind": "change", "since": (T0 + timedelta(days=5)).isoformat(),
               "reason": "agreement fell <b>"},
              {"metric": "spa", "kind": "baseline", "since": (T0 + timedelta(days=6)).isoformat(),
               "reason": "below the gate threshold 0.400"}]
    episode = {"episode_id": "ep-2", "question": "q", "metric": "cross_kappa", "kind": "change",
               "opened_at": (T0 + timedelta(days=5)).isoformat(), "closed_at": None, "reason": "agreement fell <b>",
               "worst_raters": [], "metrics": ["cross_kappa", "spa"], "alarms": alarms}
    shown = sections.monitoring("q", windows, [episode], sections.Figures(), True)
    shaded = {c["text"].split(":")[0]: "1 drift episode(s) shaded" in c["text"] for c in shown["charts"]}
    assert shaded == {"normalized κx": False, "κx (cross-replication kappa)": True, "SPA": True}, shaded
    (row,) = shown["episodes"]
    assert row["metric"] == "cross_kappa (change), spa (baseline)"
    assert "cross_kappa (change) since" in row["reason"] and "spa (baseline) since" in row["reason"]
    page = render_monitor_report({"windows": windows, "episodes": [episode], "runs": []})
    assert "cross_kappa (change), spa (baseline)" in page and "agreement fell <b>" not in page
