"""The ``labelgate`` command line: gate a batch, compute a metrics panel, run the demo, write synthetic data.

Exit codes of ``gate`` (and ``demo`` for its last batch): 0 ACCEPT, 1 REJECT, 2 REVIEW, 3 ERROR — every fault,
a usage error (:mod:`labelgate.cli._group`) or a missing extra included. Errors print one line and a hint;
``--debug`` (before or after the command) shows the traceback.

``gate`` runs in this process unless a Prefect API is named or ``--prefect always`` asks for a flow
(:func:`labelgate.flows.api.choose`); either way the gate's own :func:`labelgate.gate.run` decides, records, reports
and alerts, and the output says which way it ran.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from labelgate.cli._group import PREFECT_HELP, LabelGateGroup, PrefectMode, enable_debug, print_version
from labelgate.cli._output import Debug, fail, first_line, num
from labelgate.cli.gate_output import gate_json, gate_text
from labelgate.gate.decision import EXIT_CODES
from labelgate.pipeline.limits import MAX_N_BOOT

if TYPE_CHECKING:
    from labelgate.core.ratings import Level
    from labelgate.gate.audit import Orchestration

# Prefect reads these when it is imported: keep a CLI run quiet and tolerant of slow machines.
# One BLAS thread: the core's matrix products are thin (items x categories), where OpenBLAS threads
# only spin and compete with the Prefect server; measured 3-4x faster per metric (docs/benchmarks.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

app = typer.Typer(cls=LabelGateGroup, rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False, help="LabelGate: agreement gates for human-labelling batches.")


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and Prefect logs (before or after the "
                                        "command).", callback=enable_debug, expose_value=False,
                                        is_eager=True)] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", callback=print_version,
                                          expose_value=False, is_eager=True)] = False,
) -> None:
    """LabelGate: agreement gates for human-labelling batches."""


@contextmanager
def _status(message: str, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """A spinner with a changing label when attached to a terminal; silent otherwise."""
    if not (enabled and sys.stderr.isatty()):
        yield lambda _label: None
        return
    from rich.console import Console

    with Console(stderr=True).status(message) as status:
        yield lambda label: status.update(f"{message} — {label}")


# ----------------------------------------------------------------------------------------------- gate
@app.command()
def gate(
    config: Annotated[Path, typer.Option("--config", help="Gate configuration (YAML).")],
    batch: Annotated[Path | None, typer.Option("--batch", help="The new batch (CSV/Parquet); may hold both pools. "
                                               "Optional for a label_studio or sql source, which selects its "
                                               "batch.")] = None,
    trusted: Annotated[Path | None, typer.Option("--trusted", help="The trusted replication.")] = None,
    batch_id: Annotated[str | None, typer.Option("--batch-id", help="Name of the batch in store and reports.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Recompute even if this batch was gated before.")] = False,
    submit: Annotated[bool, typer.Option("--submit", help="Hand the batch to a running `labelgate serve` and wait "
                                         "for its decision (needs PREFECT_API_URL).")] = False,
    prefect: Annotated[PrefectMode, typer.Option("--prefect", help=PREFECT_HELP)] = PrefectMode.auto,
) -> None:
    """Accept, reject or send a batch to review against a trusted replication."""
    if batch is None:  # a label_studio or sql source selects its batch; its id is derived from the selection
        from labelgate.cli.label_studio import configured_batch_id

        try:
            if submit:
                raise ValueError("--submit hands a batch to the served gate: it needs --batch")
            batch_id = batch_id or configured_batch_id(config)
        except ValueError as exc:
            raise fail(exc, "pass --batch (a file, or a Label Studio project URL)") from None
    if submit and batch is not None:  # the server gates it with its own configuration and trusted replication
        from labelgate.cli.serve import submit_command

        submit_command(batch, batch_id=batch_id, as_json=as_json)
    summary, problem = _run_gate(config, batch, trusted, batch_id, force, progress=not as_json,
                                 prefect=prefect.value)
    if as_json:
        typer.echo(json.dumps(gate_json(summary), default=str))
    elif problem is None:
        typer.echo(gate_text(summary))
    if problem is not None:  # found before anything heavy started: one line on stderr
        raise fail(*problem)
    raise typer.Exit(EXIT_CODES.get(summary.get("decision", "ERROR"), 3))


def _run_gate(config: Path, batch: Path | None, trusted: Path | None, batch_id: str | None, force: bool,
              progress: bool, prefect: str = "auto") -> tuple[dict[str, Any], tuple[BaseException, str] | None]:
    """Check what can be checked cheaply, reuse a stored decision, and only then gate: in this process, or as a
    Prefect flow (``prefect``: ``auto``, ``always`` or ``never``; :func:`labelgate.flows.api.choose`).

    Returns the run summary and, for a fault found before the run (a missing extra, the configuration, the inputs),
    the error and its hint (the summary is then the ERROR the gate recorded, or, before a valid configuration, an
    unrecorded ERROR).
    """
    from labelgate.extras import MissingExtraError, require

    try:
        require("gate", "labelgate gate")
        if prefect == "always":
            require("prefect", "labelgate gate --prefect always")
    except MissingExtraError as exc:
        return _unrecorded(batch, batch_id, f"setup: {first_line(exc)}", "setup"), (exc, exc.hint)

    from labelgate.errors import LabelGateError
    from labelgate.flows.api import choose
    from labelgate.gate.audit import Orchestration
    from labelgate.pipeline.config import GateConfig, load_config
    from labelgate.pipeline.preflight import check_inputs

    try:
        cfg: GateConfig = load_config(config)
    except LabelGateError as exc:  # nothing to record: without a valid config there is no store to record in
        return _unrecorded(batch, batch_id, f"config: {first_line(exc)}", "config"), (
            exc, "fix the configuration file (keys and values are listed in configs/example.yaml)")
    trusted_path = str(trusted) if trusted else None
    try:
        check_inputs(cfg, batch, trusted_path)
    except MissingExtraError as exc:  # the configuration asks for a feature whose extra is missing: recorded ERROR
        from labelgate.gate.runner import failed_batch

        refused = Orchestration("in-process", "the configuration needs an extra that is not installed")
        job = _job(batch, trusted_path, batch_id)
        return failed_batch(cfg, job, exc, "setup", orchestration=refused), (exc, exc.hint)
    except LabelGateError as exc:  # the gate records this ERROR (with its report) itself, without Prefect or GX
        refused = Orchestration("in-process", "the inputs were refused before the run")
        return _in_process(cfg, batch, trusted_path, batch_id, force, refused), (
            exc, "check the input files and the column names in the configuration")
    how = choose(prefect, fan_out=cfg.runner == "dask" and len(cfg.questions) > 1)
    if not force:
        served = Orchestration("in-process", "the stored decision of these inputs, served without a run")
        stored = _stored_decision(cfg, batch, trusted_path, batch_id, served)
        if stored is not None:
            if how.mode == "prefect" and how.api_url:  # a served team's automations hear of every decision
                from labelgate.flows.gate import emit_decided

                emit_decided(stored, cfg)
            return stored, None
    if how.mode == "in-process":
        with _status("Gating the batch", progress):
            return _in_process(cfg, batch, trusted_path, batch_id, force, how), None
    where = how.api_url or "the local Prefect API (its first start takes a few seconds)"
    with _status(f"Gating the batch as a Prefect flow on {where}", progress):
        _quiet_loggers()
        try:
            from labelgate.flows.api import require_api
            from labelgate.flows.gate import run_gate_flow

            require_api()
            return run_gate_flow(cfg, batch=None if batch is None else str(batch), trusted=trusted_path,
                                 batch_id=batch_id, force=force), None
        except Exception as exc:  # an orchestration fault is an ERROR, recorded, never a quality verdict
            from labelgate.gate.runner import failed_batch

            return failed_batch(cfg, _job(batch, trusted_path, batch_id), exc, "prefect", orchestration=how), (
                exc, "check PREFECT_API_URL and that the Prefect server runs, or gate without Prefect: --prefect never")


def _in_process(cfg: Any, batch: Path | None, trusted: str | None, batch_id: str | None, force: bool,
                how: Orchestration) -> dict[str, Any]:
    """The gate in this process, with the reports the flow writes too (the decision, record and alerts are the
    gate's own either way)."""
    from labelgate.gate import Hooks, run
    from labelgate.reporting.report import write_gate_report

    _quiet_loggers()
    return run(cfg, None if batch is None else str(batch), trusted, batch_id=batch_id, force=force,
               hooks=Hooks(publish=write_gate_report, orchestration=how))


def _job(batch: Path | None, trusted: str | None, batch_id: str | None) -> dict[str, Any]:
    """The request as the gate runner's ``failed_batch`` records it."""
    return {"batch": None if batch is None else str(batch), "trusted": trusted, "batch_id": batch_id}


def _unrecorded(batch: Path | None, batch_id: str | None, reason: str, step: str) -> dict[str, Any]:
    """The ERROR summary of a request refused before there is a store to record it in."""
    from labelgate.pipeline.sources.tables import batch_id_of  # the one rule for a default batch id

    return {"decision": "ERROR", "batch_id": batch_id or batch_id_of(batch),
            "reasons": [reason], "error_step": step}


def _stored_decision(cfg: Any, batch: Path | None, trusted: str | None, batch_id: str | None,
                     how: Orchestration) -> dict[str, Any] | None:
    """The decision already taken for these inputs, recorded for this request (or None: then the gate runs)."""
    from labelgate.gate.audit import stored_decision

    try:
        return stored_decision(cfg, batch, trusted, batch_id=batch_id, orchestration=how)
    except Exception:  # no store yet, or a load problem: the full run reports (and records) it properly
        return None


def _quiet_loggers() -> None:
    """One line on stderr: Prefect's and the gate's own loggers stay silent unless --debug."""
    import logging

    if Debug.enabled:
        return
    for name in ("prefect", "labelgate", "great_expectations", "distributed"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


# -------------------------------------------------------------------------------------------- metrics
@app.command()
def metrics(
    path: Annotated[Path, typer.Argument(help="Long table (CSV/Parquet), one row per judgement.")],
    level: Annotated[str, typer.Option(help="nominal | ordinal | interval | ratio")] = "nominal",
    item: Annotated[str, typer.Option(help="Item id column.")] = "item_id",
    rater: Annotated[str, typer.Option(help="Rater id column.")] = "rater_id",
    label: Annotated[str, typer.Option(help="Label column.")] = "label",
    pool: Annotated[str, typer.Option(help="Pool column (two pools: cross-replication metrics too).")] = "pool",
    ci: Annotated[float | None, typer.Option(help="Interval level; 0 for none.")] = 0.95,
    n_boot: Annotated[int, typer.Option(min=2, max=MAX_N_BOOT, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    duplicates: Annotated[str, typer.Option(help="A rater judging an item twice: error | first | last.")] = "error",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The core metrics panel for one file (one or two pools)."""
    from labelgate.core.ratings import Ratings, ratings_by_pool
    from labelgate.metrics.panel import metrics_panel

    try:
        with _status("Computing agreement metrics", not as_json) as progress:
            progress("reading")
            table = read_table(path, item=item, rater=rater, label=label, pool=pool)
            progress("building Ratings")
            scale = cast("Level", level)  # validated by the core, which names the parameter
            if pool in table.columns and table[pool].nunique() >= 2:
                pools = ratings_by_pool(table, pool=pool, item=item, rater=rater, value=label, level=scale,
                                        duplicates=cast("Any", duplicates))
            else:
                pools = {"all": Ratings.from_long(table, item=item, rater=rater, value=label, level=scale,
                                                  duplicates=cast("Any", duplicates))}
            panel = metrics_panel(pools, ci=ci or None, n_boot=n_boot, seed=seed, progress=progress)
    except Exception as exc:
        raise fail(exc, "check the file path, the column names (--item/--rater/--label/--pool), --level and "
                         "--duplicates (error | first | last)") from None
    result = {group: {name: est.to_dict() for name, est in row.items()} for group, row in panel.items()}
    if as_json:
        typer.echo(json.dumps(result, default=str))
        return
    for group, row in result.items():
        typer.echo(f"[{group}]")
        for name, d in row.items():
            note = f"  ({d['reason']})" if d.get("reason") else ""
            typer.echo(f"  {name:<24} {num(d['value'])}  [{num(d['ci_low'])}, {num(d['ci_high'])}]"
                       f"  n_items={d['n_items']}{note}")


def read_table(path: Path, *, item: str, rater: str, label: str, pool: str) -> Any:
    """One long table from a CSV or Parquet file, by the gate's own reading rules
    (:func:`labelgate.pipeline.sources.tables.load_table`: ids as strings, only empty cells missing, the header
    checked before the file is parsed), on the core install: numpy, scipy, pandas and typer.

    The gate's configuration models need the ``gate`` extra (pydantic, PyYAML), and the loader reads only these
    attributes of them for a file given by path, so plain objects stand in for them here. A Parquet file needs
    pyarrow: without it, one line names the extra that brings it.

    Raises
    ------
    labelgate.extras.MissingExtraError
        A Parquet file without pyarrow installed.
    labelgate.errors.InputError
        The loader's errors (missing file, unknown extension, a too wide header, an unreadable file).
    """
    from labelgate.extras import require_module
    from labelgate.pipeline.sources.tables import load_table

    if {".parquet", ".pq"} & {suffix.lower() for suffix in path.suffixes}:
        require_module("pyarrow", f"reading the Parquet file {path.name}")
    source = SimpleNamespace(format="auto", path=None)
    columns = SimpleNamespace(item=item, rater=rater, label=label, pool=pool, question=None)
    return load_table(cast("Any", source), path, columns=cast("Any", columns))


# ---------------------------------------------------------------------------------------------- synth
@app.command()
def synth(
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("synthetic"),
    scenario: Annotated[str, typer.Option(help="good | random | contentment | spammers | collusion | drift")] = "good",
    n_items: Annotated[int | None, typer.Option(
        help="Items in the batch (default: the scenario's own size, 1000; 2400 for drift).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write synthetic replications: batch.csv (crowd), trusted.csv and both.csv (with a pool column), and the crowd's
    judgements as timed daily deliveries in deliveries/ (day-1.csv, ...: files for a monitor's drop folder)."""
    try:
        paths = write_synthetic(out, scenario, n_items, seed)
    except Exception as exc:
        raise fail(exc, "see `labelgate synth --help` for the scenarios") from None
    for name, path in paths.items():
        days = sorted((p.name for p in path.glob("day-*.csv")), key=lambda n: (len(n), n)) if path.is_dir() else []
        days_text = f" ({', '.join(days)})" if days else ""
        typer.echo(f"{name}: {path}{days_text}")


def write_synthetic(out: Path, scenario: str, n_items: int | None, seed: int) -> dict[str, Path]:
    """Simulate a scenario and write the batch, trusted and combined files and the daily deliveries."""
    from labelgate.pipeline.synth import scenario_named, simulate, write_daily_deliveries

    data = simulate(scenario_named(scenario, n_items), seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"batch": out / "batch.csv", "trusted": out / "trusted.csv", "both": out / "both.csv"}
    data[data["pool"] == "crowd"].to_csv(paths["batch"], index=False)
    data[data["pool"] == "trusted"].to_csv(paths["trusted"], index=False)
    data.to_csv(paths["both"], index=False)
    write_daily_deliveries(data, out / "deliveries")
    paths["deliveries"] = out / "deliveries"
    return paths


# ----------------------------------------------------------------------------------------------- demo
DEMO_CONFIG = """\
# Written by `labelgate demo`: the example configuration with the demo's paths.
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
  - type: irr_baseline
    tolerance: 0.1
    max_excess: 0.25
  - type: cross_kappa
    min_value: 0.2
    severity: warning
  - type: spa
    min_value: 0.4
    severity: warning
interval: {{ci: 0.95, n_boot: {n_boot}, seed: 0, use_ci_bound: true}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Folder for data, reports and the results store.")] = Path(
        "labelgate-demo"),
    n_items: Annotated[int, typer.Option(help="Items per batch.")] = 2000,
    n_boot: Annotated[int, typer.Option(min=2, max=MAX_N_BOOT, help="Bootstrap resamples.")] = 1000,
) -> None:
    """Generate example data, gate a good batch in this process and a bad one as a Prefect flow, and print where the
    reports are."""
    from labelgate.extras import missing_modules, require

    require("gate", "labelgate demo")
    out = out.resolve()
    config = out / "gate.yaml"
    out.mkdir(parents=True, exist_ok=True)
    config.write_text(DEMO_CONFIG.format(store=(out / "results.db").as_posix(), reports=(out / "reports").as_posix(),
                                         n_boot=n_boot), encoding="utf-8")
    # both ways a gate runs: the same steps decide, record and report, and each batch says which way it ran
    with_prefect = "never" if missing_modules("prefect") else "always"
    batches = {"good": ("a crowd batch simulated from the trusted raters' process", "never"),
               "contentment": ("a crowd that agrees with itself but not with the trusted raters (xRR paper Fig. 5)",
                               with_prefect)}
    decisions = {}
    for scenario, (description, prefect) in batches.items():
        paths = write_synthetic(out / "data" / scenario, scenario, n_items, seed=7)
        way = "in this process, without Prefect" if prefect == "never" else "as a Prefect flow"
        typer.echo(f"\n== {scenario}: {description}; gated {way} (--prefect {prefect})")
        if scenario != "good" and prefect == "never":
            typer.echo("   (the 'prefect' extra is not installed: pip install 'labelgate[prefect]' to see this "
                       "batch gated as a flow)")
        summary, _ = _run_gate(config, paths["batch"], paths["trusted"], f"demo-{scenario}", force=True,
                               progress=True, prefect=prefect)
        typer.echo(gate_text(summary))
        decisions[scenario] = summary.get("decision")
    typer.echo(f"\nresults store: {out / 'results.db'}\nconfig: {config}")
    expected = {"good": "ACCEPT", "contentment": "REJECT"}
    if decisions != expected:
        typer.echo(f"unexpected demo decisions {decisions} (expected {expected})", err=True)
        raise typer.Exit(EXIT_CODES["ERROR"])


def _register_plugins() -> None:
    """Commands that live next to their feature (reports, monitoring)."""
    from labelgate.cli.audit import register as register_audit
    from labelgate.cli.monitor import register as register_monitor
    from labelgate.cli.report import register as register_report
    from labelgate.cli.serve import register as register_serve

    register_monitor(app)
    register_audit(app)
    register_serve(app)
    register_report(app)


_register_plugins()


def main() -> None:
    """Console-script entry point: every fault exits 3, an unexpected one too (one line, or its traceback with
    ``--debug``); exit 1 means REJECT and nothing else."""
    try:
        app()
    except Exception as exc:  # the commands' own faults are one-line errors already: this is anything else
        if Debug.enabled:
            import traceback

            traceback.print_exc()
        else:
            typer.echo(f"error: {type(exc).__name__}: {first_line(exc)}", err=True)
            typer.echo("hint: rerun with --debug for the traceback", err=True)
        sys.exit(EXIT_CODES["ERROR"])


if __name__ == "__main__":
    main()
