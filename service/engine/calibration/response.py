"""Exact response of run predictions to the end-to-end parameters, built from a few engine passes.

With the kernel efficiencies fixed, the engine's step times are affine in the host overheads ``x``
(per layer, per step, per sequence: ``operators.step_cost`` adds them to every step), and serving
TTFT and TPOT add the queue terms ``q`` (admission wait, prompts ahead per ln R: which of the other
prompts run before the first token and which during decoding) multiplied by step times and
step-time differences, so every prediction is bilinear:

    p(x, q) = b + D_x·(x − x₀) + (q − q₀)·(D_q + C·(x − x₀))

``build`` evaluates the engine at x₀, q₀ and at one step along each parameter and each
(x, q) pair (1 + n_x + n_q + n_x·n_q passes; the q passes only for serving runs), and the
differences give b, D_x, D_q and C exactly. Fitting and every cross-validation fold then run on
arrays. ``max_log_error`` checks the form against an engine pass at any point.

One linear parameter is affine only piecewise: the eager launch floor (``serving.py``) binds in a
run's steps that carry a prompt or it does not, so predictions bend where layers ·
``eager_layer_launch_us`` meets those steps' kernel time. Likewise the prompts ahead of a new
request are capped at the R − 1 others (``serving.py``; the cap binds only when the queue share and
the ln-R term together pass 1). The response is exact while no run crosses a bend; a fit that moves
past one is re-centred and rebuilt (``end_to_end.ROUNDS``), as for any point the response does not
describe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from service.engine.calibration.run_predictor import RunPredictor
from service.engine.efficiency import EfficiencyParams

# Design steps in each parameter's unit: large enough to sit far above rounding, any value works
# because the response is exactly linear in each.
STEPS: Mapping[str, float] = {
    "layer_overhead_us": 10.0,
    "step_overhead_us": 100.0,
    "sequence_overhead_us": 10.0,
    "sequence_layer_overhead_us": 0.5,
    "sequence_layer_sharded_us": 1.0,
    "eager_layer_launch_us": 10.0,
    "admission_wait_steps": 1.0,
    "prefill_queue_ln_prompts": 0.5,
}


@dataclass(frozen=True)
class Response:
    """Bilinear predictions of every target of a RunPredictor around a centre point."""

    linear_names: tuple[str, ...]
    queue_names: tuple[str, ...]
    x0: NDArray[np.float64]
    q0: NDArray[np.float64]
    base: NDArray[np.float64]  # (targets,)
    d_x: NDArray[np.float64]  # (targets, n_x)
    d_q: NDArray[np.float64]  # (targets, n_q)
    cross: NDArray[np.float64]  # (targets, n_q, n_x)

    def split(self, values: Mapping[str, float]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The (x, q) vectors of ``values``."""
        x = np.array([values[n] for n in self.linear_names], dtype=float)
        q = np.array([values[n] for n in self.queue_names], dtype=float)
        return x, q

    def predict(
        self, x: NDArray[np.float64], q: NDArray[np.float64], rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float64]:
        """Predicted target values at (x, q), for ``rows`` (default: every target)."""
        sel = slice(None) if rows is None else rows
        dx, dq = x - self.x0, q - self.q0
        queue = self.d_q[sel] + self.cross[sel] @ dx
        return np.asarray(self.base[sel] + self.d_x[sel] @ dx + queue @ dq, dtype=np.float64)

    def affine_in_x(
        self, q: NDArray[np.float64], rows: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(a, B) with predictions a + B·x over ``rows`` at fixed ``q``."""
        dq = q - self.q0
        slope = self.d_x[rows] + np.einsum("q,tqx->tx", dq, self.cross[rows])
        offset = self.base[rows] + self.d_q[rows] @ dq - slope @ self.x0
        return offset, slope

    def affine_in_q(
        self, x: NDArray[np.float64], rows: NDArray[np.intp]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(a, B) with predictions a + B·q over ``rows`` at fixed ``x``."""
        dx = x - self.x0
        slope = self.d_q[rows] + self.cross[rows] @ dx
        offset = self.base[rows] + self.d_x[rows] @ dx - slope @ self.q0
        return offset, slope

    def max_log_error(self, engine: NDArray[np.float64], values: Mapping[str, float]) -> float:
        """Largest |log(engine / bilinear)| over the targets, at ``values``."""
        x, q = self.split(values)
        pred = self.predict(x, q)
        finite = np.isfinite(engine)
        if np.any(finite & ~(np.isfinite(pred) & (pred > 0))):
            return float("inf")
        return float(np.max(np.abs(np.log(engine[finite] / pred[finite])), initial=0.0))


def build(
    predictor: RunPredictor,
    values: Mapping[str, float],
    linear_names: Sequence[str],
    queue_names: Sequence[str],
) -> Response:
    """Differences of engine passes at ``values`` and one step along each parameter (and pair)."""
    lin, que = tuple(linear_names), tuple(queue_names)
    has_queue = bool(que) and bool(predictor.serving.any())
    n, nx, nq = predictor.measured.size, len(lin), len(que)

    def run(shift: Mapping[str, float], modes: tuple[str, ...]) -> NDArray[np.float64]:
        moved = {**values, **{k: values[k] + v for k, v in shift.items()}}
        return predictor.predict(EfficiencyParams.from_dict(moved), modes)

    every = ("static", "serving")
    base = run({}, every)
    d_x = np.zeros((n, nx))
    single_x = []
    for j, name in enumerate(lin):
        h = STEPS[name]
        single_x.append(run({name: h}, every))
        d_x[:, j] = (single_x[-1] - base) / h
    d_q = np.zeros((n, nq))
    cross = np.zeros((n, nq, nx))
    if has_queue:
        serving = predictor.serving
        for i, qn in enumerate(que):
            hq = STEPS[qn]
            single_q = run({qn: hq}, ("serving",))
            d_q[serving, i] = (single_q[serving] - base[serving]) / hq
            for j, xn in enumerate(lin):
                hx = STEPS[xn]
                both = run({qn: hq, xn: hx}, ("serving",))
                mixed = both - single_q - single_x[j] + base
                cross[serving, i, j] = mixed[serving] / (hq * hx)
    return Response(
        linear_names=lin,
        queue_names=que,
        x0=np.array([values[k] for k in lin], dtype=float),
        q0=np.array([values[k] for k in que], dtype=float),
        base=base,
        d_x=d_x,
        d_q=d_q,
        cross=cross,
    )
