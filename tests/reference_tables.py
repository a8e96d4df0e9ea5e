"""Render the catalog tables of docs/reference/ from hardware_catalog/ (the facts' one home).

``python tests/reference_tables.py`` prints every table; paste them into
docs/reference/accelerators.md and models.md after changing a catalog file.
tests/test_reference_docs.py fails while a table in the docs differs from this rendering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from service.catalog_files import load_accelerator_records, load_model_records, model_from_record
from service.engine.param_count import count_parameters

DTYPE_COLUMNS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}"


def _source_key(source_id: str) -> tuple[str, int]:
    """Sort ``M2`` before ``M10``; ids without a number (``HF``) sort by their letters."""
    letters = source_id.rstrip("0123456789")
    digits = source_id[len(letters) :]
    return letters, int(digits) if digits else 0


def _source_ids(ids: Iterable[str]) -> str:
    return ", ".join(sorted(set(ids), key=_source_key))


def _table(header: list[str], rows: Iterable[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _field_sources(record: Mapping[str, Any], *fields: str) -> list[str]:
    sources = record.get("field_sources", {})
    return [s for f in fields for s in sources.get(f, [])]


def accelerator_tables() -> dict[str, str]:
    """Return the tables of docs/reference/accelerators.md keyed by section label."""
    records = load_accelerator_records()
    memory = [
        [
            f"`{r['id']}`",
            f"{r['vendor']} {r['name']}",
            f"{_number(r['memory_gb'])} {r.get('memory_type', '')}",
            _number(r["memory_bandwidth_gb_s"]),
            _number(r["interconnect_gb_s"]),
            _number(r.get("tdp_w")),
            str(r["confidence"]),
            _source_ids(
                _field_sources(
                    r, "memory_gb", "memory_bandwidth_gb_s", "interconnect_gb_s", "tdp_w"
                )
            ),
        ]
        for r in records
    ]
    peaks = [
        [f"`{r['id']}`"]
        + [_number(r["peak_tflops"].get(d)) for d in DTYPE_COLUMNS]
        + [_source_ids(_field_sources(r, "peak_tflops"))]
        for r in records
    ]
    mamf = []
    for r in records:
        measured = r.get("measured_matmul_tflops") or {}
        if not measured:
            continue
        row = [f"`{r['id']}`"]
        for dtype in ("bf16", "fp8"):
            if dtype in measured:
                row += [
                    _number(measured[dtype]),
                    f"{measured[dtype] / r['peak_tflops'][dtype]:.1%}",
                ]
            else:
                row += ["–", "–"]
        mamf.append(row)
    dram = [
        [
            f"`{r['id']}`",
            _number(r["measured_memory_bandwidth_gb_s"]),
            _number(r["memory_bandwidth_gb_s"]),
            f"{r['measured_memory_bandwidth_gb_s'] / r['memory_bandwidth_gb_s']:.1%}",
            _source_ids(_field_sources(r, "measured_memory_bandwidth_gb_s")),
        ]
        for r in records
        if r.get("measured_memory_bandwidth_gb_s") is not None
    ]
    prices = [
        [
            f"`{r['id']}`",
            _number(r.get("price_usd_per_hour")),
            *(
                str((r.get("price") or {}).get(k, "–"))
                for k in ("provider", "tier", "date", "source")
            ),
        ]
        for r in records
    ]
    return {
        "1": _table(
            [
                "id",
                "name",
                "memory (GB, type)",
                "bandwidth (GB/s)",
                "scale-up link per direction (GB/s)",
                "TDP (W)",
                "conf.",
                "sources",
            ],
            memory,
        ),
        "2": _table(["id", *DTYPE_COLUMNS, "sources"], peaks),
        "3a": _table(
            ["id", "bf16 MAMF", "bf16 fraction of peak", "fp8 MAMF", "fp8 fraction of peak"], mamf
        ),
        "3c": _table(
            ["id", "measured DRAM read (GB/s)", "spec sheet (GB/s)", "fraction", "source"], dram
        ),
        "4": _table(["id", "USD per device-hour", "provider", "tier", "date", "source"], prices),
    }


def model_tables() -> dict[str, str]:
    """Return the tables of docs/reference/models.md keyed by section label."""
    records = load_model_records()
    shapes = [model_from_record(r) for r in records]
    core = []
    for r, s in zip(records, shapes, strict=True):
        window = (
            f"{s.sliding_window_tokens} ({s.num_sliding_layers})"
            if s.sliding_window_tokens
            else "–"
        )
        core.append(
            [
                f"`{s.id}`",
                *(
                    str(v)
                    for v in (
                        s.num_layers,
                        s.hidden_size,
                        s.intermediate_size,
                        s.num_heads,
                        s.num_kv_heads,
                        s.head_dim,
                        s.vocab_size,
                    )
                ),
                "yes" if s.tie_word_embeddings else "no",
                str(s.max_context_tokens or "–"),
                s.ffn_type,
                window,
                _source_ids(r.get("sources", {})),
            ]
        )
    moe = [
        [
            f"`{s.id}`",
            *(
                str(v)
                for v in (
                    s.num_experts,
                    s.experts_per_token,
                    s.num_shared_experts,
                    s.moe_intermediate_size,
                    s.first_dense_layers,
                )
            ),
        ]
        for s in shapes
        if s.num_experts
    ]
    kv = []
    for s in shapes:
        if s.kv_lora_rank:
            per_token = (s.kv_lora_rank + s.qk_rope_head_dim) * s.num_layers * 2
            latent = f"MLA latent {s.kv_lora_rank} + rope {s.qk_rope_head_dim}"
            kv.append([f"`{s.id}`", f"{per_token:,} ({latent})", "–"])
            continue
        per_layer = 2 * s.num_kv_heads * s.head_dim * 2
        full = (s.num_attention_layers - s.num_sliding_layers) * per_layer
        full_text = f"{full:,} ({full / 1024:g} KiB)" if full else "– (every layer windowed)"
        if s.num_mamba_layers:
            # Mamba2 layers hold a fixed state per sequence: SSM H·P·N + conv (K − 1)·channels.
            channels = s.mamba_inner_size + 2 * s.mamba_n_groups * s.ssm_state_size
            ssm = s.mamba_inner_size * s.ssm_state_size
            state = s.num_mamba_layers * (ssm + (s.mamba_conv_kernel - 1) * channels) * 2
            full_text += f" + {state:,} B per sequence ({s.num_mamba_layers} Mamba2 states)"
        windowed = (
            f"{s.num_sliding_layers} × {per_layer:,} B × min(context, {s.sliding_window_tokens})"
            if s.num_sliding_layers
            else "–"
        )
        kv.append([f"`{s.id}`", full_text, windowed])
    counts = []
    for r, s in zip(records, shapes, strict=True):
        c = count_parameters(s)
        counts.append(
            [
                f"`{s.id}`",
                str(r.get("vendor_stated_params", "")),
                f"{c.total / 1e9:.3f}",
                f"{c.active / 1e9:.3f}",
                f"{c.active_excluding_embedding / 1e9:.3f}",
            ]
        )
    return {
        "1": _table(
            [
                "id",
                "L",
                "hidden",
                "FFN",
                "heads",
                "KV heads",
                "head dim",
                "vocab",
                "tied",
                "context",
                "FFN type",
                "window (layers)",
                "sources",
            ],
            core,
        ),
        "2": _table(
            ["id", "routed experts", "per token", "shared", "expert width", "dense first layers"],
            moe,
        ),
        "3": _table(["id", "KV bytes per token, bf16, full-length layers", "windowed layers"], kv),
        "4": _table(
            [
                "id",
                "vendor-stated",
                "computed total (B)",
                "computed active (B)",
                "active without input embedding (B)",
            ],
            counts,
        ),
    }


if __name__ == "__main__":
    for name, tables in (("accelerators", accelerator_tables()), ("models", model_tables())):
        for label, table in tables.items():
            print(f"<!-- {name}.md section {label} -->\n{table}")
