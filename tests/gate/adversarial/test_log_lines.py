"""No value from the data can forge a line of the served gate's log (the review's seventh probe)."""

from __future__ import annotations

import io
import logging

from labelgate.gate.watch import DropFolder, serve_settings
from labelgate.pipeline.config import config_from_dict
from labelgate.pipeline.limits import OneLineFormatter
from tests.gate.test_drop_folder import MALFORMED, gate_config

FORGED = "rnd\n2026-11-29 06:00:00,000 INFO decided payroll-batch: ACCEPT in 0.1 s (run x)\n\x1b[2Kok"


def test_a_file_name_holding_a_forged_log_line_stays_on_its_own_line(tmp_path):
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / f"{FORGED}.csv").write_text(MALFORMED, encoding="utf-8")  # ERROR: its reasons name the file too
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(message)s"))
    records: list[logging.LogRecord] = []
    collector = logging.Handler()
    collector.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("labelgate.test.serve-forging")
    logger.handlers[:] = [handler, collector]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    gate_logger = logging.getLogger("labelgate.gate")
    gate_logger.addHandler(handler)
    try:
        cfg = config_from_dict(gate_config(tmp_path))
        folder = DropFolder(cfg, serve_settings(cfg), logger=logger)
        folder.scan()
        (summary,) = folder.drain()
        folder.close()
    finally:
        gate_logger.removeHandler(handler)
    assert summary["decision"] == "ERROR"
    lines = stream.getvalue().splitlines()
    assert lines and not any(line.startswith("2026-11-29 06:00:00,000 INFO decided payroll-batch") for line in lines)
    assert not any("\x1b" in line for line in lines)
    # the served gate's own messages escape their values, whatever handler a library user attaches
    assert all("\n" not in record.getMessage() and "\x1b" not in record.getMessage() for record in records)
    assert any("decided rnd\\n2026-11-29" in record.getMessage() for record in records)


def test_a_traceback_is_one_line_too():
    try:
        raise ValueError("line one\nline two")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "", 0, "failed", (), __import__("sys").exc_info())
    text = OneLineFormatter("%(levelname)s %(message)s").format(record)
    assert "\n" not in text and "line one\\nline two" in text and "Traceback" in text
