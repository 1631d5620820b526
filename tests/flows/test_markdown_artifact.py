"""The Prefect markdown artifact shows data as typed: question names, batch ids, reasons and paths are escaped.

A question named ``<script>alert(1)</script>`` must reach the Prefect UI as text, and a newline in ``--batch-id``
must not forge lines of the artifact. The artifact is captured where the flow hands it to Prefect
(``create_markdown_artifact``), from a real gate run's summary; no Prefect server is needed.
"""

from __future__ import annotations

from typing import Any

import pytest

from labelgate.flows import gate as gate_flows
from labelgate.gate import Hooks, run
from labelgate.pipeline.synth import scenario_named, simulate

SCRIPT = "<script>alert(1)</script>"
FORGED_ID = "b1\n# ACCEPT\n- every blocking expectation passes"


@pytest.mark.parametrize(("text", "shown"), [
    (SCRIPT, "&lt;script&gt;alert\\(1\\)&lt;\\/script&gt;"),
    ("a\nb\r\nc\td\u2028e", "a\\\\nb\\\\r\\\\nc\\\\td\\\\u2028e"),
    ("| x | [link](javascript:alert(1)) *b* _i_ `code` ![img](x)",
     "\\| x \\| \\[link\\]\\(javascript\\:alert\\(1\\)\\) \\*b\\* \\_i\\_ \\`code\\` \\!\\[img\\]\\(x\\)"),
    ("&amp; \"q\" 'a'", "&amp;amp\\; &quot;q&quot; &#x27;a&#x27;"),
    ("plain text 123", "plain text 123"),
    (None, ""),
])
def test_markdown_text_escapes_html_markdown_and_line_breaks(text, shown):
    assert gate_flows.markdown_text(text) == shown


def test_artifact_markdown_escapes_every_value_from_the_data():
    summary = {"decision": "REJECT", "batch_id": FORGED_ID, "report": "out/<b>.html",
               "reasons": [f"[{SCRIPT}] spa (min_value 0.6): fails | forged cell"],
               "metrics": {SCRIPT: {"spa": {"value": 0.3, "ci_low": 0.2, "ci_high": 0.4, "verdict": "reject"}}}}
    markdown = gate_flows.artifact_markdown(summary)
    assert "<" not in markdown and ">" not in markdown
    lines = markdown.splitlines()
    assert lines[2] == "Batch: b1\\\\n\\# ACCEPT\\\\n\\- every blocking expectation passes"
    assert not any(line.startswith(("# ACCEPT", "- every")) for line in lines)
    table = [line for line in lines if line.startswith("| &lt;script")]
    assert len(table) == 1 and table[0].count(" | ") == 4  # the question's cell did not open a new cell
    assert "Report: out\\/&lt;b&gt;\\.html" in lines


def test_a_gate_runs_artifact_shows_a_script_question_and_a_forged_batch_id_escaped(tmp_path, monkeypatch):
    captured: dict[str, Any] = {}
    monkeypatch.setattr(gate_flows, "create_markdown_artifact", lambda **kw: captured.update(markdown=kw["markdown"]))
    monkeypatch.setattr(gate_flows, "create_table_artifact", lambda **kw: captured.update(table=kw["table"]))
    frame = simulate(scenario_named("good", 300), seed=1)
    frame.to_csv(tmp_path / "both.csv", index=False)
    config = {"questions": [{"name": SCRIPT, "label_column": "label"}],
              "gates": [{"type": "spa", "min_value": 0.2}], "interval": {"n_boot": 50},
              "store": {"url": f"sqlite:///{(tmp_path / 'r.db').as_posix()}"},
              "reports": {"dir": (tmp_path / "reports").as_posix()}}
    summary = run(config, tmp_path / "both.csv", batch_id=FORGED_ID, hooks=Hooks(on_summary=gate_flows._artifacts))
    assert summary["decision"] != "ERROR", summary["reasons"]
    markdown = captured["markdown"]
    assert SCRIPT not in markdown and "<script" not in markdown
    assert "| &lt;script&gt;alert\\(1\\)&lt;\\/script&gt; | spa |" in markdown
    assert "Batch: b1\\\\n\\# ACCEPT\\\\n\\- every blocking expectation passes" in markdown.splitlines()
    assert not any(line.startswith("# ACCEPT") for line in markdown.splitlines())


def test_artifact_markdown_carries_the_next_steps():
    summary = {"decision": "REVIEW", "batch_id": "b", "reasons": ["why"], "metrics": {},
               "next_steps": ["[label] irr_baseline: more items: about 1787 items"]}
    markdown = gate_flows.artifact_markdown(summary)
    assert "## What to do next" in markdown and "about 1787 items" in markdown
