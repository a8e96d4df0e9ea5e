"""Parallel layout of one model replica: tensor, pipeline and expert parallel degrees."""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.engine.errors import InvalidLayoutError
from service.engine.shapes import ModelShape


@dataclass(frozen=True, slots=True)
class Parallelism:
    """Tensor (tp), pipeline (pp) and expert (ep) parallel degrees of one replica.

    - tp splits attention heads, FFN/expert columns and the vocabulary; it must divide num_heads.
      When tp exceeds num_kv_heads each KV head is replicated (tp must then be a multiple of
      num_kv_heads), as vLLM does; otherwise tp must divide num_kv_heads. MLA's latent KV cache is
      shared by all heads, so every TP rank holds all of it.
    - pp splits layers into contiguous stages; pp ≤ num_layers.
    - ep shards routed experts over ep ranks of the TP group (tp % ep == 0, ep divides
      num_experts); the remaining tp/ep ranks split each expert's columns. Per-GPU expert bytes and
      FLOPs are the same as pure TP; ep replaces the MoE all-reduce with all-to-all dispatch and
      combine. ep > 1 needs an MoE model.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    def kv_heads_per_gpu(self, model: ModelShape) -> int:
        """Return KV heads per TP rank (at least one: heads are replicated past tp = n_kv)."""
        return max(model.num_kv_heads // self.tp, 1)

    def layers_per_stage(self, model: ModelShape) -> int:
        """Return layers on the largest pipeline stage."""
        return math.ceil(model.num_layers / self.pp)

    def check_divides(self, model: ModelShape) -> None:
        """Raise InvalidLayoutError when this layout cannot run the model."""
        for name, value in (("tp", self.tp), ("pp", self.pp), ("ep", self.ep)):
            if value < 1:
                raise InvalidLayoutError(f"{name} must be at least 1, got {value}")
        if model.num_heads % self.tp:
            raise InvalidLayoutError(
                f"tp={self.tp} must divide num_heads={model.num_heads} of {model.id}"
            )
        n_kv = model.num_kv_heads
        if not model.is_mla and (n_kv % self.tp if self.tp <= n_kv else self.tp % n_kv):
            raise InvalidLayoutError(
                f"tp={self.tp} must divide num_kv_heads={n_kv} of {model.id}, or be a multiple "
                "of it (KV heads are then replicated)"
            )
        if self.pp > model.num_layers:
            raise InvalidLayoutError(
                f"pp={self.pp} exceeds num_layers={model.num_layers} of {model.id}"
            )
        if self.ep > 1:
            if not model.is_moe:
                raise InvalidLayoutError(f"ep={self.ep} needs an MoE model; {model.id} is dense")
            if model.num_experts % self.ep:
                raise InvalidLayoutError(
                    f"ep={self.ep} must divide num_experts={model.num_experts} of {model.id}"
                )
            if self.tp % self.ep:
                raise InvalidLayoutError(
                    f"ep={self.ep} must divide tp={self.tp}: experts are sharded over the TP group"
                )


SINGLE_GPU = Parallelism()
