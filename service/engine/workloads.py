"""Workload presets: request lengths, latency targets and the planning defaults of each use case.

The first six presets' figures are planning assumptions derived from what the use case needs (a
reader, an editor, a batch job), not measurements. The ``azure-*-2023`` presets carry length
distributions with a source: percentiles of a published production trace (``LengthStats``). A
plan request overrides any preset figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.engine.errors import EngineError
from service.engine.traffic.lengths import LengthDistribution

OBJECTIVES = (
    "max_throughput_per_gpu",
    "min_cost_per_million_tokens",
    "min_gpus_for_rate",
    "max_concurrency_under_slo",
)
PLAN_MODES = ("serving", "static")


@dataclass(frozen=True, slots=True)
class LengthStats:
    """A length distribution as its source states it: token counts at percentile levels, the
    smallest and largest length, and the source's mean.

    As a traffic length (``distribution``) it is the piecewise-linear quantile function through
    (0, min), each (level, tokens) and (1, max), docs/traffic.md; its mean (``mean``) is that
    function's integral, which differs a little from ``source_mean`` (the trace's own mean).
    """

    percentiles: tuple[tuple[float, int], ...]  # (level in (0, 1), tokens), increasing
    minimum: int
    maximum: int
    source_mean: float

    def distribution(self) -> LengthDistribution:
        return LengthDistribution.from_percentiles(
            dict(self.percentiles), minimum=float(self.minimum), maximum=float(self.maximum)
        )

    @property
    def mean(self) -> float:
        return self.distribution().mean


@dataclass(frozen=True, slots=True)
class Workload:
    """A named request shape with latency targets (None: no target) and planning defaults.

    ``input_lengths`` and ``output_lengths``, where a public source gives them, are the
    preset's length distributions (``source`` says where they come from); ``input_tokens`` and
    ``output_tokens`` are then the source's means, rounded.
    """

    id: str
    input_tokens: int
    output_tokens: int
    ttft_ms_max: float | None
    tpot_ms_max: float | None
    objective: str
    mode: str
    description: str
    rationale: str
    input_lengths: LengthStats | None = None
    output_lengths: LengthStats | None = None
    source: str | None = None

    def validate(self) -> None:
        """Raise EngineError when a length, target, objective or mode is out of range."""
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise EngineError(f"workload {self.id}: token counts must be at least 1")
        for name, value in (("ttft_ms_max", self.ttft_ms_max), ("tpot_ms_max", self.tpot_ms_max)):
            if value is not None and not value > 0:
                raise EngineError(f"workload {self.id}: {name} must be positive")
        if self.objective not in OBJECTIVES:
            raise EngineError(f"workload {self.id}: unknown objective {self.objective!r}")
        if self.mode not in PLAN_MODES:
            raise EngineError(f"workload {self.id}: unknown mode {self.mode!r}")
        for stats in (self.input_lengths, self.output_lengths):
            if stats is not None:
                stats.distribution()  # raises LengthError (an EngineError) when inconsistent
        if (self.input_lengths or self.output_lengths) and not self.source:
            raise EngineError(f"workload {self.id}: length distributions need a source")


# Azure LLM inference trace 2023 (Patel et al., "Splitwise: efficient generative LLM inference
# using phase splitting", ISCA 2024): token counts of every request in a one-hour sample of two
# Azure production services, published as AzureLLMInferenceTrace_conv.csv (19,366 requests) and
# AzureLLMInferenceTrace_code.csv (8,819 requests) at
# https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2023.md
# (data/ at commit b469a11). The numbers below are computed from those files, not read off a
# plot: numpy.percentile (linear) of ContextTokens and GeneratedTokens, rounded to whole tokens,
# with the exact min, max and mean (the traces hold each request's counts, so nothing is read
# off a plot). The notebook there (analysis/AzureLLMInferenceDataset2023.ipynb) draws the
# paper's CDFs of these columns.
AZURE_2023_SOURCE = (
    "Azure LLM inference trace 2023 (Splitwise, ISCA 2024): percentiles computed from "
    "AzureLLMInferenceTrace_{trace}.csv, "
    "https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2023.md"
)
_LEVELS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999)


def _stats(tokens: tuple[int, ...], minimum: int, maximum: int, mean: float) -> LengthStats:
    return LengthStats(tuple(zip(_LEVELS, tokens, strict=True)), minimum, maximum, mean)


AZURE_CONVERSATION_INPUT = _stats(
    (29, 181, 207, 387, 403, 703, 1020, 1071, 1130, 1315, 2734, 4083, 4098, 4142, 4831, 6179),
    minimum=2,
    maximum=14050,
    mean=1154.7,
)
AZURE_CONVERSATION_OUTPUT = _stats(
    (16, 41, 54, 77, 91, 103, 129, 177, 384, 400, 424, 451, 540, 601, 643, 954),
    minimum=7,
    maximum=1000,
    mean=211.1,
)
AZURE_CODE_INPUT = _stats(
    (17, 75, 147, 386, 770, 1075, 1469, 1909, 2433, 3192, 5188, 7303, 7436, 7436, 7436, 7437),
    minimum=3,
    maximum=7437,
    mean=2047.8,
)
AZURE_CODE_OUTPUT = _stats(
    (6, 6, 7, 8, 9, 11, 13, 16, 20, 29, 55, 90, 171, 251, 359, 825),
    minimum=6,
    maximum=1899,
    mean=27.9,
)


_PRESETS = (
    Workload(
        id="chat",
        input_tokens=2048,
        output_tokens=256,
        ttft_ms_max=1000.0,
        tpot_ms_max=50.0,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Interactive assistant: multi-turn prompt, a few paragraphs of reply.",
        rationale=(
            "The prompt carries a system prompt and several turns of history (~2k tokens); a "
            "reply is a few paragraphs (~256 tokens). A person notices a pause before the reply "
            "starts beyond about a second (TTFT 1 s), and 50 ms per token (20 tokens/s) streams "
            "text faster than anyone reads it."
        ),
    ),
    Workload(
        id="code-completion",
        input_tokens=1536,
        output_tokens=64,
        ttft_ms_max=200.0,
        tpot_ms_max=20.0,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Editor inline completion: file context in, a line or short block out.",
        rationale=(
            "The editor sends the code around the cursor (~1.5k tokens) and shows a line or a "
            "short block (~64 tokens). A suggestion is only useful if it appears between "
            "keystrokes, so the first token must come within ~200 ms, and the whole block within "
            "about 1.5 s (20 ms per token)."
        ),
    ),
    Workload(
        id="offline-batch",
        input_tokens=1024,
        output_tokens=512,
        ttft_ms_max=None,
        tpot_ms_max=None,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Overnight labelling or summarisation: no one waits, dollars per token count.",
        rationale=(
            "A queue of documents (~1k tokens) each produces a label or summary (~512 tokens). "
            "Nobody watches individual requests, so there is no latency target; a continuously "
            "batched server keeps every slot busy while the queue lasts, and the cheapest "
            "tokens win."
        ),
    ),
    Workload(
        id="evaluation",
        input_tokens=1024,
        output_tokens=16,
        ttft_ms_max=None,
        tpot_ms_max=None,
        objective="max_throughput_per_gpu",
        mode="serving",
        description="Benchmark scoring: few-shot prompts, a choice or short answer each.",
        rationale=(
            "An evaluation suite sends few-shot prompts (~1k tokens) and reads a letter, a number "
            "or a short phrase (~16 tokens). The run is judged by how soon the whole suite "
            "finishes, so prefill throughput dominates and there is no per-request target."
        ),
    ),
    Workload(
        id="test-time-compute",
        input_tokens=1024,
        output_tokens=8192,
        ttft_ms_max=2000.0,
        tpot_ms_max=25.0,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Reasoning model answering a question after a long chain of thought.",
        rationale=(
            "A question (~1k tokens) is answered after thousands of reasoning tokens (~8k). The "
            "user waits for the end of the reasoning, so time per token sets the wait: 25 ms per "
            "token (40 tokens/s) keeps 8k tokens near 3.5 minutes; a 2 s start is unnoticed "
            "next to that."
        ),
    ),
    Workload(
        id="rl-rollout",
        input_tokens=512,
        output_tokens=4096,
        ttft_ms_max=None,
        tpot_ms_max=None,
        objective="max_throughput_per_gpu",
        mode="static",
        description="Reinforcement-learning rollouts: big batches of long generations per step.",
        rationale=(
            "Each training step samples a batch of task prompts (~512 tokens) and generates long "
            "attempts (~4k tokens) that all must finish before the policy update, which is a "
            "static batch launched together. Only the step's total time matters, so the "
            "objective is tokens per GPU with no per-request latency target."
        ),
    ),
    Workload(
        id="azure-conversation-2023",
        input_tokens=1155,
        output_tokens=211,
        ttft_ms_max=1000.0,
        tpot_ms_max=50.0,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Production chat service: Azure's 2023 conversation trace, lengths as sampled.",
        rationale=(
            "Prompt and output lengths follow the percentiles of a production conversation "
            "service (Azure LLM inference trace 2023): a median prompt of 1,020 tokens with a "
            "tail to 14,050, a median reply of 129 tokens (a second mode near 400). The fixed "
            "lengths are the trace's means; the targets are the chat preset's."
        ),
        input_lengths=AZURE_CONVERSATION_INPUT,
        output_lengths=AZURE_CONVERSATION_OUTPUT,
        source=AZURE_2023_SOURCE.format(trace="conv"),
    ),
    Workload(
        id="azure-code-2023",
        input_tokens=2048,
        output_tokens=28,
        ttft_ms_max=200.0,
        tpot_ms_max=20.0,
        objective="min_cost_per_million_tokens",
        mode="serving",
        description="Production coding assistant: Azure's 2023 code trace, lengths as sampled.",
        rationale=(
            "Prompt and output lengths follow the percentiles of a production coding service "
            "(Azure LLM inference trace 2023): long file context (median 1,469 tokens, p95 "
            "7,303) and short completions (median 13 tokens, p99 251). The fixed lengths are "
            "the trace's means; the targets are the code-completion preset's."
        ),
        input_lengths=AZURE_CODE_INPUT,
        output_lengths=AZURE_CODE_OUTPUT,
        source=AZURE_2023_SOURCE.format(trace="code"),
    ),
)

WORKLOADS: Mapping[str, Workload] = {w.id: w for w in _PRESETS}


LENGTH_PRESETS: Mapping[str, Workload] = {
    w.id: w for w in _PRESETS if w.input_lengths is not None and w.output_lengths is not None
}


def preset_lengths(workload_id: str, part: str) -> LengthDistribution:
    """Return a preset's ``input`` or ``output`` length distribution; KeyError names the
    presets that have one."""
    workload = LENGTH_PRESETS.get(workload_id)
    if workload is None:
        raise KeyError(f"unknown length preset {workload_id!r}; known: {', '.join(LENGTH_PRESETS)}")
    stats = workload.input_lengths if part == "input" else workload.output_lengths
    assert stats is not None
    return stats.distribution()


def get_workload(workload_id: str) -> Workload:
    """Return a preset by id; KeyError names the known ids."""
    try:
        return WORKLOADS[workload_id]
    except KeyError:
        raise KeyError(f"unknown workload {workload_id!r}; known: {', '.join(WORKLOADS)}") from None
