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
    accelerator: str, aliases: dict[str, str]
) -> tuple[list[StaticMeasurement], list[str]]:
    """Argonne vLLM/TensorRT-LLM static-batch rows for one accelerator, models mapped to ids.

    Rows whose model is not in the catalog (Qwen2-7B/72B, DeciLM, ...) are left out and named.
    """
    parsed = parse_csv(ARGONNE.read_text())
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


def serving_runs(aliases: dict[str, str]) -> list[ServingMeasurement]:
    """H100 SXM Qwen3-32B serving runs, models mapped to catalog ids."""
    parsed = parse_csv((H100_DIR / "serving_qwen3_32b.csv").read_text())
    return [
        replace(m, model=aliases[m.model])
        for m in parsed.measurements
        if isinstance(m, ServingMeasurement)
    ]
