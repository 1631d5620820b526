"""The report's section on a span or box question: what the spans or boxes became (texts or images, units) and the
agreement on each label alone (:func:`labelgate.pipeline.units.per_label`), with the mean matched IoU of boxes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labelgate.reporting.values import fmt, mapping, number

_KIND = {"spans": ("texts", "positions"), "boxes": ("images", "objects")}


def units_section(entry: Any) -> dict[str, Any] | None:
    """The values the template shows for one question's ``summary["units"]`` entry (None: not a span / box one)."""
    entry = mapping(entry)
    if not entry:
        return None
    items, units = _KIND.get(str(entry.get("kind")), ("items", "units"))
    if entry.get("unit") == "token":
        units = "tokens"
    rows = [{"label": str(row.get("label")), "units_crowd": number(row.get("units_crowd")),
             "units_trusted": number(row.get("units_trusted")), "alpha_crowd": fmt(row.get("alpha_crowd")),
             "alpha_trusted": fmt(row.get("alpha_trusted")), "cross_kappa": fmt(row.get("cross_kappa"))}
            for row in (mapping(r) for r in entry.get("labels") or [])]
    read = mapping(entry.get("items"))
    totals = (", ".join(f"{number(n)} {items} of the {pool} pool" for pool, n in read.items())
              + f"; {number(entry.get('units'))} {units} measured")
    return {"kind": entry.get("kind"), "units": units, "totals": totals, "labels": rows,
            "iou": _iou(mapping(entry.get("iou")))}


def _iou(iou: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(who, mean matched IoU)`` rows: each pool, then each rater of each pool."""
    rows = [(f"{key} pool", fmt(value)) for key, value in iou.items()
            if key != "raters" and not isinstance(value, dict)]
    for pool, raters in mapping(iou.get("raters")).items():
        rows += [(f"{rater} ({pool})", fmt(value)) for rater, value in sorted(mapping(raters).items())]
    return rows
