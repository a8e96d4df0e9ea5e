"""Load the shared benchmark files and the catalog for the calibration accuracy benchmark."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from service.catalog_files import (
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)
from service.engine.calibration.fit import compute_dtypes_on
from service.engine.calibration.measurements import (
    Measurement,
    ServingMeasurement,
    StaticMeasurement,
)
from service.engine.calibration.parsers import model_id_from_name, parse_csv
from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape

# Measured data shipped with the repository; sources and licences in benchmarks/data/README.md.
DATA_DIR = Path(__file__).resolve().parent / "data"
H100_DIR = DATA_DIR / "h100"
ARGONNE = DATA_DIR / "raw" / "argonne-lcf__LLM-Inference-Bench" / "Plots" / "All_results.csv"
# One TTFT run per (accelerator, engine, model): a static batch of 16 prompts of 1,024 tokens
# generating one token each (the paper's figure 21).
ARGONNE_TTFT = ARGONNE.parent / "Fig_21" / "all_results_TTFT.csv"
KERNEL_FILES = ("gemm.csv", "decode_attention.csv", "prefill_attention.csv", "nccl.csv")
STATIC_BACKENDS = ("vllm", "trtllm")


def accelerators() -> dict[str, Accelerator]:
    """Catalog accelerators by id."""
    return {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}


def models() -> tuple[dict[str, ModelShape], dict[str, str]]:
    """Catalog models by id, and a map from parser model ids (HF repo based) to catalog ids."""
    shapes: dict[str, ModelShape] = {}
    aliases: dict[str, str] = {}
    for record in load_model_records():
        shape = model_from_record(record)
        shapes[shape.id] = shape
        aliases[shape.id] = shape.id
        if record.get("hf_repo"):
            aliases[model_id_from_name(str(record["hf_repo"]))] = shape.id
    return shapes, aliases


def kernel_measurements(files: tuple[str, ...] = KERNEL_FILES) -> list[Measurement]:
    """H100 SXM kernel tables (GEMM, attention, NCCL)."""
    out: list[Measurement] = []
    for name in files:
        out.extend(parse_csv((H100_DIR / name).read_text()).measurements)
    return out


def argonne_static(
    accelerator: str, aliases: dict[str, str], source: Path = ARGONNE
) -> tuple[list[StaticMeasurement], list[str]]:
    """Argonne vLLM/TensorRT-LLM static-batch rows for one accelerator, models mapped to ids
    (``source``: the whole-batch latency table, or ``ARGONNE_TTFT``).

    Rows whose model is not in the catalog (Qwen2-7B/72B, DeciLM, ...) are left out and named.
    """
    parsed = parse_csv(source.read_text())
    kept: list[StaticMeasurement] = []
    skipped: set[str] = set()
    for m in parsed.measurements:
        if not isinstance(m, StaticMeasurement) or m.accelerator != accelerator:
            continue
        if m.backend not in STATIC_BACKENDS:
            continue
        if m.model not in aliases:
            skipped.add(m.model)
            continue
        kept.append(replace(m, model=aliases[m.model]))
    return kept, sorted(skipped)


SERVING_FILES = ("serving_qwen3_32b.csv", "serving_llama31_8b.csv", "serving_gpt_oss_120b.csv")
# The source labels gpt-oss-120b's GEMM mode ``nvfp4``, but the checkpoint's expert weights are
# MXFP4 and H100 has no fp4 tensor cores: the experts run weight-only (4-bit weights dequantised
# into bf16 GEMMs; benchmarks/data/README.md). The fit reads such runs that way on any
# accelerator without an fp4 peak (``fit.compute_dtypes_on``); so does this loader.


def serving_runs(
    aliases: dict[str, str], files: tuple[str, ...] = ("serving_qwen3_32b.csv",)
) -> list[ServingMeasurement]:
    """H100 SXM serving runs of ``files`` (closed loop at a fixed concurrency), mapped to ids."""
    out: list[ServingMeasurement] = []
    for name in files:
        parsed = parse_csv((H100_DIR / name).read_text())
        out += [
            replace(m, model=aliases[m.model])
            for m in parsed.measurements
            if isinstance(m, ServingMeasurement)
        ]
    runs, _ = compute_dtypes_on(out, accelerators()["h100-sxm"], models()[0])
    return [r for r in runs if isinstance(r, ServingMeasurement)]
