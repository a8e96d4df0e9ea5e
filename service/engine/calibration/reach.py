"""A fitted parameter applies as far as its evidence reaches, then falls back toward its prior.

Most end-to-end parameters are tied to a count the engine scales them by (per layer, per
sequence per layer), so a model with other counts uses them the way the physics says. The per-
step host overhead is not: it is one number per step whose size depends on how many GPU workers
the engine coordinates (on the shipped vLLM and SGLang runs it grows with the TP degree). Outside
the GPU counts the profile was fitted on, it moves from the fitted value back toward its backend
prior by half per doubling outside the fitted range:

    value = prior + 2^(−d) · (fitted − prior),   d = log2 distance outside [low, high] (0 inside).

The halving per doubling is a chosen rate (not fitted); a request inside the range keeps the
fitted value exactly.

Engine overheads are properties of one serving engine: for a request naming a backend the
profile was not fitted on, every one of them takes that backend's prior (``priors.py``), fitted
or not, instead of values fitted on, or left at the priors of, other engines. Likewise they are
properties of one way of running it: a static batch loop and continuous batching schedule,
sample and launch differently, so a request in a mode (static, serving) the profile has no runs
of takes the priors for them. The kernel efficiencies, fitted on kernel tables, apply in every
mode. (On the shipped runs, a profile of static batches predicting serving TPOT went from 17.2%
to 5.0% MdAPE with this rule, and the reverse stayed at 17.5–17.6%; moving them halfway instead
gave 10.5%: benchmarks/results/accuracy.md, item 9 of its narrative.) The closed-loop admission
wait describes the load generator, not the engine, and is kept; the queue share, which the
engine's scheduler sets, follows the backend.

The per-sequence cost (``sequence_layer_overhead_us`` and its TP-shared part
``sequence_layer_sharded_us``) is bound to the kinds of model fitted
(dense, MoE, MLA: ``domain.model_kind``): besides host work per sequence it carries whatever per-
token work the kernel model prices differently for that architecture (how many distinct experts
a batch routes to, above all). On the shipped runs it fits 0.54–0.91 µs per sequence per layer
on four dense data sets and 0.38 on the one MoE set, gpt-oss-120b. A request for a model of a
kind the profile has no runs of takes its prior instead. (Chosen after seeing section 7 of
benchmarks/results/accuracy.md, where Qwen3-32B predicted from gpt-oss-120b was the one
calibrated group worse than the spec sheet; narrative item 26 there gives the effects.)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from service.engine.calibration.domain import Domain, doublings_outside
from service.engine.calibration.priors import Prior, engine_side, priors_for
from service.engine.efficiency import EfficiencyParams

# parameter → the domain dimension its evidence is bounded by
REACH: Mapping[str, str] = {"step_overhead_us": "gpus"}
# parameters whose evidence holds only for the kinds of model fitted (dense, MoE, MLA)
MODEL_KIND_BOUND = ("sequence_layer_overhead_us", "sequence_layer_sharded_us")
HALF_PER_DOUBLING = 0.5


def within_reach(
    params: EfficiencyParams,
    priors: Mapping[str, Prior],
    domain: Domain | None,
    *,
    gpus: float,
    backend: str | None = None,
    mode: str | None = None,
    model_kind: str | None = None,
) -> EfficiencyParams:
    """``params`` with each range-bound parameter moved toward its prior outside its evidence."""
    if domain is None or domain.empty:
        return params
    if backend and domain.backends and backend not in domain.backends:
        own = priors_for(backend)
        # every engine term, fitted or not (the terms each backend sets, and those the
        # profile's runs could not fit, such as a static profile's eager launch floor)
        engine = [n for n in own if engine_side(n)]
        return params.replace(**{name: own[name].mean for name in engine})
    if mode and domain.modes and mode not in domain.modes:
        engine = [n for n in priors if engine_side(n)]
        params = params.replace(**{name: priors[name].mean for name in engine})
    if model_kind and domain.models and model_kind not in {m.kind for m in domain.models}:
        bound = {n: priors[n].mean for n in MODEL_KIND_BOUND if n in priors}
        params = params.replace(**bound) if bound else params
    features = {"gpus": gpus}
    changes: dict[str, float] = {}
    for name, dimension in REACH.items():
        prior = priors.get(name)
        if prior is None:
            continue
        far = float(doublings_outside(domain, dimension, features[dimension]))
        if far <= 0.0:
            continue
        weight = float(np.power(HALF_PER_DOUBLING, far))
        fitted = float(getattr(params, name))
        changes[name] = prior.mean + weight * (fitted - prior.mean)
    return params.replace(**changes) if changes else params
