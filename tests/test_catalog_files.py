"""Tests for the catalog YAML loader and the seeded files."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest
import yaml

from service.api.schemas.common import SOURCE_URL_PATTERN
from service.catalog_files import (
    CATALOG_DIR,
    CatalogFileError,
    accelerator_from_record,
    load_accelerator_records,
    load_model_records,
    model_from_record,
)

REQUIRED_ACCELERATORS = {
    "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "a100-sxm-40gb",
    "a100-sxm-80gb", "a100-pcie-80gb", "b200", "gb200", "l40s", "l4", "a10", "v100-sxm2-32gb",
    "rtx-4090", "mi300x", "mi325x", "mi250x", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e",
    "gaudi2", "gaudi3", "inferentia2", "trainium", "trainium2", "gh200",
}  # fmt: skip
REQUIRED_MODELS = {
    "llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-8b",
    "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "mistral-7b-v0.1",
    "mistral-7b-v0.3", "mixtral-8x7b", "mixtral-8x22b", "qwen2.5-7b", "qwen2.5-14b",
    "qwen2.5-32b", "qwen2.5-72b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "deepseek-v3", "gemma-2-9b", "gemma-2-27b", "gemma-3-27b", "phi-3-mini-4k",
    "phi-3-medium-4k", "gpt-oss-20b", "gpt-oss-120b", "opt-13b", "opt-30b", "opt-66b",
    "falcon-40b",
}  # fmt: skip


@pytest.fixture(scope="module")
def accelerators() -> dict[str, dict[str, object]]:
    return {str(r["id"]): r for r in load_accelerator_records()}


@pytest.fixture(scope="module")
def models() -> dict[str, dict[str, object]]:
    return {str(r["id"]): r for r in load_model_records()}


def test_catalog_dir_is_repo_folder() -> None:
    assert (CATALOG_DIR / "accelerators").is_dir()
    assert (CATALOG_DIR / "models").is_dir()


def test_all_required_accelerators_present(accelerators: dict[str, dict[str, object]]) -> None:
    assert set(accelerators) >= REQUIRED_ACCELERATORS
    assert "a10g" not in accelerators and "b100" not in accelerators


def test_all_required_models_present(models: dict[str, dict[str, object]]) -> None:
    assert set(models) >= REQUIRED_MODELS


def test_h100_sxm_ridge_point(accelerators: dict[str, dict[str, object]]) -> None:
    h100 = accelerator_from_record(accelerators["h100-sxm"])
    assert h100.memory_gb == 80
    assert h100.memory_bandwidth_gb_s == 3350
    assert h100.peak_tflops["bf16"] == pytest.approx(989.4)
    assert h100.ridge_point_flop_per_byte("bf16") == pytest.approx(295, abs=1)


def test_h200_sxm_ridge_point(accelerators: dict[str, dict[str, object]]) -> None:
    h200 = accelerator_from_record(accelerators["h200-sxm"])
    assert (h200.memory_gb, h200.memory_bandwidth_gb_s) == (141, 4800)
    assert h200.peak_tflops["bf16"] == pytest.approx(989.4)
    assert h200.ridge_point_flop_per_byte("bf16") == pytest.approx(206, abs=1)


def test_notes_traps_followed(accelerators: dict[str, dict[str, object]]) -> None:
    get = {k: accelerator_from_record(v) for k, v in accelerators.items()}
    assert (get["b200"].memory_gb, get["b200"].memory_bandwidth_gb_s) == (180, 8000)
    assert get["gaudi3"].peak_tflops["bf16"] == 1677
    assert get["rtx-4090"].peak_tflops["bf16"] == pytest.approx(165.2)
    assert get["inferentia2"].memory_gb == pytest.approx(32 * 2**30 / 1e9, abs=0.01)
    assert get["inferentia2"].memory_bandwidth_gb_s == pytest.approx(820 * 2**30 / 1e9, abs=0.1)
    assert get["h100-sxm"].interconnect_gb_s == 450
    assert "fp8" not in get["a100-sxm-80gb"].peak_tflops
    assert "bf16" not in get["v100-sxm2-32gb"].peak_tflops
    assert get["l40s"].interconnect_gb_s == 0


def test_dense_peaks_not_sparse(accelerators: dict[str, dict[str, object]]) -> None:
    # Dense FP8 is at most ~2x dense BF16 (L40S 733 vs 362.05 per S13); a sparse FP8 would be 4x.
    for rec in accelerators.values():
        acc = accelerator_from_record(rec)
        if "fp8" in acc.peak_tflops and "bf16" in acc.peak_tflops:
            assert acc.peak_tflops["fp8"] <= 2.1 * acc.peak_tflops["bf16"], acc.id


def test_prices_carry_provenance(accelerators: dict[str, dict[str, object]]) -> None:
    for rec in accelerators.values():
        price = rec["price"]
        if rec["price_usd_per_hour"] is None:
            assert price is None
        else:
            assert isinstance(price, dict)
            assert {"provider", "tier", "date", "source"} <= set(price)


def test_model_records_build_valid_shapes(models: dict[str, dict[str, object]]) -> None:
    for rec in models.values():
        shape = model_from_record(rec)
        shape.validate()
        assert shape.id == rec["id"]
        assert shape.name == rec["name"]


def test_model_specific_fields(models: dict[str, dict[str, object]]) -> None:
    shape = {k: model_from_record(v) for k, v in models.items()}
    assert shape["deepseek-v3"].native_weights_dtype == "fp8"
    assert shape["deepseek-v3"].is_mla
    assert shape["llama-3.1-405b"].num_kv_heads == 8
    assert (shape["gemma-2-9b"].num_sliding_layers, shape["gemma-2-9b"].sliding_window_tokens) == (
        21,
        4096,
    )
    assert shape["gemma-3-27b"].num_sliding_layers == 52
    assert shape["gpt-oss-120b"].num_sliding_layers == 18
    assert shape["mistral-7b-v0.1"].num_sliding_layers == 32
    assert shape["mistral-7b-v0.3"].num_sliding_layers == 0


@pytest.mark.parametrize(
    ("model_id", "name", "same_shape_as"),
    [("deepseek-r1", "DeepSeek-R1", "deepseek-v3"),
     ("llama-3.3-70b", "Llama-3.3-70B-Instruct", "llama-3.1-70b")],
)  # fmt: skip
def test_retrained_models_keep_their_base_shape(
    models: dict[str, dict[str, object]], model_id: str, name: str, same_shape_as: str
) -> None:
    """R1 and Llama-3.3-70B repeat their base's config.json: the shapes differ only by name
    (and Llama-3.3's family label)."""
    shape, base = model_from_record(models[model_id]), model_from_record(models[same_shape_as])
    assert shape.id == model_id and shape.name == name
    assert dataclasses.replace(shape, id=base.id, name=base.name, family=base.family) == base


def test_records_are_json_serialisable() -> None:
    import json

    json.dumps(load_accelerator_records())
    json.dumps(load_model_records())


def _copy_catalog(tmp_path: Path) -> Path:
    shutil.copytree(CATALOG_DIR / "accelerators", tmp_path / "accelerators")
    shutil.copytree(CATALOG_DIR / "models", tmp_path / "models")
    return tmp_path


def _edit(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if value is None and key.startswith("drop_"):
            data.pop(key[5:])
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory_gb": 0}, "memory_gb must be positive"),
        ({"memory_bandwidth_gb_s": -1}, "memory_bandwidth_gb_s must be positive"),
        ({"drop_memory_gb": None}, "missing required field memory_gb"),
        ({"peak_tflops": {"bf17": 10}}, "unknown dtype"),
        ({"peak_tflops": {"bf16": 0}}, "peak_tflops.bf16 must be a positive"),
        ({"id": "h100"}, "must equal the file stem"),
        ({"field_sources": {"memory_gb": ["S1"]}}, "no entry for"),
        ({"sources": {"S43": "https://example.invalid"}}, "unknown source"),
        ({"sources": {"S1": "https://example.invalid"}}, "price.source"),
        ({"price": None}, "a price needs"),
        ({"confidence": "X"}, "confidence"),
        ({"measured_matmul_tflops": {"bf17": 10}}, "measured_matmul_tflops has unknown dtype"),
        ({"measured_matmul_tflops": {"fp4": 10}}, "has no peak_tflops.fp4"),
        ({"measured_matmul_tflops": {"bf16": 0}}, "measured_matmul_tflops.bf16 must be > 0"),
        ({"measured_matmul_tflops": {"bf16": 989.5}}, "measured_matmul_tflops.bf16 must be > 0"),
        ({"measured_matmul_tflops": {"fp8": "1402"}}, "measured_matmul_tflops.fp8 must be > 0"),
        ({"measured_matmul_tflops": []}, "measured_matmul_tflops must be a mapping"),
        ({"field_sources": {"measured_matmul_tflops": ["S3"]}}, "no entry for memory_gb"),
    ],
)
def test_accelerator_validation_errors(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    root = _copy_catalog(tmp_path)
    path = root / "accelerators" / "h100-sxm.yaml"
    _edit(path, **changes)
    with pytest.raises(CatalogFileError, match=message) as info:
        load_accelerator_records(root)
    assert info.value.path == path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_layers": 0}, "num_layers"),
        ({"num_kv_heads": 7}, "num_kv_heads"),
        ({"hidden_size": "4096"}, "hidden_size must be a non-negative integer"),
        ({"drop_hf_repo": None}, "missing required field hf_repo"),
        ({"bogus": 1}, "unknown field"),
        ({"field_sources": {"num_layers": ["M2"]}}, "no entry for"),
    ],
)
def test_model_validation_errors(tmp_path: Path, changes: dict[str, object], message: str) -> None:
    root = _copy_catalog(tmp_path)
    path = root / "models" / "llama-3.1-8b.yaml"
    _edit(path, **changes)
    with pytest.raises(CatalogFileError, match=message):
        load_model_records(root)


