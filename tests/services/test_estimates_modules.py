"""services/estimates.py split by purpose: specs, JSON shaping, cached lookup, the service."""

from __future__ import annotations

import math

import numpy as np

from service.services import analysis_specs, answer_json, estimates, target_lookup


def test_public_names_still_import_from_estimates() -> None:
    assert estimates.AnalysisTarget is analysis_specs.AnalysisTarget
    assert estimates.EstimateSpec is analysis_specs.EstimateSpec
    assert estimates.IntensitySpec is analysis_specs.IntensitySpec
    assert estimates.CatalogLookup is target_lookup.CatalogLookup
    assert estimates.Loaded is target_lookup.Loaded
    assert estimates.finite_or_none is answer_json.finite_or_none
    assert estimates.json_floats is answer_json.json_floats


def test_json_numbers_replace_non_finite_values_with_none() -> None:
    assert answer_json.finite_or_none(math.inf) is None
    assert answer_json.finite_or_none(float("nan")) is None
    assert answer_json.finite_or_none(None) is None
    assert answer_json.finite_or_none(np.float32(2.5)) == 2.5
    assert answer_json.json_floats([[1.0, math.inf], [float("nan"), -3.0]]) == [
        [1.0, None],
        [None, -3.0],
    ]
    assert answer_json.json_floats(np.arange(3)) == [0.0, 1.0, 2.0]


def test_specs_differing_only_in_batch_sizes_share_a_group_key() -> None:
    target = analysis_specs.AnalysisTarget(model="m", accelerator="a")
    one = analysis_specs.EstimateSpec(target, 1024, 128, (1, 2))
    other = analysis_specs.EstimateSpec(target, 1024, 128, (64,))
    longer = analysis_specs.EstimateSpec(target, 2048, 128, (1, 2))
    assert one.group_key == other.group_key != longer.group_key
