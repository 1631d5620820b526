"""The served gate's drop folder: every batch file that arrives is gated once, in arrival order, without Prefect.

``labelgate serve`` keeps one warm process around :class:`DropFolder`; the tests drive it step by step
(:meth:`DropFolder.scan`, :meth:`DropFolder.drain`).

- **Arrival.** A file counts as arrived when it is complete: with ``serve.ready_marker`` once ``<file name>.ready``
  exists beside it, otherwise once it was left unmodified for ``serve.settle_seconds`` (the listing and the settle
  rule are the monitor's: :class:`labelgate.pipeline.sources.folders.Folder`). The folder is a local path or any
  fsspec URL (``s3://bucket/incoming`` with s3fs installed): a remote file is copied to a local cache for the gate to
  read, and the copy removed after. Files present at start-up arrive at the first look. Files are queued oldest
  first (modification time, then name).
- **Batch id.** The file's stem, unless a sidecar ``<stem>.json`` holds ``{"batch_id": ...}``.
- **Once each.** A small SQLite ledger (``serve.state``) records every file it queued, by path, size and
  modification time, with its state (queued → running → done), the decision and the run id. A file that fails is an
  ERROR decision recorded in the audit log like any other, and is done: it is never retried in a loop. A changed
  file (new size or modification time) is a new arrival.
- **Crash recovery.** One server holds the ledger's lock (an ``flock``, released by the kernel when the process
  dies). Claiming a file writes a claim token into its ledger row before the gate starts: the run id the gate then
  gives its record. At start-up a file left *running* by a killed server is looked up in the audit log
  (:mod:`labelgate.pipeline.store`) by that token alone: the record with the claimed run id (and the file's batch
  id) is its decision (recorded in the ledger and announced again, never recomputed); otherwise it is gated again
  from its own content. A record of the same batch id written by anyone else — ``labelgate gate --batch-id wk7``
  on other inputs, another server — is never adopted: it was not computed from this file. The run lock of the gate
  (:mod:`labelgate.pipeline.run_lock`) still serialises identical inputs gated from elsewhere. A batch that
  interrupted ``serve.max_attempts`` runs is recorded as ERROR instead of being tried forever.
- **Decisions out.** ``on_decision(summary)`` is called once per decision (the CLI emits the Prefect event
  ``labelgate.gate.decided`` with :func:`decided_payload`); its failure is logged and never changes a decision.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from labelgate.errors import LabelGateError, Reason
from labelgate.gate import runner
from labelgate.gate.audit import default_batch_id, recovered_summary
from labelgate.pipeline.config import ConfigError, GateConfig
from labelgate.pipeline.config.models import Serve
from labelgate.pipeline.limits import one_line
from labelgate.pipeline.sources.folders import Folder
from labelgate.pipeline.store import ResultsStore

LOGGER = logging.getLogger("labelgate.serve")

#: The event a served gate emits per decision, and the one that asks a served deployment for a gate.
DECIDED_EVENT = "labelgate.gate.decided"
READY_EVENT = "labelgate.batch.ready"
READY_SUFFIX = ".ready"
SIDECAR_SUFFIX = ".json"
DEFAULT_STATE = "labelgate-serve.db"


class ServeError(LabelGateError, RuntimeError):
    """The served gate cannot start or cannot take a file (the message says which and why)."""

    default_code = Reason.UNREADABLE_INPUT


def batch_resource_id(batch_id: str) -> str:
    """The Prefect resource id of a batch in LabelGate's events: ``labelgate.batch.<id>``."""
    return f"labelgate.batch.{batch_id}"