def test_invalid_yaml_reports_path(tmp_path: Path) -> None:
    root = _copy_catalog(tmp_path)
    path = root / "models" / "llama-3.1-8b.yaml"
    path.write_text("id: [unclosed\n")
    with pytest.raises(CatalogFileError, match="invalid YAML"):
        load_model_records(root)


def test_measured_matmul_needs_its_source(tmp_path: Path) -> None:
    root = _copy_catalog(tmp_path)
    path = root / "accelerators" / "h100-sxm.yaml"
    data = yaml.safe_load(path.read_text())
    del data["field_sources"]["measured_matmul_tflops"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CatalogFileError, match="no entry for measured_matmul_tflops"):
        load_accelerator_records(root)


def test_measured_matmul_from_mamf_table(accelerators: dict[str, dict[str, object]]) -> None:
    # docs/reference/accelerators.md §3a (S3): MAMF bf16 / fp8 TFLOP/s; "-" rows are absent.
    expected = {
        "mi300x": {"bf16": 668.4},
        "mi325x": {"bf16": 784.9},
        "a100-sxm-80gb": {"bf16": 271.2},
        "a100-pcie-80gb": {"bf16": 252.9},
        "gh200": {"bf16": 828.6, "fp8": 1535.0},
        "h100-sxm": {"bf16": 794.5, "fp8": 1402.6},
        "h200-sxm": {"bf16": 794.5, "fp8": 1453.4},
        "b200": {"bf16": 1745.0, "fp8": 3432.5},
        "gb200": {"bf16": 1822.0, "fp8": 3615.6},
        "gaudi2": {"bf16": 418.7, "fp8": 826.5},
        "gaudi3": {"bf16": 1243.0, "fp8": 1289.5},
    }
    for accelerator_id, measured in expected.items():
        record = accelerators[accelerator_id]
        assert accelerator_from_record(record).measured_matmul_tflops == measured
        field_sources = record["field_sources"]
        assert isinstance(field_sources, dict)
        assert field_sources["measured_matmul_tflops"] == ["S3"]
        assert "S3" in str(record["notes"]) and "torch" in str(record["notes"])
    assert "H200 is the same" in str(accelerators["h200-sxm"]["notes"])
    assert accelerator_from_record(accelerators["l4"]).measured_matmul_tflops == {}


