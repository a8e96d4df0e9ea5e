"""Workload presets with length distributions from a cited trace (engine.workloads)."""

from __future__ import annotations

import numpy as np
import pytest

from service.engine.workloads import (
    AZURE_CODE_OUTPUT,
    LENGTH_PRESETS,
    WORKLOADS,
    preset_lengths,
)


def test_the_code_trace_output_mean_is_the_trapezoid_sum() -> None:
    """Knots (0, 6), (0.01, 6), (0.05, 6), (0.1, 7), (0.2, 8), (0.3, 9), (0.4, 11), (0.5, 13),
    (0.6, 16), (0.7, 20), (0.8, 29), (0.9, 55), (0.95, 90), (0.98, 171), (0.99, 251),
    (0.995, 359), (0.999, 825), (1, 1899); mean = Σ Δp · (t_i + t_i+1) / 2 =
    0.06 + 0.24 + 0.325 + 0.75 + 0.85 + 1.0 + 1.2 + 1.45 + 1.8 + 2.45 + 4.2 + 3.625 + 3.915
    + 2.11 + 1.525 + 2.368 + 1.362 = 29.23 tokens (the trace's own mean is 27.9)."""
    assert AZURE_CODE_OUTPUT.mean == pytest.approx(29.23)
    assert AZURE_CODE_OUTPUT.source_mean == 27.9


@pytest.mark.parametrize("preset", sorted(LENGTH_PRESETS))
@pytest.mark.parametrize("part", ["input", "output"])
def test_sampled_mean_matches_the_documented_mean(preset: str, part: str) -> None:
    """200,000 inverse-transform samples (whole tokens) average within 2% of the distribution's
    mean, the figure GET /v1/workloads reports."""
    workload = LENGTH_PRESETS[preset]
    stats = workload.input_lengths if part == "input" else workload.output_lengths
    assert stats is not None
    samples = preset_lengths(preset, part).quantile(np.random.default_rng(7).random(200_000))
    assert float(samples.mean()) == pytest.approx(stats.mean, rel=0.02)
    assert samples.min() >= stats.minimum and samples.max() <= stats.maximum


def test_percentiles_are_those_of_the_trace() -> None:
    """Medians of AzureLLMInferenceTrace_conv.csv: 1,020 prompt and 129 output tokens; the
    fixed lengths are the trace means rounded (1,154.7 → 1,155; 211.1 → 211)."""
    conversation = WORKLOADS["azure-conversation-2023"]
    assert conversation.input_lengths is not None and conversation.output_lengths is not None
    assert dict(conversation.input_lengths.percentiles)[0.5] == 1020
    assert dict(conversation.output_lengths.percentiles)[0.5] == 129
    assert (conversation.input_tokens, conversation.output_tokens) == (1155, 211)
    assert conversation.source is not None and "AzurePublicDataset" in conversation.source
    dist = preset_lengths("azure-conversation-2023", "input")
    assert float(dist.quantile(np.array([0.5]))[0]) == 1020.0


def test_every_preset_is_valid_and_only_sourced_ones_have_lengths() -> None:
    for workload in WORKLOADS.values():
        workload.validate()
        assert (workload.input_lengths is not None) == (workload.source is not None)
    assert set(LENGTH_PRESETS) == {"azure-conversation-2023", "azure-code-2023"}


def test_an_unknown_or_lengthless_preset_is_refused() -> None:
    with pytest.raises(KeyError, match="azure-conversation-2023"):
        preset_lengths("chat", "input")
