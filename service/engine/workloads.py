"""Workload presets: request lengths, latency targets and the planning defaults of each use case.

Every figure below is a planning assumption derived from what the use case needs (a reader, an
editor, a batch job), not a measurement; a plan request overrides any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from service.engine.errors import EngineError

OBJECTIVES = (
    "max_throughput_per_gpu",
    "min_cost_per_million_tokens",
    "min_gpus_for_rate",
    "max_concurrency_under_slo",
)
PLAN_MODES = ("serving", "static")


@dataclass(frozen=True, slots=True)
class Workload:
    """A named request shape with latency targets (None: no target) and planning defaults."""

    id: str
    input_tokens: int
    output_tokens: int
    ttft_ms_max: float | None
    tpot_ms_max: float | None
    objective: str
    mode: str
    description: str
    rationale: str

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
)

WORKLOADS: Mapping[str, Workload] = {w.id: w for w in _PRESETS}


def get_workload(workload_id: str) -> Workload:
    """Return a preset by id; KeyError names the known ids."""
    try:
        return WORKLOADS[workload_id]
    except KeyError:
        raise KeyError(f"unknown workload {workload_id!r}; known: {', '.join(WORKLOADS)}") from None