def test_blackwell_ultra_and_ironwood_are_dense_per_device(
    accelerators: dict[str, dict[str, object]],
) -> None:
    get = {k: accelerator_from_record(v) for k, v in accelerators.items()}
    b300, gb300, tpu = get["b300"], get["gb300"], get["tpu-v7"]
    # HGX B300 board (8 GPUs): FP4 printed "144 | 108" (sparse | dense), FP8/FP6 72 PF sparse.
    assert b300.peak_tflops["fp4"] == 108_000 / 8
    assert b300.peak_tflops["fp8"] == 72_000 / 2 / 8
    assert b300.peak_tflops["bf16"] == 36_000 / 2 / 8
    # GB300 NVL72 rack (72 GPUs): 1,080 PF dense FP4, 360 PF dense FP8, 576 TB/s; 279 GB usable
    # of the 288 GB nominal per GPU (about 20 TB per rack).
    assert gb300.peak_tflops["fp4"] == 1_080_000 / 72
    assert gb300.peak_tflops["fp8"] == 360_000 / 72
    assert gb300.memory_bandwidth_gb_s == 576_000 / 72
    assert gb300.memory_gb == 279 < 288
    assert 72 * gb300.memory_gb == pytest.approx(20_000, rel=0.01)
    for part in (b300, gb300):
        assert "int8" not in part.peak_tflops
        assert part.interconnect_gb_s == 1800 / 2
    # The rack is one NVLink domain; beyond it, one 800 Gb/s NIC per GPU.
    assert gb300.link_bytes_s(72) == 900e9
    assert gb300.link_bytes_s(144) == 800e9 / 8
    assert b300.link_bytes_s(8) == 900e9
    assert b300.link_bytes_s(16) == 800e9 / 8
    # TPU7x per chip: ICI 1,200 GB/s bidirectional, DCN 100 Gb/s.
    assert (tpu.peak_tflops["bf16"], tpu.peak_tflops["fp8"]) == (2307, 4614)
    assert tpu.interconnect_gb_s == 1200 / 2
    assert tpu.memory_gb == 192
    assert tpu.link_bytes_s(256) == 600e9
    assert tpu.link_bytes_s(2 * 9216) == 100e9 / 8


