"""The pipeline's answers when a configured feature's extra is not installed: the preflight refuses the
configuration naming the extra, and alert delivery (called from the Python API without the preflight) keeps each
alert owed with an error that names the extra, never raises."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from labelgate import extras
from labelgate.pipeline import alerts, preflight
from labelgate.pipeline.config import Alerts


def _without(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in names else real(name, *a))


def _config(**changes: object) -> SimpleNamespace:
    source = SimpleNamespace(format="csv")
    base = {"alerts": SimpleNamespace(channels=[]), "runner": "local", "batch": source, "trusted": source}
    return SimpleNamespace(**{**base, **changes})


@pytest.mark.parametrize(("changes", "blocked", "extra", "feature"), [
    ({"alerts": SimpleNamespace(channels=[object()])}, "prefect", "prefect", "alert channels (alerts.channels)"),
    ({"runner": "dask"}, "distributed", "dask", "runner: dask"),
    ({"batch": SimpleNamespace(format="label_studio")}, "httpx", "label-studio",
     "a Label Studio source (batch.format: label_studio)"),
])
def test_the_preflight_names_the_extra_a_configuration_needs(monkeypatch, changes, blocked, extra, feature):
    preflight.check_extras(_config())  # nothing asked for: nothing required
    _without(monkeypatch, blocked)
    with pytest.raises(extras.MissingExtraError) as caught:
        preflight.check_extras(_config(**changes))
    assert str(caught.value) == f"{feature}: the '{extra}' extra is not installed (missing: {blocked})"
    assert caught.value.hint == f"pip install 'labelgate[{extra}]'"


def test_alerts_without_prefect_stay_owed_naming_the_extra(monkeypatch):
    _without(monkeypatch, "prefect")
    cfg = Alerts(channels=[{"type": "webhook", "url_env": "LG_HOOK"}, {"type": "slack", "url_env": "LG_SLACK"}])
    out = alerts.deliver("REJECT", {"batch_id": "b1"}, cfg, dedupe_key="k1")
    assert [o["channel"] for o in out] == ["webhook:LG_HOOK", "slack:LG_SLACK"]
    for outcome in out:
        assert outcome["ok"] is False and outcome["attempts"] == 0 and outcome["dedupe_key"] == "k1"
        assert outcome["error"].startswith("alert channels need the 'prefect' extra (pip install 'labelgate[prefect]')")
    assert alerts.deliver("ACCEPT", {"batch_id": "b1"}, cfg) == []  # not in notify_on: nothing owed
