"""Options shared by the analysis commands: precision, parallelism, backend and calibration."""

from __future__ import annotations

from typing import Annotated, Any

import typer

DTYPE_HELP = "fp32, tf32, bf16, fp16, fp8, int8, int4 or fp4"

Weights = Annotated[str | None, typer.Option(help=f"Weights dtype ({DTYPE_HELP}).")]
Activations = Annotated[str | None, typer.Option(help="Activations (GEMM compute) dtype.")]
KvCache = Annotated[str | None, typer.Option("--kv-cache", help="KV cache dtype.")]
Tp = Annotated[int | None, typer.Option("--tp", min=1, help="Tensor parallel degree.")]
Pp = Annotated[int | None, typer.Option("--pp", min=1, help="Pipeline parallel degree.")]
Ep = Annotated[int | None, typer.Option("--ep", min=1, help="Expert parallel degree.")]
AttentionDp = Annotated[
    int | None,
    typer.Option("--attention-dp", min=1, help="Attention data-parallel ranks (MoE models)."),
]
Backend = Annotated[str | None, typer.Option(help="Serving backend, e.g. vllm, sglang, trtllm.")]
CalibrationOpt = Annotated[
    str | None, typer.Option("--calibration", help='"auto", "none" or a profile id.')
]


def present(**values: Any) -> dict[str, Any]:
    """Only the values the user gave (the API fills its own defaults)."""
    return {key: value for key, value in values.items() if value is not None}


def layout(
    weights: str | None,
    activations: str | None,
    kv_cache: str | None,
    tp: int | None,
    pp: int | None,
    ep: int | None,
    attention_dp: int | None = None,
) -> dict[str, Any]:
    """The ``precision`` and ``parallelism`` request objects from the options given."""
    body: dict[str, Any] = {}
    precision = present(weights=weights, activations=activations, kv_cache=kv_cache)
    parallelism = present(tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)
    if precision:
        body["precision"] = precision
    if parallelism:
        body["parallelism"] = parallelism
    return body


def int_list(text: str) -> list[int]:
    """Parse ``1,64,512`` into integers."""
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError as exc:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from exc
