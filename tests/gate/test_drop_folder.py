"""The served gate's drop folder (`labelgate.gate.watch`), without Prefect: every arrived file gated once, in arrival
order; partial files never read; sidecar batch ids; crash recovery (in process, and `kill -9` of `labelgate serve`).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from labelgate.gate.watch import DropFolder, decided_payload, serve_settings
from labelgate.pipeline.config import config_from_dict
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate
from tests.conftest import wait_for

#: (scenario, seed, expected decision) of the dropped batches (each file holds both pools); the last is malformed.
BATCHES = [("good", 1, "ACCEPT"), ("good", 2, "ACCEPT"), ("good", 5, "ACCEPT"), ("good", 7, "ACCEPT"),
           ("contentment", 3, "REJECT"), ("contentment", 4, "REJECT"), ("contentment", 6, "REJECT"),
           ("malformed", 0, "ERROR")]
MALFORMED = "item_id,rater_id\n1,a\n2,b\n"  # no label, no pool column: the load step fails
SERVE_APP = "import typer; from labelgate.cli.serve import register; app = typer.Typer(); register(app); app()"


def write_batches(folder: Path, n_items: int = 600, batches: list[tuple[str, int, str]] = BATCHES,
                  start_mtime: float | None = None) -> dict[str, str]:
    """Write the batches as ``<k>-<scenario><seed>.csv`` (both pools); returns ``{batch_id: expected decision}``.

    Modification times are set one second apart, oldest first, ``start_mtime`` onwards (default: an hour ago, so
    that the files are settled and their arrival order is the listing order)."""
    folder.mkdir(parents=True, exist_ok=True)
    start = start_mtime if start_mtime is not None else os.path.getmtime(folder) - 3600
    expected = {}
    for k, (scenario, seed, decision) in enumerate(batches):
        path = folder / f"{k}-{scenario}{seed}.csv"
        if scenario == "malformed":
            path.write_text(MALFORMED, encoding="utf-8")
        else:
            simulate(scenario_named(scenario, n_items), seed=seed).to_csv(path, index=False)
        os.utime(path, (start + k, start + k))
        expected[path.stem] = decision
    return expected


def gate_config(root: Path, n_boot: int = 200, **serve: Any) -> dict[str, Any]:
    return {"gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}],
            "interval": {"n_boot": n_boot, "seed": 0},
            "store": {"url": f"sqlite:///{(root / 'results.db').as_posix()}"},
            "reports": {"dir": (root / "reports").as_posix()},
            "serve": {"watch": (root / "drop").as_posix(), "settle_seconds": 0, **serve}}


def folder_for(root: Path, **kwargs: Any) -> DropFolder:
    cfg = config_from_dict(gate_config(root, **kwargs))
    return DropFolder(cfg, serve_settings(cfg))


def test_eight_dropped_batches_are_decided_once_each_and_an_error_is_not_retried(tmp_path):
    expected = write_batches(tmp_path / "drop")  # present before the server starts: gated at the first look
    announced: list[dict[str, Any]] = []
    cfg = config_from_dict(gate_config(tmp_path))
    folder = DropFolder(cfg, serve_settings(cfg), on_decision=lambda s: announced.append(decided_payload(s)))
    queued = folder.scan()
    assert [job.batch_id for job in queued] == list(expected)  # arrival order: oldest first
    summaries = folder.drain()
    assert {s["batch_id"]: s["decision"] for s in summaries} == expected
    assert [p["batch_id"] for p in announced] == list(expected)
    assert announced[0]["metrics"]["label"]["normalized_cross_kappa"]["ci_low"] is not None
    assert folder.scan() == [] and folder.drain() == []
    folder.close()
    again = folder_for(tmp_path)  # a restart: nothing is gated twice, the malformed file is not retried
    assert again.scan() == [] and again.drain() == []
    assert all(row["status"] == "done" for row in again.ledger.decisions())
    again.close()
    records = ResultsStore(cfg.store.url).list_runs(None)
    assert len(records) == 8
    assert Counter(r.decision for r in records) == Counter(expected.values())
    assert all(Path(p).is_file() for p in (tmp_path / "drop").glob("*.csv"))  # kept: `after` is `keep`


def test_a_partial_file_is_not_read_until_settled_or_marked(tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    folder = folder_for(tmp_path, settle_seconds=60)
    (drop / "b1.csv").write_text("item_id,rater_id,label,pool\n1,a,x,crowd\n", encoding="utf-8")  # just written
    assert folder.scan() == []
    os.utime(drop / "b1.csv", (os.path.getmtime(drop) - 120,) * 2)  # untouched for two minutes: complete
    assert [job.batch_id for job in folder.scan()] == ["b1"]
    folder.close()

    marked = folder_for(tmp_path, ready_marker=True, state=str(tmp_path / "marker.db"))
    (drop / "b2.csv").write_text("item_id,rater_id,label,pool\n", encoding="utf-8")
    os.utime(drop / "b2.csv", (os.path.getmtime(drop) - 120,) * 2)  # old, but its writer has not marked it
    assert "b2" not in [job.batch_id for job in marked.scan()]
    (drop / "b2.csv.ready").touch()
    assert [job.batch_id for job in marked.scan()] == ["b2"]
    marked.close()


def test_a_sidecar_names_the_batch_and_a_bad_sidecar_is_an_error(tmp_path):
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT"), ("good", 2, "ACCEPT")])
    (tmp_path / "drop" / "0-good1.json").write_text(json.dumps({"batch_id": "vendor-7/2026-11-21"}))
    (tmp_path / "drop" / "1-good2.json").write_text("[1, 2")
    folder = folder_for(tmp_path)
    assert [job.batch_id for job in folder.scan()] == ["vendor-7/2026-11-21", "1-good2"]
    first, second = folder.drain()
    assert first["decision"] == "ACCEPT" and first["batch_id"] == "vendor-7/2026-11-21"
    assert second["decision"] == "ERROR" and "sidecar 1-good2.json" in second["reasons"][0]
    folder.close()


def test_moving_gated_files_is_opt_in(tmp_path):
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    folder = folder_for(tmp_path, after="move", move_to=(tmp_path / "done").as_posix())
    folder.scan()
    assert [s["decision"] for s in folder.drain()] == ["ACCEPT"]
    assert (tmp_path / "done" / "0-good1.csv").is_file() and not list((tmp_path / "drop").glob("*.csv"))
    folder.close()


class Killed(BaseException):
    """Stands for the process dying: not an Exception, so nothing in the gate catches it."""


def test_an_interrupted_batch_is_recovered_exactly_once(tmp_path):
    from labelgate.gate import run

    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT"), ("contentment", 3, "REJECT")])
    cfg = config_from_dict(gate_config(tmp_path))

    def killed_before_recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise Killed

    def killed_after_recording(*args: Any, **kwargs: Any) -> dict[str, Any]:
        run(*args, **kwargs)
        raise Killed

    for gate in (killed_before_recording, killed_after_recording):
        folder = DropFolder(cfg, serve_settings(cfg), gate=gate)
        folder.scan()
        with pytest.raises(Killed):
            folder.drain()
        assert [row["status"] for row in folder.ledger.decisions()][:1] == ["running"]
        folder.close()
    # the first file died before its record, the second right after: one is gated again, the other recovered
    announced: list[str] = []
    restarted = DropFolder(cfg, serve_settings(cfg), on_decision=lambda s: announced.append(s["batch_id"]))
    recovered = restarted.recover()
    assert [s["batch_id"] for s in recovered] == ["1-contentment3"]  # recorded before the kill: not gated again
    summaries = recovered + restarted.drain()
    assert sorted(s["decision"] for s in summaries) == ["ACCEPT", "REJECT"]
    assert sorted(announced) == ["0-good1", "1-contentment3"]
    restarted.close()
    records = ResultsStore(cfg.store.url).list_runs(None)
    computed = Counter(r.inputs_digest for r in records if r.reused_from is None)
    assert len(computed) == 2 and set(computed.values()) == {1}


def test_a_batch_that_keeps_killing_the_server_ends_in_error(tmp_path):
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    cfg = config_from_dict(gate_config(tmp_path, max_attempts=2))

    def killed(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise Killed

    for _ in range(2):
        folder = DropFolder(cfg, serve_settings(cfg), gate=killed)
        folder.scan()
        folder.recover()
        with pytest.raises(Killed):
            folder.drain()
        folder.close()
    folder = DropFolder(cfg, serve_settings(cfg), gate=killed)
    folder.recover()
    (summary,) = folder.drain()
    assert summary["decision"] == "ERROR" and "interrupted 2 times" in summary["reasons"][0]
    folder.close()


def test_one_server_per_ledger(tmp_path):
    (tmp_path / "drop").mkdir()
    first = folder_for(tmp_path)
    with pytest.raises(Exception, match="Another labelgate serve"):
        folder_for(tmp_path)
    first.close()


# ------------------------------------------------------------------------------ the served process, killed
def ledger_rows(state: Path) -> list[tuple[str, str, str | None]]:
    """``(batch_id, status, decision)`` of the server's ledger, read without taking the server's lock."""
    if not state.exists():
        return []
    try:
        with sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=10) as db:
            return db.execute("SELECT batch_id, status, decision FROM serve_files ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the table is not created yet
        return []


def start_server(root: Path, log_name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(root / log_name, "w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-c", SERVE_APP, "serve", "--config", str(root / "gate.yaml")],
                                env={**(env or os.environ), "OPENBLAS_NUM_THREADS": "1"}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def test_kill_9_while_gating_then_restart_decides_every_batch_exactly_once(tmp_path):
    expected = write_batches(tmp_path / "drop", n_items=2000)
    config = gate_config(tmp_path, n_boot=2000, poll_seconds=0.2)
    (tmp_path / "gate.yaml").write_text(json.dumps(config), encoding="utf-8")
    state = tmp_path / "reports" / "labelgate-serve.db"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    server = start_server(tmp_path, "serve-1.log", env)
    try:
        # kill it while a batch is running, with at least one decided before it
        wait_for(lambda: any(s == "done" for _, s, _ in ledger_rows(state))
                 and any(s == "running" for _, s, _ in ledger_rows(state)), timeout=300, interval=0.02,
                 give_up=lambda: server.poll() is not None, what="a batch running after a decided one")
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
    assert any(status == "running" for _, status, _ in ledger_rows(state))
    restarted = start_server(tmp_path, "serve-2.log", env)
    try:
        wait_for(lambda: len(ledger_rows(state)) == 8 and all(s == "done" for _, s, _ in ledger_rows(state)),
                 timeout=600, interval=0.2, give_up=lambda: restarted.poll() is not None,
                 what="every batch decided after the restart")
        restarted.send_signal(signal.SIGTERM)  # finishes (nothing is running) and exits cleanly
        assert restarted.wait(timeout=60) == 0
    finally:
        if restarted.poll() is None:
            os.killpg(restarted.pid, signal.SIGKILL)
    assert {batch: decision for batch, _, decision in ledger_rows(state)} == expected
    records = ResultsStore(config["store"]["url"]).list_runs(None)
    computed = Counter(r.inputs_digest for r in records if r.reused_from is None and r.decision != "ERROR")
    assert len(computed) == 7 and set(computed.values()) == {1}, computed
    assert Counter(r.batch_id for r in records if r.decision == "ERROR") == {"7-malformed0": 1}
    log = (tmp_path / "serve-2.log").read_text()
    assert "requeued" in log or "recovered" in log, log[-2000:]


def test_a_folder_behind_an_fsspec_url_is_watched_like_a_local_one(tmp_path):
    """``serve.watch`` may be any fsspec URL (``s3://…`` with s3fs); fsspec's in-memory filesystem stands in here."""
    fsspec = pytest.importorskip("fsspec", reason="watching a URL needs fsspec (the 'dask' extra installs it)")

    fs = fsspec.filesystem("memory")
    root = f"/labelgate-test-{tmp_path.name}"
    local = tmp_path / "staging"
    expected = write_batches(local, batches=[("good", 1, "ACCEPT"), ("contentment", 3, "REJECT")])
    for path in sorted(local.iterdir()):
        fs.put(str(path), f"{root}/drop/{path.name}")
    fs.pipe(f"{root}/drop/1-contentment3.json", b'{"batch_id": "vendor-b"}')
    config = gate_config(tmp_path, after="move", move_to=f"memory://{root}/done")
    config["serve"]["watch"] = f"memory://{root}/drop"
    cfg = config_from_dict(config)
    folder = DropFolder(cfg, serve_settings(cfg))
    try:
        queued = folder.scan()
        assert [job.batch_id for job in queued] == ["0-good1", "vendor-b"]
        decided = {s["batch_id"]: s["decision"] for s in folder.drain()}
        assert decided == {"0-good1": expected["0-good1"], "vendor-b": expected["1-contentment3"]}
        assert sorted(Path(p).name for p in fs.ls(f"{root}/done", detail=False)) == sorted(expected_names(expected))
        assert not [p for p in fs.ls(f"{root}/drop", detail=False) if p.endswith(".csv")]  # moved after gating
        assert not any(folder.cache.rglob("*.csv"))  # local copies removed after the gate read them
        assert folder.scan() == []
    finally:
        folder.close()
        fs.rm(root, recursive=True)


def expected_names(expected: dict[str, str]) -> list[str]:
    return [f"{stem}.csv" for stem in expected]


def test_a_missing_drop_folder_or_an_unknown_filesystem_is_named(tmp_path):
    from labelgate.errors import InputError
    from labelgate.gate.watch import ServeError
    from labelgate.pipeline.sources.folders import Folder

    cfg = config_from_dict({**gate_config(tmp_path), "serve": {"watch": str(tmp_path / "nowhere")}})
    with pytest.raises(ServeError, match=r"drop folder .*nowhere' does not exist"):
        DropFolder(cfg, serve_settings(cfg))
    pytest.importorskip("fsspec", reason="URL folders need fsspec")
    with pytest.raises(InputError, match=r"'nosuchfs://bucket/in' cannot be opened"):
        Folder("nosuchfs://bucket/in")
