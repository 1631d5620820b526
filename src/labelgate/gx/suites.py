"""Expectation suites as data: load them strictly, build them from a config, verify them after GX loads them.

GX's own loading is lenient in a way that is dangerous for a gate: when a
suite (a JSON file, or a suite stored in a file context) names an expectation
type that is not registered in the running process (the module defining it
was not imported), or one whose parameters are invalid, GX only *logs* the
problem and returns the suite **without** that expectation, so the gate
passes silently. LabelGate's loaders raise instead:

* :func:`load_suite` / :func:`suite_from_dict` build every expectation
  themselves and raise :class:`SuiteIntegrityError` for an unregistered type
  and GX's ``InvalidExpectationConfigurationError`` (message naming the
  parameter) for invalid parameters;
* every suite they build carries a *manifest* of its expectation types in
  ``meta["labelgate"]``, stored by GX with the suite; :func:`verify_suite`
  checks a suite obtained any other way (``context.suites.get``, a
  checkpoint's validation definitions) against it;
* :func:`get_suite` reads a suite from a context and compares it with the
  raw stored JSON, so it catches drops even in suites without a manifest.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.compatibility import pydantic
from great_expectations.exceptions import InvalidExpectationConfigurationError
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration
from great_expectations.expectations.metadata_types import FailureSeverity
from great_expectations.expectations.registry import _registered_expectations, _registered_metrics

from labelgate.gx._base import LabelGateExpectation
from labelgate.gx.expect_cross_kappa_to_be_at_least import ExpectCrossKappaToBeAtLeast
from labelgate.gx.expect_irr_at_or_above_trusted_baseline import ExpectIrrAtOrAboveTrustedBaseline
from labelgate.gx.expect_labeler_icc_below_item_icc import ExpectLabelerIccBelowItemIcc
from labelgate.gx.expect_normalized_cross_kappa_to_be_at_least import (
    ExpectNormalizedCrossKappaToBeAtLeast,
)
from labelgate.gx.expect_spa_to_be_between import ExpectSpaToBeBetween

#: Every LabelGate expectation class by its GX type.
EXPECTATION_CLASSES: dict[str, type[LabelGateExpectation]] = {
    cls.expectation_type: cls
    for cls in (ExpectIrrAtOrAboveTrustedBaseline, ExpectNormalizedCrossKappaToBeAtLeast,
                ExpectCrossKappaToBeAtLeast, ExpectLabelerIccBelowItemIcc, ExpectSpaToBeBetween)
}
LABELGATE_EXPECTATION_TYPES: tuple[str, ...] = tuple(EXPECTATION_CLASSES)

#: Short names accepted in a config (``"type": "normalized_cross_kappa"``).
SHORT_NAMES: dict[str, str] = {
    "irr_baseline": "expect_irr_at_or_above_trusted_baseline",
    "normalized_cross_kappa": "expect_normalized_cross_kappa_to_be_at_least",
    "cross_kappa": "expect_cross_kappa_to_be_at_least",
    "labeler_icc": "expect_labeler_icc_below_item_icc",
    "spa": "expect_spa_to_be_between",
}

MANIFEST_KEY = "labelgate"
# Keys of an expectation entry that are not expectation parameters.
_ENTRY_KEYS = ("type", "kwargs", "meta", "notes", "description", "severity", "id")


class SuiteIntegrityError(InvalidExpectationConfigurationError):
    """A suite names an expectation GX cannot build, or lost expectations while loading.

    Attributes
    ----------
    missing : dict
        ``{expectation type: count}`` of the expectations that are absent.
    """

    def __init__(self, message: str, missing: Mapping[str, int] | None = None) -> None:
        super().__init__(message)
        self.missing = dict(missing or {})


# ------------------------------------------------------------------ registry
def check_registered(types: Iterable[str] = LABELGATE_EXPECTATION_TYPES) -> None:
    """Raise :class:`SuiteIntegrityError` unless every type (and its metric) is registered with GX.

    Examples
    --------
    >>> from labelgate.gx import check_registered
    >>> check_registered()  # every LabelGate expectation is registered once the package is imported
    """
    missing = [t for t in types if t not in _registered_expectations]
    for t in types:
        cls = EXPECTATION_CLASSES.get(t)
        if cls is not None and t not in missing:
            missing += [f"metric {m} of {t}" for m in cls.metric_dependencies if m not in _registered_metrics]
    if missing:
        raise SuiteIntegrityError(f"These expectation types are not registered with Great Expectations: "
                                  f"{missing}. Import the module that defines them (`import labelgate.gx` "
                                  "registers every LabelGate expectation).", Counter(missing))


def _unregistered_message(suite_name: str, index: int, type_: str) -> str:
    hint = ("It is a LabelGate type: `import labelgate.gx` registers it." if type_ in LABELGATE_EXPECTATION_TYPES
            else "Check the spelling, or import the module that defines it.")
    if type_.startswith("expect_") and type_ not in LABELGATE_EXPECTATION_TYPES:
        close = [t for t in LABELGATE_EXPECTATION_TYPES if _similar(t, type_)]
        if close:
            hint = f"Did you mean {close[0]!r}?"
    return (f"Suite {suite_name!r}: expectation #{index} has type {type_!r}, which is not registered with "
            f"Great Expectations; GX would silently drop it and the gate would pass without it. {hint}")


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() > 0.8


# ------------------------------------------------------------------ building
def _build(suite_name: str, index: int, entry: Mapping[str, Any]) -> Any:
    """One expectation object from a suite entry; raise instead of dropping."""
    type_ = entry.get("type") or entry.get("expectation_type")
    if not isinstance(type_, str):
        raise InvalidExpectationConfigurationError(f"Suite {suite_name!r}: expectation #{index} has no 'type'.")
    if type_ not in _registered_expectations:
        raise SuiteIntegrityError(_unregistered_message(suite_name, index, type_), {type_: 1})
    try:
        severity = FailureSeverity(entry.get("severity") or "critical")
    except ValueError as err:
        raise InvalidExpectationConfigurationError(
            f"Suite {suite_name!r}: expectation #{index} ({type_}) has an invalid 'severity' "
            f"{entry.get('severity')!r}; use one of {[s.value for s in FailureSeverity]}.") from err
    config = ExpectationConfiguration(type=type_, kwargs=dict(entry.get("kwargs") or {}),
                                      meta=entry.get("meta"), notes=entry.get("notes"),
                                      description=entry.get("description"), severity=severity, id=entry.get("id"))
    try:
        return config.to_domain_obj()
    except pydantic.ValidationError as err:
        raise InvalidExpectationConfigurationError(
            f"Suite {suite_name!r}: expectation #{index} ({type_}) has invalid parameters: {err}") from err


def _manifest(types: Iterable[str]) -> dict[str, Any]:
    from labelgate._version import __version__

    return {"expectation_types": list(types), "labelgate_version": __version__}


def suite_from_dict(data: Mapping[str, Any], name: str | None = None) -> gx.ExpectationSuite:
    """Build a GX suite from its JSON form, raising on anything GX would drop.

    Parameters
    ----------
    data : mapping
        ``{"name", "expectations": [{"type", "kwargs", "meta", "severity", ...}], "suite_parameters", "meta",
        "notes"}`` — the format of GX's ``gx/expectations/<suite>.json``.
    name : str, optional
        Overrides ``data["name"]``.

    Raises
    ------
    SuiteIntegrityError
        An expectation type is not registered.
    great_expectations.exceptions.InvalidExpectationConfigurationError
        An expectation has invalid parameters (the message names them).

    Examples
    --------
    >>> from labelgate.gx import suite_from_dict
    >>> suite = suite_from_dict({"name": "s", "expectations": [
    ...     {"type": "expect_cross_kappa_to_be_at_least", "kwargs": {"min_value": 0.6}}]})
    >>> [e.expectation_type for e in suite.expectations], suite.meta["labelgate"]["expectation_types"]
    (['expect_cross_kappa_to_be_at_least'], ['expect_cross_kappa_to_be_at_least'])
    """
    check_registered()
    suite_name = name or data.get("name")
    if not suite_name or not isinstance(suite_name, str):
        raise InvalidExpectationConfigurationError("A suite needs a non-empty string 'name'.")
    entries = list(data.get("expectations") or [])
    built = [_build(suite_name, i, e) for i, e in enumerate(entries)]
    meta = dict(data.get("meta") or {})
    meta[MANIFEST_KEY] = _manifest(e.expectation_type for e in built)
    suite = gx.ExpectationSuite(name=suite_name, expectations=built, meta=meta, notes=data.get("notes"),
                                suite_parameters=dict(data.get("suite_parameters") or {}))
    return verify_suite(suite)


def suites_dir() -> Path:
    """The folder of shipped suites: ``$LABELGATE_SUITES_DIR`` or the repository's ``expectations/``."""
    env = os.environ.get("LABELGATE_SUITES_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "expectations"


def load_suite(name_or_path: str | os.PathLike[str], *, directory: str | os.PathLike[str] | None = None,
               ) -> gx.ExpectationSuite:
    """Load a suite JSON strictly (see :func:`suite_from_dict`).

    Parameters
    ----------
    name_or_path : str or path
        A path to a ``.json`` file, or the name of a suite in ``directory``
        (default :func:`suites_dir`), e.g. ``"crowd_vs_trusted"``.
    """
    path = Path(name_or_path)
    if not path.is_file():
        folder = Path(directory) if directory is not None else suites_dir()
        path = folder / f"{Path(name_or_path).name.removesuffix('.json')}.json"
    if not path.is_file():
        raise FileNotFoundError(f"No suite {str(name_or_path)!r}: {path} does not exist.")
    with path.open(encoding="utf-8") as fh:
        return suite_from_dict(json.load(fh))


def _resolve_type(name: str) -> str:
    if name in _registered_expectations or name in LABELGATE_EXPECTATION_TYPES:
        return name
    if name in SHORT_NAMES:
        return SHORT_NAMES[name]
    by_class = {cls.__name__: t for t, cls in EXPECTATION_CLASSES.items()}
    return by_class.get(name, name)


def suite_from_config(config: Mapping[str, Any]) -> gx.ExpectationSuite:
    """Build a suite from a gate configuration.

    Parameters
    ----------
    config : mapping
        ``name``; ``defaults`` (parameters given to every LabelGate
        expectation that accepts them: columns, pools, level, categories,
        ci, ...); ``expectations``, a list of entries with ``type`` (a GX type,
        a class name or a short name: ``irr_baseline``,
        ``normalized_cross_kappa``, ``cross_kappa``, ``labeler_icc``,
        ``spa``), the expectation's parameters, and optionally ``severity``,
        ``meta``, ``notes``; ``suite_parameters`` and ``meta`` (optional).

    Raises
    ------
    great_expectations.exceptions.InvalidExpectationConfigurationError
        Unknown default or parameter, bad value (the message names it),
        unregistered type (:class:`SuiteIntegrityError`).

    Examples
    --------
    >>> from labelgate.gx import suite_from_config
    >>> suite = suite_from_config({"name": "gate", "defaults": {"crowd_pool": "mturk", "trusted_pool": "experts"},
    ...     "expectations": [{"type": "normalized_cross_kappa", "min_value": {"$PARAMETER": "min_nkx"}},
    ...                      {"type": "spa", "min_value": 0.6, "severity": "warning"}]})
    >>> [(e.expectation_type, e.crowd_pool) for e in suite.expectations]
    [('expect_normalized_cross_kappa_to_be_at_least', 'mturk'), ('expect_spa_to_be_between', 'mturk')]
    """
    defaults = dict(config.get("defaults") or {})
    known = set().union(*(cls.__fields__ for cls in EXPECTATION_CLASSES.values()))
    unknown = sorted(set(defaults) - known)
    if unknown:
        raise InvalidExpectationConfigurationError(
            f"Unknown parameter(s) {unknown} in the 'defaults' of suite config {config.get('name')!r}; "
            f"LabelGate expectations accept {sorted(known - {'id', 'meta', 'notes', 'result_format'})}.")
    entries = []
    for i, raw in enumerate(config.get("expectations") or []):
        if "type" not in raw:
            raise InvalidExpectationConfigurationError(
                f"Suite config {config.get('name')!r}: entry #{i} has no 'type'.")
        type_ = _resolve_type(str(raw["type"]))
        cls = EXPECTATION_CLASSES.get(type_)
        applicable = {k: v for k, v in defaults.items() if cls is not None and k in cls.__fields__}
        params = {k: v for k, v in raw.items() if k not in _ENTRY_KEYS}
        entries.append({**{k: raw[k] for k in _ENTRY_KEYS if k in raw and k != "kwargs"}, "type": type_,
                        "kwargs": {**applicable, **dict(raw.get("kwargs") or {}), **params}})
    return suite_from_dict({"name": config.get("name"), "expectations": entries, "meta": config.get("meta"),
                            "notes": config.get("notes"), "suite_parameters": config.get("suite_parameters")})


# ---------------------------------------------------------------- verifying
def _types(suite: gx.ExpectationSuite) -> Counter[str]:
    return Counter(e.expectation_type for e in suite.expectations)


def verify_suite(suite: gx.ExpectationSuite) -> gx.ExpectationSuite:
    """Check a suite against the manifest it carries in ``meta["labelgate"]``; return it.

    A suite without a manifest is returned unchanged (use :func:`get_suite`
    to compare with the stored JSON instead).

    Raises
    ------
    SuiteIntegrityError
        When expectations listed in the manifest are absent (GX dropped them).
    """
    manifest = (suite.meta or {}).get(MANIFEST_KEY) or {}
    expected = Counter(manifest.get("expectation_types") or [])
    missing = expected - _types(suite)
    if missing:
        raise SuiteIntegrityError(_missing_message(suite.name, missing, "its manifest"), missing)
    return suite


def _missing_message(name: str, missing: Counter[str], against: str) -> str:
    parts = []
    for type_, n in sorted(missing.items()):
        why = ("not registered in this process (`import labelgate.gx`?)" if type_ not in _registered_expectations
               else "its stored parameters are invalid (see the GX log)")
        parts.append(f"{n} x {type_}: {why}")
    return (f"Suite {name!r} lost expectations while Great Expectations loaded it (compared with {against}): "
            + "; ".join(parts) + ". Refusing to validate with an incomplete suite.")


def get_suite(context: Any, name: str) -> gx.ExpectationSuite:
    """``context.suites.get(name)``, but raise instead of silently dropping expectations.

    Compares the loaded suite with the raw JSON in the context's expectations
    store, then with its manifest.

    Raises
    ------
    SuiteIntegrityError
        When the loaded suite has fewer expectations of some type than stored.
    """
    suite = context.suites.get(name)
    store = context.expectations_store
    raw = store.get(store.get_key(name=name, id=None))
    if isinstance(raw, str):
        raw = json.loads(raw)
    stored = Counter((e.get("type") or e.get("expectation_type")) for e in (raw or {}).get("expectations") or [])
    missing = stored - _types(suite)
    if missing:
        raise SuiteIntegrityError(_missing_message(name, missing, "the stored JSON"), missing)
    return verify_suite(suite)


def expectation_parameters(suite: gx.ExpectationSuite, **overrides: Any) -> dict[str, Any]:
    """The suite's stored ``suite_parameters`` (starting values) updated with ``overrides``.

    GX does not apply ``ExpectationSuite.suite_parameters`` at validation time
    (an unresolved ``{"$PARAMETER": ...}`` raises ``SuiteParameterError``);
    pass this dict as ``expectation_parameters`` to ``checkpoint.run`` /
    ``validation_definition.run``.

    Examples
    --------
    >>> from labelgate.gx import expectation_parameters, load_suite
    >>> expectation_parameters(load_suite("crowd_vs_trusted"), min_cross_kappa=0.3)["min_cross_kappa"]
    0.3
    """
    return {**dict(suite.suite_parameters or {}), **overrides}


def verify_checkpoint(checkpoint: Any) -> Any:
    """Run :func:`verify_suite` on every validation definition's suite of a checkpoint; return it."""
    for vd in checkpoint.validation_definitions:
        verify_suite(vd.suite)
    return checkpoint


__all__ = ["EXPECTATION_CLASSES", "LABELGATE_EXPECTATION_TYPES", "SHORT_NAMES", "SuiteIntegrityError",
           "check_registered", "expectation_parameters", "get_suite", "load_suite", "suite_from_config",
           "suite_from_dict", "suites_dir", "verify_checkpoint", "verify_suite"]
