"""The pass summary printed by ``labelgate monitor`` names the pass's invalid rows (summed over its deliveries)."""

from __future__ import annotations

from labelgate.cli.monitor import pass_text


def _summary(n_invalid):
    delivery = {"delivery_id": "d1", "status": "merged", "n_new": 5, "n_already": 0, "n_conflicts": 0,
                "n_invalid": n_invalid}
    return {"monitor": "m", "pass_id": "p1", "n_new": 5, "n_invalid": n_invalid, "deliveries": [delivery]}


def test_the_pass_line_names_invalid_rows_only_when_there_are_some():
    assert pass_text(_summary(3)).splitlines()[0] == "monitor m: pass p1  5 new judgement(s), 3 invalid row(s) not merged"
    assert pass_text(_summary(0)).splitlines()[0] == "monitor m: pass p1  5 new judgement(s)"
