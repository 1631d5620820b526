"""Episodes are drift incidents of a question: alarms of any series and rule that overlap in time are one episode
(one alert), each listed with its numbers and start; the episode closes when every alarm has recovered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, insert, select

from labelgate.monitor import alerting, drift, episodes
from labelgate.monitor.history import alarm_row
from labelgate.pipeline.config import monitor_config_from_dict
from labelgate.pipeline.database import make_engine, transaction
from labelgate.pipeline.migrations import migrate
from labelgate.pipeline.tables import episodes_table
from tests.conftest import postgres_database

HOUR = 3_600_000_000  # microseconds


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path) -> Iterator[Engine]:
    """A migrated store: a SQLite file, and a database of its own on the test PostgreSQL server (JSON updates)."""
    with contextlib.ExitStack() as stack:
        url = (f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite"
               else stack.enter_context(postgres_database("labelgate_episodes")))
        engine = make_engine(url)
        stack.callback(engine.dispose)
        migrate(engine)
        yield engine


def alarm(transition: str, kind: str, since: int, at: int, value: float) -> drift.Event:
    window = {"window_index": at, "window_start": at * HOUR, "window_end": (at + 1) * HOUR, "value": value,
              "ci_low": value - 0.05, "ci_high": value + 0.05, "n_items": 100}
    return drift.Event(transition, kind, since * HOUR, window, f"{kind} {transition} at {at}", {"threshold": 0.4})


def record(conn, metric: str, event: drift.Event, detectors: dict[str, Any]) -> dict[str, Any]:
    state = detectors.setdefault(metric, drift.new_state())
    if event.transition == "open":  # as drift.step leaves it: the detector holds the open alarm
        state[event.kind]["open"] = {"since": event.since, "window": event.window["window_index"]}
    return episodes.record_event(conn, "m", "q", metric, event, ["r1"], state)


def stored(engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(episodes_table).order_by(episodes_table.c.opened_at)).mappings()]


def test_overlapping_alarms_of_a_question_are_one_episode_closed_when_all_recovered(engine):
    detectors: dict[str, Any] = {}
    with transaction(engine, write=True) as conn:
        first = record(conn, "irr_crowd", alarm("open", "change", 10, 12, 0.2), detectors)
        joined = [record(conn, "irr_crowd", alarm("open", "baseline", 11, 12, 0.2), detectors),
                  record(conn, "cross_kappa", alarm("open", "change", 9, 13, 0.3), detectors)]
    assert first["transition"] == "open" and [j["transition"] for j in joined] == ["joined", "joined"]
    assert {j["episode_id"] for j in joined} == {first["episode_id"]}
    assert first["episode_id"] == drift.episode_id("m", "q", "irr_crowd", "change", 10 * HOUR)
    assert detectors["cross_kappa"]["change"]["open"]["episode_id"] == first["episode_id"]
    (row,) = stored(engine)
    assert row["opened_at"] == 9 * HOUR  # the earliest start of its alarms
    assert (row["metric"], row["kind"]) == ("irr_crowd", "change")  # the alarm that opened it
    alarms = episodes.members(row)
    assert [(a["metric"], a["kind"], a["since"]) for a in alarms] == [
        ("irr_crowd", "change", 10 * HOUR), ("irr_crowd", "baseline", 11 * HOUR), ("cross_kappa", "change", 9 * HOUR)]
    assert alarm_row(alarms[2])["value"] == pytest.approx(0.3) and alarm_row(alarms[1])["threshold"] == 0.4

    with transaction(engine, write=True) as conn:
        steps = [record(conn, "irr_crowd", alarm("close", "change", 10, 20, 0.5), detectors),
                 record(conn, "irr_crowd", alarm("close", "baseline", 11, 21, 0.5), detectors)]
    assert [s["transition"] for s in steps] == ["recovered", "recovered"]
    assert stored(engine)[0]["closed_at"] is None  # κx is still in alarm: the incident goes on
    with transaction(engine, write=True) as conn:
        # an alarm that fires while the episode is open joins it, even after others recovered
        again = record(conn, "irr_crowd", alarm("open", "baseline", 22, 22, 0.2), detectors)
        assert again["transition"] == "joined" and again["episode_id"] == first["episode_id"]
        record(conn, "irr_crowd", alarm("close", "baseline", 22, 24, 0.5), detectors)
        last = record(conn, "cross_kappa", alarm("close", "change", 9, 25, 0.5), detectors)
    assert last["transition"] == "close" and last["episode_id"] == first["episode_id"]
    (row,) = stored(engine)
    assert row["closed_at"] == 26 * HOUR and row["alerts_done"] is False
    assert all(a["closed_at"] is not None for a in episodes.members(row))
    assert row["close_reason"].startswith("every alarm recovered: irr_crowd (change): change close at 20")

    # after the close, a new alarm is a new incident
    with transaction(engine, write=True) as conn:
        new = record(conn, "spa", alarm("open", "baseline", 40, 40, 0.1), detectors)
    assert new["transition"] == "open" and new["episode_id"] != first["episode_id"]
    assert [r["closed_at"] is None for r in stored(engine)] == [False, True]


def test_re_recording_an_alarm_adds_nothing(engine):
    detectors: dict[str, Any] = {}
    with transaction(engine, write=True) as conn:
        record(conn, "irr_crowd", alarm("open", "change", 10, 12, 0.2), detectors)
        record(conn, "spa", alarm("open", "baseline", 11, 12, 0.2), detectors)
        record(conn, "spa", alarm("open", "baseline", 11, 12, 0.2), detectors)
    (row,) = stored(engine)
    assert len(episodes.members(row)) == 2


def test_an_episode_of_an_earlier_release_reads_and_closes_as_one_alarm(engine):
    eid = drift.episode_id("m", "q", "cross_kappa", "baseline", 5 * HOUR)
    with transaction(engine, write=True) as conn:
        conn.execute(insert(episodes_table).values(
            episode_id=eid, monitor="m", question="q", metric="cross_kappa", kind="baseline", opened_at=5 * HOUR,
            closed_at=None, reason="old", close_reason=None, worst_raters=[], details={"opened_by": {"value": 0.1}},
            alerts_done=True))
        joined = record(conn, "irr_crowd", alarm("open", "change", 6, 7, 0.2), {})
        assert (joined["transition"], joined["episode_id"]) == ("joined", eid)
        assert record(conn, "cross_kappa", alarm("close", "baseline", 5, 9, 0.5), {})["transition"] == "recovered"
        assert record(conn, "irr_crowd", alarm("close", "change", 6, 10, 0.5), {})["transition"] == "close"
    (row,) = stored(engine)
    assert row["closed_at"] == 11 * HOUR and [a["metric"] for a in episodes.members(row)] == ["cross_kappa",
                                                                                            "irr_crowd"]


def test_the_alert_lists_every_alarm_with_its_numbers():
    cfg = monitor_config_from_dict({"store": {"url": "sqlite://"}, "monitor": {"source": {"path": "drop"}}})
    alarms = [{"metric": "irr_crowd", "kind": "change", "since": 10 * HOUR, "reason": "agreement fell: CUSUM 5.6",
               "details": {}, "opened_by": {"value": 0.13, "ci_low": 0.05, "ci_high": 0.24, "window_start": "a",
                                            "window_end": "b"}, "closed_at": None, "close_reason": None},
              {"metric": "cross_kappa", "kind": "baseline", "since": 11 * HOUR, "reason": "below 0.400",
               "details": {}, "opened_by": {"value": 0.2}, "closed_at": None, "close_reason": None}]
    episode = {"episode_id": "e1", "question": "q", "metric": "irr_crowd", "kind": "change", "opened_at": 10 * HOUR,
               "closed_at": None, "reason": "agreement fell: CUSUM 5.6", "close_reason": None,
               "worst_raters": ["r1"], "details": {"members": alarms}}
    out = alerting.message(cfg, episode, "open")
    text = "\n".join(out["reasons"])
    assert "drift episode opened: irr_crowd (change), cross_kappa (baseline)" in text
    assert "irr_crowd (change) since 1970-01-01T10:00:00+00:00: agreement fell: CUSUM 5.6" in text
    assert "cross_kappa (baseline) since 1970-01-01T11:00:00+00:00: below 0.400" in text
    assert out["headline"] == {"q/irr_crowd": {"value": 0.13, "ci_low": 0.05, "ci_high": 0.24},
                               "q/cross_kappa": {"value": 0.2, "ci_low": None, "ci_high": None}}
    assert out["run_id"] == "e1" and "worst raters at opening: r1" in text
