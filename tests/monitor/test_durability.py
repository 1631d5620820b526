"""A committed monitor pass survives the death of its process (the SQLite store's rollback journal with full syncs,
``labelgate.pipeline.database``; docs/monitoring.md "Pass cost")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import text

from labelgate.monitor.engine import count_passes
from labelgate.pipeline.database import make_engine

_KILLED_AFTER_COMMIT = textwrap.dedent(
    """
    import os, signal, sys
    from labelgate.monitor import Monitor
    cfg = {"store": {"url": sys.argv[1]}, "monitor": {"source": {"path": sys.argv[2]}}}
    summary = Monitor(cfg).run_pass(send_alerts=False)
    print(summary["n_new"], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no clean-up of any kind
    """
)


def test_a_committed_pass_survives_a_process_kill(tmp_path: Path) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "d1.csv").write_text("item_id,rater_id,label,pool\n1,a,x,crowd\n1,b,x,crowd\n2,a,y,crowd\n"
                                 "2,b,x,crowd\n1,t,x,trusted\n")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = subprocess.run([sys.executable, "-c", _KILLED_AFTER_COMMIT, url, str(drop)], capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.split() == ["5"]
    engine = make_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "delete"
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar() == -32768
        assert conn.execute(text("SELECT count(*) FROM labelgate_monitor_judgements")).scalar() == 5
    cfg = {"store": {"url": url}, "monitor": {"source": {"path": str(drop)}}}
    assert count_passes(cfg) == 1
