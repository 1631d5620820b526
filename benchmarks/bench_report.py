"""Size and time of the HTML reports for a large gate: 50 questions, 10^5 judgements per question.

Usage: ``.venv/bin/python benchmarks/bench_report.py [--questions 50] [--judgements 100000]
[--ratings-per-rater 100] [--windows 60] [--repeat 3] [--out benchmarks/out] [--without-matplotlib]``

The gate summary holds every metric row of the flow per question, the disattenuated correlation, a
ratings-per-item histogram per pool and one per-rater row per rater (``judgements / ratings_per_rater``
raters per question, 2 % of them flagged). The monitoring view holds, per question, the five monitored
metrics over ``--windows`` windows in both scopes, and one drift episode for every fifth question.
Prints one markdown table row per report: the first run in the process (it imports Jinja2 and matplotlib),
the best of ``--repeat`` runs of render + write, the HTML size and the number of figures.
``--without-matplotlib`` makes matplotlib unimportable, to measure the report without figures.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from labelgate.reporting.report import write_gate_report, write_monitor_report

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def row(value: float, half: float, **extra: Any) -> dict[str, Any]:
    return {"value": value, "ci_low": value - half, "ci_high": value + half, **extra}


def question_rows(rng: random.Random) -> dict[str, Any]:
    nk, irr_c, irr_t = rng.uniform(0.5, 1.05), rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7)
    kx = nk * math.sqrt(irr_c * irr_t)
    verdict = "pass" if nk - 0.05 >= 0.8 else "reject" if nk + 0.05 < 0.8 else "review"
    gate = {"ci_level": 0.95, "severity": "blocking", "n_items": 2000, "reason": None}
    return {
        "normalized_cross_kappa": row(nk, 0.05, gate="normalized_cross_kappa", verdict=verdict,
                                      thresholds={"min_value": 0.8}, **gate),
        "cross_kappa": row(kx, 0.03, gate="cross_kappa", verdict="pass", thresholds={"min_value": 0.2}, **gate),
        "irr_crowd": row(irr_c, 0.03), "irr_trusted": row(irr_t, 0.03),
        "irr_baseline": row(irr_c, 0.03, gate="irr_baseline", verdict="pass", thresholds={"tolerance": 0.1},
                            **gate),
        "difference": row(irr_c - irr_t, 0.04), "ratio": row(irr_c / irr_t, 0.1),
        "disattenuated_correlation": row(nk + rng.uniform(-0.05, 0.05), 0.06),
        "spa": row(0.6, 0.02, gate="spa", verdict="pass", thresholds={"min_value": 0.4}, **gate),
    }


def raters(rng: random.Random, n: int, per_rater: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        kappa = rng.uniform(0.1, 0.8)
        flagged = i % 50 == 0
        count = max(1, int(rng.expovariate(1 / per_rater)))
        out.append({"rater_id": f"rater-{i:06d}", "pool": "crowd", "n_ratings": count,
                    "n_shared_items": count // 3, "kappa_vs_trusted": 0.05 if flagged else kappa,
                    "kappa_ci_low": kappa - 0.1, "kappa_ci_high": kappa + 0.1, "loo_agreement": kappa,
                    "bias": rng.uniform(0, 0.2), "flags": ["low_agreement"] if flagged else [], "partners": []})
    return out


def gate_summary(n_questions: int, judgements: int, per_rater: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    names = [f"question-{q:02d}" for q in range(n_questions)]
    n_raters = max(1, judgements // per_rater)
    hist = {"crowd": {"n_items": judgements // 5, "n_ratings": judgements,
                      "ratings_per_item_hist": {str(k): judgements // 5 // 4 for k in (3, 4, 5, 7)}},
            "trusted": {"n_items": 2000, "n_ratings": 6000, "ratings_per_item_hist": {"3": 2000}}}
    return {
        "decision": "REVIEW", "batch_id": "bench", "run_id": "bench-run", "reasons": ["bench"], "warnings": [],
        "coverage": {"batch_items": judgements // 5, "trusted_items": 2000, "common_items": 2000,
                     "coverage": 2000 / (judgements // 5)},
        "metrics": {q: question_rows(rng) for q in names},
        "diagnostics": {q: {"raters": raters(rng, n_raters, per_rater), "design": hist} for q in names},
        "validation": {"crowd": {"n_rows": judgements, "n_valid": judgements, "n_invalid": 0,
                                 "invalid_share": 0.0, "error_counts": {}, "reason": "all rows passed"}},
        "reports": {}, "created_at": T0.isoformat(),
    }


def monitor_view(n_questions: int, n_windows: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    windows, episodes = [], []
    for q in range(n_questions):
        name = f"question-{q:02d}"
        for metric in ("normalized_cross_kappa", "cross_kappa", "irr_crowd", "irr_trusted", "spa"):
            for k in range(n_windows):
                for scope in ("window", "cumulative"):
                    value = rng.uniform(0.5, 1.0)
                    windows.append({"question": name, "metric": metric, "scope": scope,
                                    "window_start": (T0 + timedelta(hours=k)).isoformat(),
                                    "window_end": (T0 + timedelta(hours=k + 1)).isoformat(), "value": value,
                                    "ci_low": value - 0.05, "ci_high": value + 0.05, "n_items": 300,
                                    "n_ratings": 900, "threshold": 0.8 if metric == "normalized_cross_kappa"
                                    else None})
        if q % 5 == 0:
            episodes.append({"episode_id": f"ep-{q}", "question": name, "metric": "normalized_cross_kappa",
                             "kind": "change", "opened_at": (T0 + timedelta(hours=n_windows // 2)).isoformat(),
                             "closed_at": None, "reason": "drop", "worst_raters": ["rater-000001"]})
    return {"windows": windows, "episodes": episodes, "runs": [], "since": T0.isoformat()}


def timed(repeat: int, func: Any) -> tuple[float, float]:
    """Seconds of the first run and the best of ``repeat`` runs (the first included)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times[0], min(times)