def decided_payload(summary: dict[str, Any]) -> dict[str, Any]:
    """The payload of ``labelgate.gate.decided``: the decision, its reasons, the blocking metrics with their
    intervals, the report and the run (JSON-ready; warnings-only metrics are left to the report)."""
    blocking = {
        question: {name: {k: row.get(k) for k in ("value", "ci_low", "ci_high", "ci_level", "verdict", "thresholds")}
                   for name, row in rows.items() if isinstance(row, dict) and row.get("severity") == "blocking"}
        for question, rows in (summary.get("metrics") or {}).items()}
    return {"batch_id": summary.get("batch_id"), "decision": summary.get("decision", "ERROR"),
            "reasons": list(summary.get("reasons") or []), "warnings": list(summary.get("warnings") or []),
            "metrics": {q: rows for q, rows in blocking.items() if rows}, "report": summary.get("report"),
            "reports": dict(summary.get("reports") or {}), "run_id": summary.get("run_id"),
            "reused_from": summary.get("reused_from"), "inputs_digest": summary.get("inputs_digest"),
            "error_step": summary.get("error_step")}


def serve_settings(config: GateConfig, *, watch: str | Path | None = None) -> Serve:
    """The config's ``serve`` section with ``--watch`` applied and the default ledger filled in.

    Relative paths set in a configuration file were resolved against its folder when it was loaded
    (:func:`labelgate.pipeline.config.resolve_paths`); a ``--watch`` given on the command line stays relative to the
    working directory.

    >>> cfg = GateConfig.model_validate({"serve": {"watch": "/srv/gate/drop", "after": "move", "move_to": "done"}})
    >>> s = serve_settings(cfg)
    >>> s.watch, s.move_to, s.state
    ('/srv/gate/drop', 'done', 'reports/labelgate-serve.db')
    """
    settings = config.serve
    update: dict[str, Any] = {}
    if watch is not None:
        update["watch"] = str(watch)
    if (update.get("state") or settings.state) is None:
        update["state"] = str(Path(config.reports.dir) / DEFAULT_STATE)
    return settings.model_copy(update=update)


def event_roots(config: GateConfig) -> list[str]:
    """The folders a ``labelgate.batch.ready`` event's ``path`` may name: the local drop folder (``serve.watch``),
    ``serve.roots``, and the folder of ``batch.path`` (each resolved; none: every path is refused).

    >>> cfg = GateConfig.model_validate({"serve": {"watch": "/srv/drop", "roots": ["/data/batches"]},
    ...                                  "batch": {"path": "/srv/in/new.csv"}})
    >>> event_roots(cfg)
    ['/srv/drop', '/data/batches', '/srv/in']
    """
    from labelgate.pipeline.sources.folders import is_url

    roots = [config.serve.watch] if config.serve.watch and not is_url(config.serve.watch) else []
    roots += config.serve.roots
    if config.batch.path and config.batch.format not in ("sql", "label_studio"):
        roots.append(str(Path(config.batch.path).parent))
    return [str(Path(root).resolve()) for root in dict.fromkeys(roots)]


@dataclass
class Job:
    """One arrived file in the ledger."""

    key: str
    path: str
    batch_id: str
    seq: int = 0
    status: str = "queued"
    attempts: int = 0
    claimed_at: str | None = None
    problem: str | None = None
    claim: str | None = None


