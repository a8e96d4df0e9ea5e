"""Parallel layout of one model replica: tensor, attention-data, pipeline and expert degrees."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy.typing as npt

from service.engine.errors import InvalidLayoutError
from service.engine.kernels import FloatArray, ceil, floor, values, where
from service.engine.shapes import ModelShape


def on_busiest_rank(count: npt.ArrayLike, ranks: int) -> FloatArray:
    """Return ceil(count / ranks), the most any of ``ranks`` ranks holds of ``count`` items
    placed whole and balanced by count, interpolated linearly between whole counts."""
    n = values(count)
    if ranks == 1:
        return n
    whole = floor(n)
    # ceil(n / ranks) rises by one from whole to whole + 1 when ranks divides whole.
    rises = where(whole % ranks == 0.0, 1.0, 0.0)
    return ceil(whole / ranks) + (n - whole) * rises


@dataclass(frozen=True, slots=True)
class Parallelism:
    """Tensor (tp), attention data (attention_dp), pipeline (pp) and expert (ep) degrees.

    - tp splits attention heads, dense FFN columns and the vocabulary; it must divide num_heads.
      When tp exceeds num_kv_heads each KV head is replicated (tp must then be a multiple of
      num_kv_heads), as vLLM does; otherwise tp must divide num_kv_heads. MLA's latent KV cache is
      shared by all heads, so every TP rank holds all of it.
    - attention_dp (MoE models): attention, dense layers, shared experts, embeddings and LM
      head are replicated on attention_dp ranks of tp GPUs each, every rank serving its own
      sequences (balanced by count, so the busiest holds ceil(n / attention_dp) of n: a lone
      prompt runs whole on one rank); the MoE layers are sharded over all tp × attention_dp
      GPUs.
    - ep shards routed experts over ep of the tp × attention_dp GPUs of the MoE group (ep divides
      that count, ep ≤ num_experts); the remaining (tp × attention_dp)/ep ranks split each
      expert's columns. When ep does not divide num_experts the busiest GPU holds
      ceil(num_experts / ep) of them (EP 72 for 256 experts: 4 per GPU, the 288 slots engines
      fill with redundant copies). ep may exceed tp (wide EP) when attention_dp makes the
      group large enough. ep > 1 replaces the MoE all-reduce with all-to-all dispatch and
      combine.
    - pp splits layers into contiguous stages; pp ≤ num_layers. ``pp_virtual_stages`` v > 1
      (interleaved pipeline, Megatron-LM: Narayanan et al., SC'21, arXiv:2104.04473 §2.2.2)
      gives each GPU v non-contiguous chunks of layers, so a pass crosses pp·v − 1 stage
      boundaries instead of pp − 1 (pp·v ≤ num_layers; v > 1 needs pp > 1). It shortens the
      pipeline bubble only when a batch is split into micro-batches
      (``pipeline_bubble_fraction``).
    - Mamba2 layers split their heads over tp like attention heads (tp must divide
      mamba_num_heads); B/C groups are split when tp divides n_groups and replicated otherwise,
      as vLLM's MambaMixer2 does.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1
    pp_virtual_stages: int = 1

    @property
    def pp_boundaries(self) -> int:
        """Return the stage boundaries one forward pass crosses: pp·v − 1 (a send each)."""
        return self.pp * self.pp_virtual_stages - 1

    def pipeline_bubble_fraction(self, micro_batches: int = 1) -> float:
        """Return the share of each GPU's time idle while a batch of ``micro_batches``
        micro-batches passes the pipeline: (p − 1) / (v·m + p − 1).

        Megatron-LM's schedules (Narayanan et al., "Efficient Large-Scale Language Model
        Training on GPU Clusters Using Megatron-LM", SC'21, arXiv:2104.04473 §2.2): the bubble
        is (p − 1)/m of the ideal time without interleaving and (p − 1)/(v·m) with v virtual
        stages per GPU, i.e. (p − 1)/(v·m + p − 1) of the total. The interleaved schedule
        needs m to be a multiple of p (a smaller m leaves chunks waiting on the previous
        chunk of the same micro-batch); without interleaving any m ≥ 1 holds.

        Where it applies in inference: one batch through the pipeline (a static batch, a
        single step) runs as m = 1, so its bubble is (p − 1)/p whatever v (interleaving only
        adds sends); engines that keep m ≥ p micro-batches in flight between steps (vLLM's
        one scheduled batch per pipeline stage) have no flush, so for serving throughput the
        bubble vanishes and the formula describes only the fill and drain of a batch.
        """
        p, v, m = self.pp, self.pp_virtual_stages, micro_batches
        if m < 1:
            raise InvalidLayoutError(f"micro_batches must be at least 1, got {m}")
        if v > 1 and m % p:
            raise InvalidLayoutError(
                f"pp_virtual_stages={v} needs a multiple of pp={p} micro-batches, got {m} "
                "(Megatron-LM's interleaved schedule)"
            )
        return (p - 1) / (v * m + p - 1)

    @property
    def moe_group_gpus(self) -> int:
        """Return the GPUs one MoE layer is sharded over (tp × attention_dp)."""
        return self.tp * self.attention_dp

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.attention_dp * self.pp

    def sequences_on_busiest_dp_rank(self, sequences: npt.ArrayLike) -> FloatArray:
        """Return the sequences the busiest attention-DP rank serves out of ``sequences``.

        Engines balance requests over the ranks by count (SGLang's round-robin or
        shortest-queue dispatch), so the busiest rank holds ceil(n / attention_dp) of n and
        every rank waits for it in the MoE exchange. A mean count between whole numbers (a
        serving estimate's running batch, prompt chunks per step) is interpolated linearly
        between them: 0.3 prompts per step cost 0.3 of a whole prompt on one rank.
        """
        return on_busiest_rank(sequences, self.attention_dp)

    def experts_per_gpu(self, model: ModelShape) -> int:
        """Return routed experts on the busiest GPU of the expert-parallel group."""
        return math.ceil(model.num_experts / self.ep)

    def kv_heads_per_gpu(self, model: ModelShape) -> int:
        """Return KV heads per TP rank (at least one: heads are replicated past tp = n_kv)."""
        return max(model.num_kv_heads // self.tp, 1)

    def mamba_heads_per_gpu(self, model: ModelShape) -> int:
        return model.mamba_num_heads // self.tp

    def mamba_groups_per_gpu(self, model: ModelShape) -> int:
        """Return B/C groups per TP rank (all of them when tp does not divide n_groups)."""
        groups = model.mamba_n_groups
        return groups // self.tp if groups % self.tp == 0 else groups

    def layers_per_stage(self, model: ModelShape) -> int:
        """Return layers on the largest pipeline stage."""
        return math.ceil(model.num_layers / self.pp)

    def check_divides(self, model: ModelShape) -> None:
        """Raise InvalidLayoutError, naming the degree and the limit, if this layout cannot run."""
        for name, value in (
            ("tp", self.tp),
            ("pp", self.pp),
            ("ep", self.ep),
            ("attention_dp", self.attention_dp),
            ("pp_virtual_stages", self.pp_virtual_stages),
        ):
            if value < 1:
                raise InvalidLayoutError(f"{name} must be at least 1, got {value}")
        if model.num_heads % self.tp:
            raise InvalidLayoutError(
                f"tp={self.tp} must divide num_heads={model.num_heads} of {model.id}"
            )
        if model.num_mamba_layers and model.mamba_num_heads % self.tp:
            raise InvalidLayoutError(
                f"tp={self.tp} must divide mamba_num_heads={model.mamba_num_heads} of {model.id}"
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
        v = self.pp_virtual_stages
        if v > 1 and self.pp == 1:
            raise InvalidLayoutError(
                f"pp_virtual_stages={v} needs pp > 1: virtual stages interleave pipeline stages"
            )
        if self.pp * v > model.num_layers:
            raise InvalidLayoutError(
                f"pp_virtual_stages={v} × pp={self.pp} exceeds num_layers={model.num_layers} "
                f"of {model.id}: every virtual stage needs a layer"
            )
        if self.attention_dp > 1 and not model.is_moe:
            raise InvalidLayoutError(
                f"attention_dp={self.attention_dp} needs an MoE model; {model.id} is dense "
                "(run independent replicas instead)"
            )
        if self.ep > 1:
            if not model.is_moe:
                raise InvalidLayoutError(f"ep={self.ep} needs an MoE model; {model.id} is dense")
            if self.ep > model.num_experts:
                raise InvalidLayoutError(
                    f"ep={self.ep} exceeds num_experts={model.num_experts} of {model.id}"
                )
            group = self.moe_group_gpus
            if group % self.ep:
                raise InvalidLayoutError(
                    f"ep={self.ep} must divide tp × attention_dp = {group}: experts are sharded "
                    "over the GPUs of the MoE group (raise attention_dp for ep > tp)"
                )


SINGLE_GPU = Parallelism()