def test_every_seeded_source_is_a_url_the_api_accepts() -> None:
    """Seeded rows stay editable: PATCH revalidates `sources` against SourceUrl."""
    pattern = re.compile(SOURCE_URL_PATTERN)
    records = [*load_accelerator_records(), *load_model_records()]
    bad = [
        (record["id"], sid, url)
        for record in records
        for sid, url in dict(record["sources"]).items()  # type: ignore[call-overload]
        if not pattern.match(url)
    ]
    assert bad == []


def test_measured_memory_bandwidth_from_gpu_benches(
    accelerators: dict[str, dict[str, object]], tmp_path: Path
) -> None:
    # docs/reference/accelerators.md §3c (B1): best DRAM read of gpu-benches' result files.
    expected = {"h200-sxm": 3889.0, "a100-sxm-80gb": 1769.0, "a100-sxm-40gb": 1490.0}
    for accelerator_id, measured in expected.items():
        record = accelerators[accelerator_id]
        assert accelerator_from_record(record).measured_memory_bandwidth_gb_s == measured
        assert record["field_sources"]["measured_memory_bandwidth_gb_s"] == ["B1"]  # type: ignore[index]
    assert accelerator_from_record(accelerators["h100-sxm"]).measured_bandwidth_fraction() is None
    root = _copy_catalog(tmp_path)
    path = root / "accelerators" / "h200-sxm.yaml"
    _edit(path, measured_memory_bandwidth_gb_s=4801)
    with pytest.raises(CatalogFileError, match="at most memory_bandwidth_gb_s"):
        load_accelerator_records(root)
