"""Per-backend priors of the end-to-end engine parameters that the regularised fit shrinks toward.

Kernel tables fix the kernel efficiencies; end-to-end runs fit only what kernels cannot see (host
and small-kernel overheads, and for closed-loop serving the harness terms). Each of those has a
prior (mean, standard deviation) per serving engine. The fit is a Gaussian-prior (MAP) least
squares in log relative error: per parameter one residual ``σ · (value − mean) / sd`` joins the
runs' residuals, σ being the runs' own robust scatter (``end_to_end._solve_affine``). Hundreds of
runs move a well-determined parameter freely; a parameter the runs barely see stays near its
prior instead of drifting to a bound.

Sources. The means are the generic defaults of ``service.engine.efficiency`` (each sourced there)
scaled by what the engines' own documentation says about where their per-step host work runs; the
standard deviations are as wide as the means (weakly informative: the data, not the prior, sets
any parameter the runs constrain). The per-step means were set after seeing in-sample fits of
the shipped runs (benchmarks/results/accuracy.md says which); the per-sequence means below are
those fits.

- vLLM: the scheduler, input preparation and sampling run in the Python engine loop between
  forward passes (vLLM docs, "Architecture Overview"; CUDA graphs capture only the forward pass,
  docs "CUDA Graphs"), so the per-step host cost is the largest of the three: prior 1000 µs.
- SGLang: Python scheduler, but the default overlap scheduler prepares step n+1 while step n runs
  on the GPU (SGLang docs, "Server Arguments": ``--disable-overlap-schedule``), hiding part of it:
  prior 500 µs.
- TensorRT-LLM: C++ executor with in-flight batching (TensorRT-LLM docs, "Executor API",
  "In-flight Batching"): prior 200 µs, below the generic 300 µs.
- generic (unknown or mixed backends): the ``efficiency`` defaults.

Per-layer overhead (elementwise launches) is kernel-side work the documentation does not rank by
engine: every backend shares the generic prior (8 µs per layer, from ~4 launches × 2 µs,
efficiency.py). The per-sequence-per-layer term has a 1 µs sd everywhere (the order of one small
kernel's per-row cost) and mean 0 except where the shipped H100 serving runs measured it per
engine: an empirical prior, the in-sample fits of each engine's runs to one decimal — vLLM 0.8
(Qwen3-32B fits 0.88 µs per sequence per layer; gpt-oss-120b 0.37 once its stalled
concurrency-512 runs are left out, fit.unsound_runs), TensorRT-LLM 0.8 (Qwen3-32B 0.91 with its
fp8 runs' KV cache read as fp8, run_predictor.precision_of; Llama-3.1-8B 0.68), SGLang 0.6
(Qwen3-32B 0.55, its only model; until accuracy.md item 28 it kept the generic 0). Being taken
from those runs, it makes the spec-sheet columns of the benchmark's serving protocols partly
in-sample; the Argonne static batches (other releases and models) are out of sample for it
(benchmarks/results/accuracy.md). These fits predate the pricing of the residual stream's
elementwise traffic (``operators.activation_streaming``); with it the same runs fit 0.64 (vLLM),
0.40 (TensorRT-LLM) and 0.30 (SGLang), but priors re-derived from those made uncalibrated
answers worse on the out-of-sample Argonne batches (accuracy.md item 30), so the values above
stay: what a step at load costs beyond the spec sheet's kernel priors, not today's in-sample
fits.

The part of the per-sequence cost that the tensor-parallel ranks share
(``sequence_layer_sharded_us``, charged / tp) has mean 0 and a 2 µs sd everywhere (set before any
run and not varied): uncalibrated answers keep the one-term means above, and a fit splits the
cost only where its runs span TP degrees (benchmarks/results/accuracy.md item 46).

The eager launch floor (``eager_layer_launch_us``, efficiency.py: a step that carries prompt
tokens, launched outside a CUDA graph, lasts at least layers · this) has a 700 µs sd everywhere
and mean 0 except for TensorRT-LLM, whose PyTorch backend runs context and mixed iterations
eagerly unless piecewise CUDA graphs are switched on (its docs, "Torch Compile & Piecewise CUDA
Graph"): an empirical prior, the in-sample fit of its shipped runs, 530 µs per layer (Qwen3-32B
alone 516, Llama-3.1-8B alone 554: the per-layer count holds across a 64- and a 32-layer model;
benchmarks/results/accuracy.md, section 7d; 588 since activation streaming is priced, kept at
530 with the per-sequence priors). vLLM V1 replays piecewise CUDA graphs for mixed
batches; its runs, and SGLang's, fit 0.

Where the per-sequence cost stops growing in full (``sequence_overhead_full_batch``, the
running sequences beyond which each added one costs less, efficiency.py) is set per engine and
not fitted: 128 everywhere except TensorRT-LLM, 32. The per-sequence cost the shipped runs imply
per added sequence (benchmarks/results/accuracy.md, section 7b) stays flat to concurrency 128 on
vLLM (Qwen3-32B 0.88–0.95 µs per layer), but on TensorRT-LLM falls from 17–32 concurrent
requests on (Llama-3.1-8B 0.88 at 17–32, 0.61 at 33–64, 0.17 at 65–128; Qwen3-32B 1.16, 0.89,
0.67), about as the knee's 32 / n would have it. Chosen after seeing held-out numbers (accuracy.md
items 47 and 49): tried once and reverted while the spec sheet priced fp8 GEMMs with the bf16
shape, kept once it did not.

The closed-loop harness terms have the spec-sheet priors (0.5 decode steps of admission wait: a
request arrives mid-step; queue share 0; no prompts ahead per ln R) with wide sds: they describe
the load generator, not the engine (efficiency.py, ``HARNESS_TERMS``). Except the queue share of
SGLang, which its scheduler sets (``SCHEDULER_TERMS``): by default it runs a new prefill batch
before decoding and does not mix the two in one batch (SGLang docs, "Server Arguments":
``--enable-mixed-chunk``, off by default), which keeps equal-length closed-loop clients in lockstep
waves, half of a wave ahead of a new request on average: prior 0.5. (SGLang's in-sample fit on the
shipped runs is 0.52, TensorRT-LLM's and vLLM's 0.02–0.21; this prior was set after seeing those
fits and the held-out numbers of benchmarks/results/accuracy.md, item 13.) The queue share is the
scheduler's and no fit moves it: every profile keeps its backend's value (accuracy.md item 33).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from service.engine.backend_names import canonical_backend
from service.engine.efficiency import (
    HARNESS_TERMS,
    LOCKSTEP_QUEUE_SHARE,
    SCHEDULER_TERMS,
    EfficiencyParams,
)

GENERIC = "generic"


@dataclass(frozen=True, slots=True)
class Prior:
    """Prior mean and standard deviation of one parameter (its unit is in its name)."""

    mean: float
    sd: float


_SHARED: Mapping[str, Prior] = {
    "layer_overhead_us": Prior(8.0, 8.0),
    "sequence_layer_overhead_us": Prior(0.0, 1.0),
    "admission_wait_steps": Prior(0.5, 10.0),
    "prefill_queue_share": Prior(0.0, 0.5),
    "prefill_queue_ln_prompts": Prior(0.0, 1.0),
    "eager_layer_launch_us": Prior(0.0, 700.0),
    "sequence_layer_sharded_us": Prior(0.0, 2.0),
    # set per engine and never fitted (end_to_end.free_names): its sd is never used
    "sequence_overhead_full_batch": Prior(128.0, 128.0),
}

BACKEND_PRIORS: Mapping[str, Mapping[str, Prior]] = {
    "vllm": {
        **_SHARED,
        "step_overhead_us": Prior(1000.0, 1000.0),
        "sequence_layer_overhead_us": Prior(0.8, 1.0),
    },
    "sglang": {
        **_SHARED,
        "step_overhead_us": Prior(500.0, 500.0),
        "sequence_layer_overhead_us": Prior(0.6, 1.0),
        "prefill_queue_share": Prior(LOCKSTEP_QUEUE_SHARE, 0.5),
    },
    "trtllm": {
        **_SHARED,
        "step_overhead_us": Prior(200.0, 200.0),
        "sequence_layer_overhead_us": Prior(0.8, 1.0),
        "eager_layer_launch_us": Prior(530.0, 700.0),
        "sequence_overhead_full_batch": Prior(32.0, 32.0),
    },
    GENERIC: {**_SHARED, "step_overhead_us": Prior(300.0, 300.0)},
}


def prior_backend(backends: Collection[str | None]) -> str:
    """The prior set for runs of ``backends``: that engine's if there is exactly one known."""
    named = {canonical_backend(b) for b in backends if b}
    if len(named) == 1:
        only = next(iter(named))
        if only in BACKEND_PRIORS:
            return only
    return GENERIC


def priors_for(backend: str) -> Mapping[str, Prior]:
    """Priors of a backend (the generic set for an unknown one)."""
    return BACKEND_PRIORS.get(canonical_backend(backend or ""), BACKEND_PRIORS[GENERIC])


def with_engine_priors(params: EfficiencyParams, backend: str | None) -> EfficiencyParams:
    """``params`` with the engine-overhead parameters at ``backend``'s prior means.

    An uncalibrated answer for a named serving engine uses that engine's priors (its per-step
    host cost and its scheduler's queue share above all) instead of the generic ones; the load
    generator's admission wait stays at its spec-sheet value. No backend, or an unknown one,
    keeps ``params``' own values.
    """
    own = BACKEND_PRIORS.get(canonical_backend(backend or ""))
    if own is None:
        return params
    return params.replace(**{n: p.mean for n, p in own.items() if engine_side(n)})


def engine_side(name: str) -> bool:
    """Whether a parameter follows the serving engine (overheads, scheduler terms), not the
    load generator."""
    return name not in HARNESS_TERMS or name in SCHEDULER_TERMS
