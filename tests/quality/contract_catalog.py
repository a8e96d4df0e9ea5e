"""What the contract hooks know of the seeded catalog, and helpers the fixers share.

The catalog is read from hardware_catalog/ with the loader the seeding uses, so a hook picks
ids and shapes the fuzzed server has. Shared by contract_hooks.py and contract_uploads.py.
"""

from __future__ import annotations

import zlib
from typing import Any

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape

JsonDict = dict[str, Any]

_MODEL_RECORDS = {str(r["id"]): r for r in load_model_records()}
_ACCELERATOR_RECORDS = {str(r["id"]): r for r in load_accelerator_records()}
_SHAPES = {model_id: model_from_record(r) for model_id, r in _MODEL_RECORDS.items()}
_ACCELERATORS: dict[str, Accelerator] = {
    acc_id: accelerator_from_record(r) for acc_id, r in _ACCELERATOR_RECORDS.items()
}
_PEAKS = {
    acc_id: {str(k) for k in r["peak_tflops"]}  # type: ignore[attr-defined]
    for acc_id, r in _ACCELERATOR_RECORDS.items()
}
# PUT and merge patches go to the last two seeded ids of each kind (the tests send an admin key,
# which may edit seeded rows); reads and plans use the others.
PATCHED_MODELS = sorted(_MODEL_RECORDS)[-2:]
PATCHED_ACCELERATORS = sorted(_ACCELERATOR_RECORDS)[-2:]
READ_MODELS = sorted(set(_MODEL_RECORDS) - set(PATCHED_MODELS))
READ_ACCELERATORS = sorted(set(_ACCELERATOR_RECORDS) - set(PATCHED_ACCELERATORS))
# POST /v1/plans: "Candidates x concurrency levels may not exceed the work budget
# (max_plan_points, 65,536 by default; 422 past it)".
PLAN_POINTS = 65_536


def _pick(options: list[str], generated: object) -> str:
    """A catalog id chosen by the generated value (deterministic, varies with it)."""
    return options[zlib.crc32(repr(generated).encode()) % len(options)]


def _int(value: object, default: int) -> int:
    """The generated integer (query values may come as decimal strings)."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _divisor_at_most(n: int, wanted: int) -> int:
    """The largest divisor of ``n`` not above ``wanted`` (1 divides everything)."""
    return max(d for d in range(1, max(1, min(n, wanted)) + 1) if n % d == 0)


def fix_layout(shape: ModelShape, layout: JsonDict) -> None:
    """A layout the stored model admits (description of POST /v1/intensity): "tp must divide
    the model's num_heads (and mamba_num_heads) and divide num_kv_heads or be a multiple of it;
    pp at most num_layers; ep > 1 and attention_dp > 1 need an MoE model, ep at most its
    num_experts and dividing tp x attention_dp" (and pp_virtual_stages: "pp·v <= num_layers,
    v > 1 needs pp > 1")."""

    def tp_ok(t: int) -> bool:
        kv = shape.num_kv_heads
        return (
            shape.num_heads % t == 0
            and (not shape.num_mamba_layers or shape.mamba_num_heads % t == 0)
            and (shape.is_mla or (kv % t == 0 if t <= kv else t % kv == 0))
        )

    wanted = max(1, _int(layout.get("tp"), 1))
    layout["tp"] = max(t for t in range(1, min(wanted, shape.num_heads) + 1) if tp_ok(t))
    pp = min(max(1, _int(layout.get("pp"), 1)), shape.num_layers)
    layout["pp"] = pp
    if "pp_virtual_stages" in layout:
        layout["pp_virtual_stages"] = (
            1
            if pp == 1
            else min(max(1, _int(layout["pp_virtual_stages"], 1)), shape.num_layers // pp)
        )
    if not shape.is_moe:
        for key in ("ep", "attention_dp"):
            if key in layout:
                layout[key] = 1
        return
    group = layout["tp"] * max(1, _int(layout.get("attention_dp"), 1))
    if "ep" in layout:
        layout["ep"] = _divisor_at_most(
            group, min(max(1, _int(layout["ep"], 1)), shape.num_experts)
        )