class Ledger:
    """The files a served gate has queued and handled (SQLite, one server at a time).

    Parameters
    ----------
    path : str or Path
        The database file (created, with its folder). ``<path>.lock`` is held exclusively while the ledger is open.

    Raises
    ------
    ServeError
        Another process serves with this ledger.
    """

    _SCHEMA = """CREATE TABLE IF NOT EXISTS serve_files (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, path TEXT NOT NULL, batch_id TEXT NOT NULL,
        status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, problem TEXT, queued_at TEXT NOT NULL,
        claimed_at TEXT, finished_at TEXT, decision TEXT, run_id TEXT)"""

    def __init__(self, path: str | Path) -> None:
        import fcntl

        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = open(self.path.with_name(self.path.name + ".lock"), "a+b")  # closed by close()
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise ServeError(f"Another labelgate serve uses the ledger {str(self.path)!r}; one server per drop "
                             "folder (set serve.state to run a second one elsewhere).") from None
        # one connection used from the serving thread and, for reads, from tests: serialised by this lock
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._guard = threading.Lock()
        self._db.execute(self._SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(serve_files)")}
        if "claim" not in columns:  # a ledger written before claim tokens: its running rows are gated again
            self._db.execute("ALTER TABLE serve_files ADD COLUMN claim TEXT")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._guard:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def known(self, key: str) -> bool:
        with self._tx() as db:
            return db.execute("SELECT 1 FROM serve_files WHERE key = ?", (key,)).fetchone() is not None

    def add(self, job: Job) -> Job | None:
        """Queue a new file; None when the file was queued before."""
        with self._tx() as db:
            cursor = db.execute("INSERT OR IGNORE INTO serve_files (key, path, batch_id, status, problem, queued_at) "
                                "VALUES (?, ?, ?, 'queued', ?, ?)", (job.key, job.path, job.batch_id, job.problem,
                                                                     _now()))
            if cursor.rowcount == 0:
                return None
            job.seq = int(cursor.lastrowid or 0)
        return job

    def jobs(self, *statuses: str) -> list[Job]:
        """The ledger's files in these states, in arrival order."""
        marks = ",".join("?" * len(statuses))
        with self._tx() as db:
            rows = db.execute(f"SELECT key, path, batch_id, seq, status, attempts, claimed_at, problem, claim FROM "
                              f"serve_files WHERE status IN ({marks}) ORDER BY seq", statuses).fetchall()
        return [Job(*row) for row in rows]

    def claim(self, job: Job) -> int:
        """Mark a file running under a new claim token (``job.claim``, the run id its record will carry), committed
        before the gate starts; the number of runs it has started, this one included."""
        token = str(uuid.uuid4())
        with self._tx() as db:
            db.execute("UPDATE serve_files SET status = 'running', attempts = attempts + 1, claimed_at = ?, "
                       "claim = ? WHERE key = ?", (_now(), token, job.key))
            row = db.execute("SELECT attempts, claimed_at FROM serve_files WHERE key = ?", (job.key,)).fetchone()
        job.status, job.attempts, job.claimed_at, job.claim = "running", int(row[0]), row[1], token
        return job.attempts

    def requeue(self, job: Job) -> None:
        with self._tx() as db:
            db.execute("UPDATE serve_files SET status = 'queued' WHERE key = ?", (job.key,))

    def finish(self, job: Job, summary: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute("UPDATE serve_files SET status = 'done', finished_at = ?, decision = ?, run_id = ? "
                       "WHERE key = ?", (_now(), summary.get("decision"), summary.get("run_id"), job.key))

    def decisions(self) -> list[dict[str, Any]]:
        """Every file with its state, decision and run, in arrival order."""
        with self._tx() as db:
            cursor = db.execute("SELECT seq, path, batch_id, status, attempts, decision, run_id FROM serve_files "
                                "ORDER BY seq")
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def close(self) -> None:
        with self._guard:
            self._db.close()
        self._lock_file.close()  # releases the flock


def _now() -> str:
    return datetime.now(UTC).isoformat()


class DropFolder:
    """Gate every batch file that arrives in a folder, once, in arrival order (see the module).

    Parameters
    ----------
    config : GateConfig
        The gate configuration (its ``serve`` section after :func:`serve_settings`).
    settings : Serve, optional
        The served gate's settings (default ``serve_settings(config)``); ``settings.watch`` is the folder.
    trusted : str or Path, optional
        The trusted replication, for every batch (default: the config's ``trusted`` source, or a pool column in
        each batch file).
    hooks : runner.Hooks, optional
        Passed to :func:`labelgate.gate.run` (the CLI adds the HTML report writer).
    on_decision : callable ``(summary) -> object``, optional
        Called once per decision, before the file is marked done (a decision recovered after a crash is announced
        again: at least once). A failure is logged, never changes the decision.
    gate : callable, optional
        The gate (default :func:`labelgate.gate.run`); tests replace it to stop a run in the middle.
    """

    def __init__(self, config: GateConfig, settings: Serve | None = None, *, trusted: str | Path | None = None,
                 hooks: runner.Hooks | None = None, on_decision: Callable[[dict[str, Any]], object] | None = None,
                 gate: Callable[..., dict[str, Any]] = runner.run, logger: logging.Logger = LOGGER) -> None:
        self.config = config
        self.settings = settings or serve_settings(config)
        if not self.settings.watch:
            raise ConfigError("Nothing to watch: give --watch FOLDER or serve.watch in the configuration.",
                              Reason.MISSING_SETTING)
        try:
            self.folder = Folder(self.settings.watch)
        except LabelGateError as exc:
            raise ServeError(exc.message) from None
        # local copies of a remote folder's files, read by the gate and removed after it
        self.cache = Path(self.settings.state or DEFAULT_STATE).parent / "labelgate-serve-cache"
        self.trusted = None if trusted is None else str(trusted)
        self.hooks = hooks or runner.Hooks(logger=logging.getLogger("labelgate.gate"))
        self.on_decision = on_decision
        self.gate = gate
        self.logger = logger
        self.ledger = Ledger(self.settings.state or DEFAULT_STATE)

    # -- arrival --------------------------------------------------------------------------------------------

    def scan(self) -> list[Job]:
        """Queue the files that arrived since the last look (oldest first) and return them."""
        settle = 0.0 if self.settings.ready_marker else self.settings.settle_seconds
        queued = []
        for arrival in self.folder.settled(self.settings.pattern, settle):
            name = arrival.name
            if self.settings.ready_marker and not self.folder.exists(name + READY_SUFFIX):
                continue  # not complete yet: its writer creates the marker when it is
            key = f"{name}|{arrival.size}|{arrival.mtime_ns}"
            if self.ledger.known(key):
                continue
            batch_id, problem = self._batch_id(name)
            job = self.ledger.add(Job(key=key, path=name, batch_id=batch_id, problem=problem))
            if job is not None:
                self.logger.info("queued %s (%s)", one_line(job.batch_id), one_line(name))
                queued.append(job)
        return queued

    def _batch_id(self, name: str) -> tuple[str, str | None]:
        stem = default_batch_id(name)
        sidecar = str(Path(name).with_name(stem + SIDECAR_SUFFIX).as_posix())
        if not self.folder.exists(sidecar):
            return stem, None
        try:
            named = json.loads(self.folder.read_text(sidecar)).get("batch_id")
        except (OSError, ValueError, AttributeError) as exc:
            return stem, f"the sidecar {Path(sidecar).name} is not a JSON object: {exc}"
        if not isinstance(named, str) or not named.strip() or len(named) > 200:
            return stem, (f"the sidecar {Path(sidecar).name} has no usable 'batch_id' (a non-empty string of ≤ 200 "
                          "chars)")
        return named.strip(), None

    # -- gating ---------------------------------------------------------------------------------------------

    def recover(self) -> list[dict[str, Any]]:
        """Settle the files a killed server left running: the record carrying their claim token → done; else
        queued again (gated from their own content)."""
        recovered = []
        store = None
        for job in self.ledger.jobs("running"):
            if store is None:
                store = ResultsStore.from_config(self.config.store)
            record = store.get(job.claim) if job.claim else None
            if record is None or record.batch_id != job.batch_id:
                self.logger.info("requeued %s: its run was interrupted before its record", one_line(job.batch_id))
                self.ledger.requeue(job)
                continue
            summary = recovered_summary(record)
            self.logger.info("recovered %s: %s was recorded by run %s before the interruption",
                             one_line(job.batch_id), summary["decision"], summary["run_id"])
            self._announce(summary)
            self.ledger.finish(job, summary)
            recovered.append(summary)
        return recovered

    def drain(self, stop: threading.Event | None = None) -> list[dict[str, Any]]:
        """Gate the queued files in arrival order (until ``stop`` is set) and return their summaries."""
        summaries = []
        for job in self.ledger.jobs("queued"):
            if stop is not None and stop.is_set():
                break
            summaries.append(self.gate_job(job))
        return summaries

    def gate_job(self, job: Job) -> dict[str, Any]:
        """Gate one queued file, record it done, announce its decision and apply ``serve.after``."""
        attempts = self.ledger.claim(job)
        self.logger.info("running %s (%s)%s", one_line(job.batch_id), one_line(job.path),
                         f", attempt {attempts}" if attempts > 1 else "")
        started = time.perf_counter()
        entry = {"batch": self._location(job), "trusted": self.trusted, "batch_id": job.batch_id}
        if job.problem is not None:
            summary = self._failed(entry, ServeError(job.problem), "sidecar", job)
        elif attempts > self.settings.max_attempts:
            summary = self._failed(entry, ServeError(
                f"the served gate was interrupted {attempts - 1} times while gating this file"), "serve", job)
        else:
            try:
                local = self.folder.local_copy(job.path, self.cache)
                try:
                    summary = self.gate(self.config, str(local), self.trusted, batch_id=job.batch_id,
                                        hooks=self.hooks, run_id=job.claim)
                finally:
                    if self.folder.remote:
                        local.unlink(missing_ok=True)
            except Exception as exc:  # the gate fails closed itself; this guards the loop against anything else
                # a fresh run id: the gate may have stored a record under the claim before it raised
                summary = self._failed(entry, exc, "serve")
        self._announce(summary)
        self.ledger.finish(job, summary)
        self._after(job)
        reasons = "; ".join(summary.get("reasons") or [])
        # every value is escaped: a file name or a reason holding a line break cannot forge a line of the log
        self.logger.info("decided %s: %s in %.1f s (run %s)%s", one_line(job.batch_id), summary.get("decision"),
                         time.perf_counter() - started, summary.get("run_id"),
                         f" — {one_line(reasons)}" if reasons else "")
        return summary

    def _failed(self, entry: dict[str, Any], exc: BaseException, step: str, job: Job | None = None) -> dict[str, Any]:
        return runner.failed_batch(self.config, entry, exc, step, self.hooks.publish,
                                   run_id=None if job is None else job.claim)

    def _announce(self, summary: dict[str, Any]) -> None:
        if self.on_decision is None:
            return
        try:
            self.on_decision(summary)
        except Exception as exc:  # best effort: the decision is recorded whatever happens to its announcement
            self.logger.warning("the decision of %s was not announced: %s", one_line(summary.get("batch_id")),
                                one_line(exc))

    def _after(self, job: Job) -> None:
        try:
            if self.settings.after == "delete":
                self.folder.delete(job.path)
            elif self.settings.after == "move" and self.settings.move_to:
                self.folder.move(job.path, self.settings.move_to)
        except OSError as exc:  # the decision is taken and recorded; the file just stays where it is
            self.logger.warning("%s could not be %sd after gating: %s", one_line(job.path), self.settings.after,
                                one_line(exc))

    def _location(self, job: Job) -> str:
        """Where the file of ``job`` is, for messages and records: its URL or local path."""
        return f"{self.folder.location.rstrip('/')}/{job.path}"

    # -- the loop -------------------------------------------------------------------------------------------

    def serve(self, stop: threading.Event) -> None:
        """Recover, then look at the folder every ``serve.poll_seconds`` and gate what arrived, until ``stop``.

        ``stop`` is checked between batches: a batch that has started is finished (a process killed meanwhile
        leaves it running in the ledger, and :meth:`recover` settles it at the next start).
        """
        self.recover()
        while not stop.is_set():
            self.scan()
            self.drain(stop)
            stop.wait(self.settings.poll_seconds)

    def close(self) -> None:
        self.ledger.close()
