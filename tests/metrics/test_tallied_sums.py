"""Property: the labeler ICC, Conger's κ and ι from per-rater sums equal their values on the judgements.

:class:`labelgate.core.tallied.TalliedRatings` holds a pool's item x category rows and each rater's category counts
per item class, what a database returns (``tests/sqlagg/test_rater_tallies.py`` checks the query on SQLite and
PostgreSQL). Here the sums are formed literally from the judgements of random sparse two-pool designs (hypothesis:
single-rated items, items without trusted judgements, unequal ratings per item, unused categories, binary and
interval labels), and every quantity the three metrics report must agree with the judgements' (1e-9), errors
included. No database and no pandas: the core venv runs it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import labelgate as lg
from labelgate.core.ratings import Ratings
from labelgate.core.tallied import N_CLASSES, TalliedRatings, item_classes
from labelgate.errors import LabelGateError
from labelgate.metrics.cross import irr_comparison, normalized_cross_kappa
from labelgate.metrics.variance import item_icc, labeler_icc, variance_components
from tests.oracles import without_standard_error

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def two_pools(draw: Any) -> tuple[np.ndarray, np.ndarray, int, str]:
    """Crowd (every item rated at least once) and trusted (items may have none) wide tables of codes, NaN missing."""
    n_items = draw(st.integers(3, 12))
    q = draw(st.integers(2, 4))
    level = draw(st.sampled_from(["nominal", "interval"]))
    pools = []
    for n_raters, keep_first in ((draw(st.integers(2, 6)), True), (draw(st.integers(1, 3)), False)):
        data = draw(arrays(np.float64, (n_items, n_raters), elements=st.integers(0, q - 2 if q > 2 else 1).map(float)))
        mask = draw(arrays(np.bool_, (n_items, n_raters)))
        if keep_first:
            mask[:, 0] = False
        data[mask] = np.nan
        pools.append(data)
    return pools[0], pools[1], q, level


def from_rows(wide: np.ndarray, q: int, level: str, offset: int) -> Ratings:
    """The judgements of one pool, items by id 0..n-1, raters ``offset + column``."""
    items, raters = np.nonzero(~np.isnan(wide))
    return Ratings.from_long({"item": items.tolist(), "rater": (raters + offset).tolist(),
                              "value": wide[items, raters].astype(int).tolist()},
                             item="item", rater="rater", value="value", categories=list(range(q)),
                             level=level)  # type: ignore[arg-type]


def tallied(r: Ratings, other: Ratings | None, ids: np.ndarray, n_items: int) -> TalliedRatings:
    """The sums a database returns for ``r``, formed from its judgements (literally, per judgement)."""
    codes = np.asarray([int(v) for v in r.item_labels], dtype=np.int64)  # the shared index: item id = code
    other_n = np.zeros(n_items, dtype=np.int64)
    if other is not None:
        other_n[np.asarray([int(v) for v in other.item_labels], dtype=np.int64)] = other.ratings_per_item
    own_n = np.zeros(n_items, dtype=np.int64)
    own_n[codes] = r.ratings_per_item
    classes = item_classes(own_n, other_n)
    base = Ratings.from_aggregates(codes[r.item_codes], r.value_codes, np.ones(r.n_ratings, dtype=np.int64),
                                   item_labels=ids, categories=r.categories, level=r.level)
    sums = np.zeros((N_CLASSES, r.n_raters, r.n_categories), dtype=np.int64)
    for item, rater, value in zip(codes[r.item_codes], r.rater_codes, r.value_codes, strict=True):
        sums[classes[item], rater, value] += 1
    return TalliedRatings(base, list(r.rater_labels), sums, classes)  # type: ignore[arg-type]


def outcome(compute: Any, r: Ratings, t: Ratings | None) -> Any:
    """``compute(r, t).to_dict()`` without its standard error, or the name of the LabelGate error it raised."""
    try:
        found = compute(r, t).to_dict()
    except LabelGateError as exc:
        return type(exc).__name__
    return without_standard_error(found)



def close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), where
        for key in a:
            close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            assert (a is None or math.isnan(a)) and (b is None or math.isnan(b)), (where, a, b)
        else:
            assert a == pytest.approx(b, rel=1e-9, abs=1e-9), where
    else:
        assert a == b, (where, a, b)


@SETTINGS
@given(two_pools())
def test_the_rater_metrics_from_sums_equal_the_judgements(pools):
    crowd_wide, trusted_wide, q, level = pools
    crowd = from_rows(crowd_wide, q, level, 0)
    trusted = from_rows(trusted_wide, q, level, 100) if np.isfinite(trusted_wide).any() else None
    n_items = crowd_wide.shape[0]
    ids = np.empty(n_items, dtype=object)
    ids[:] = list(range(n_items))
    sums_crowd = tallied(crowd, trusted, ids, n_items)
    checks: dict[str, Any] = {
        "conger": lambda r, t: lg.conger_kappa(r),
        "conger_pairable": lambda r, t: lg.conger_kappa(r, marginals="pairable_items"),
        "iota": lambda r, t: lg.janson_olsson_iota(r),
        "components": lambda r, t: variance_components(r),
        "item_icc": lambda r, t: item_icc(r),
        "labeler_icc": lambda r, t: labeler_icc(r),
    }
    sums_trusted = None
    if trusted is not None:
        sums_trusted = tallied(trusted, crowd, ids, n_items)
        for irr in ("conger_kappa", "janson_olsson_iota"):
            checks[f"compare_{irr}"] = lambda r, t, irr=irr: irr_comparison(r, t, irr=irr)
            checks[f"normalized_{irr}"] = lambda r, t, irr=irr: normalized_cross_kappa(r, t, irr=irr)
    for name, compute in checks.items():
        close(outcome(compute, sums_crowd, sums_trusted), outcome(compute, crowd, trusted), name)
