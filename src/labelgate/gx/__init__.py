"""Great Expectations expectations for agreement gates.

Importing this package (``import labelgate.gx``) registers with GX the
table metrics of :mod:`labelgate.gx._metrics` and the expectations

==========================================  ============================================
GX type                                      success when
==========================================  ============================================
``expect_irr_at_or_above_trusted_baseline``  IRR(crowd) ≥ IRR(trusted) − tolerance (or ratio)
``expect_normalized_cross_kappa_to_be_at_least``  normalized κx(crowd, trusted) ≥ min_value
``expect_cross_kappa_to_be_at_least``       κx(crowd, trusted) ≥ min_value
``expect_labeler_icc_below_item_icc``        labeler ICC < item ICC − margin (crowd pool)
``expect_spa_to_be_between``                 min_value ≤ SPA(crowd) ≤ max_value
==========================================  ============================================

Suites live as JSON in the repository's ``expectations/`` folder; load them
with :func:`load_suite` (which raises on an unregistered or invalid
expectation instead of dropping it, as GX does) and build one from a config
dict with :func:`suite_from_config`. See ``docs/expectations.md``.
"""

from labelgate.gx import _metrics as _metrics  # registers the metric providers
from labelgate.gx._base import Check, LabelGateExpectation, judge, raised_exception
from labelgate.gx.expect_cross_kappa_to_be_at_least import ExpectCrossKappaToBeAtLeast
from labelgate.gx.expect_irr_at_or_above_trusted_baseline import ExpectIrrAtOrAboveTrustedBaseline
from labelgate.gx.expect_labeler_icc_below_item_icc import ExpectLabelerIccBelowItemIcc
from labelgate.gx.expect_normalized_cross_kappa_to_be_at_least import (
    ExpectNormalizedCrossKappaToBeAtLeast,
)
from labelgate.gx.expect_spa_to_be_between import ExpectSpaToBeBetween
from labelgate.gx.suites import (
    EXPECTATION_CLASSES,
    LABELGATE_EXPECTATION_TYPES,
    SuiteIntegrityError,
    check_registered,
    expectation_parameters,
    get_suite,
    load_suite,
    suite_from_config,
    suite_from_dict,
    suites_dir,
    verify_checkpoint,
    verify_suite,
)

__all__ = [
    "EXPECTATION_CLASSES",
    "LABELGATE_EXPECTATION_TYPES",
    "Check",
    "ExpectCrossKappaToBeAtLeast",
    "ExpectIrrAtOrAboveTrustedBaseline",
    "ExpectLabelerIccBelowItemIcc",
    "ExpectNormalizedCrossKappaToBeAtLeast",
    "ExpectSpaToBeBetween",
    "LabelGateExpectation",
    "SuiteIntegrityError",
    "check_registered",
    "expectation_parameters",
    "get_suite",
    "judge",
    "load_suite",
    "raised_exception",
    "suite_from_config",
    "suite_from_dict",
    "suites_dir",
    "verify_checkpoint",
    "verify_suite",
]