def table_row(name: str, path: Path, first: float, best: float) -> str:
    page = path.read_text(encoding="utf-8")
    return f"| {name} | {first:.2f} | {best:.2f} | {len(page.encode()) / 1e6:.2f} | {page.count('<svg ')} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--judgements", type=int, default=100_000, help="judgements per question")
    parser.add_argument("--ratings-per-rater", type=int, default=100)
    parser.add_argument("--windows", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--without-matplotlib", action="store_true", help="measure the report without figures")
    args = parser.parse_args()
    if args.without_matplotlib:
        sys.modules["matplotlib"] = None  # type: ignore[assignment]  # import matplotlib now fails
    summary = gate_summary(args.questions, args.judgements, args.ratings_per_rater)
    view = monitor_view(args.questions, args.windows)
    n_raters = sum(len(d["raters"]) for d in summary["diagnostics"].values())
    print(f"{args.questions} questions, {args.judgements:,} judgements and {n_raters // args.questions:,} raters "
          f"per question ({n_raters:,} per-rater rows); monitoring: {len(view['windows']):,} window rows")
    print(f"| report | first run (s) | best of {args.repeat} (s) | HTML (MB) | figures |\n|---|---|---|---|---|")
    gate_dir = args.out / "report-bench"
    first, best = timed(args.repeat, lambda: write_gate_report(summary, gate_dir))
    json_mb = (gate_dir / "result.json").stat().st_size / 1e6
    print(table_row(f"gate report (+ result.json {json_mb:.1f} MB)", gate_dir / "report.html", first, best))
    monitor_path = args.out / "report-bench" / "monitor-report.html"
    first, best = timed(args.repeat, lambda: write_monitor_report(view, monitor_path))
    print(table_row("monitoring report", monitor_path, first, best))


if __name__ == "__main__":
    main()
