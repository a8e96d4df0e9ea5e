"""Accelerator facts from their one home (``service.engine.hardware``), pinned by hand."""

from __future__ import annotations

import pytest

from service.catalog_files import accelerator_from_record, load_accelerator_records
from service.engine.errors import UnsupportedDtypeError
from service.engine.estimate import estimate
from service.engine.hardware import Accelerator
from service.engine.precision import Precision
from service.engine.shapes import ModelShape


@pytest.fixture(scope="module")
def catalog() -> dict[str, Accelerator]:
    return {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}


def test_v100_refuses_bf16_and_runs_fp16(
    catalog: dict[str, Accelerator], llama8b: ModelShape
) -> None:
    v100 = catalog["v100-sxm2-32gb"]
    # No silent bf16 → fp16 fallback: the same refusal for estimates and calibration uploads
    # (both call Accelerator.peak_flops_s).
    with pytest.raises(UnsupportedDtypeError, match=r"no bf16 .*fp16"):
        v100.peak_flops_s("bf16")
    with pytest.raises(UnsupportedDtypeError):
        estimate(llama8b, v100, input_tokens=128, output_tokens=16, batch_sizes=[1])
    fp16 = Precision(weights="fp16", activations="fp16", kv_cache="fp16")
    answer = estimate(
        llama8b, v100, precision=fp16, input_tokens=128, output_tokens=16, batch_sizes=[1]
    )
    assert answer.compute_dtype == "fp16"
    # Ridge point 125e12 / 900e9 = 138.9 FLOP/byte.
    assert answer.ridge_point_flop_per_byte == pytest.approx(125e12 / 900e9)
    # Attention math runs in the part's 16-bit type: fp16 at 125 TFLOP/s.
    assert v100.sixteen_bit_dtype() == "fp16"


def test_mi250x_is_priced_per_gcd(catalog: dict[str, Accelerator]) -> None:
    mi250x = catalog["mi250x"]
    # A matmul sees one of the two GCDs: 383 / 2 = 191.5 TFLOP/s, 128 / 2 = 64 GB, 3.2 / 2 TB/s.
    assert mi250x.peak_flops_s("bf16") == 191.5e12
    assert mi250x.memory_bytes == 64e9
    assert mi250x.memory_bandwidth_bytes_s == 1.6e12


@pytest.mark.parametrize(
    ("accelerator_id", "capacity_bytes"),
    [("h100-sxm", 80e9), ("trainium", 34.36e9), ("tpu-v4", 34.36e9), ("trainium2", 103.08e9)],
)
def test_capacity_reads_the_decimal_figure_once(
    catalog: dict[str, Accelerator], accelerator_id: str, capacity_bytes: float
) -> None:
    # 1 GB = 1e9 bytes; Trainium's 32 GiB label is stored converted (34.36 GB) and read once.
    assert catalog[accelerator_id].memory_bytes == pytest.approx(capacity_bytes)


@pytest.mark.parametrize(
    ("accelerator_id", "peers", "gb_s"),
    [
        # Bridges pair two GPUs; a TP4/TP8 collective crosses PCIe (Gen5 63, Gen4 32 GB/s).
        ("h100-pcie", 2, 300.0),
        ("h100-pcie", 4, 63.0),
        ("h100-nvl", 8, 63.0),
        ("a100-pcie-80gb", 2, 300.0),
        ("a100-pcie-80gb", 8, 32.0),
        # A switchless xGMI mesh: one 64 GB/s link per peer, N − 1 of them, at most 448.
        ("mi300x", 2, 64.0),
        ("mi300x", 4, 192.0),
        ("mi300x", 8, 448.0),
        # NVSwitch: the full rate to any peer in the 8-GPU board; beyond it the network.
        ("h100-sxm", 8, 450.0),
        ("h100-sxm", 16, 50.0),
        # NVL72: one domain of 72 GPUs.
        ("gb200", 72, 900.0),
    ],
)
def test_link_bandwidth_by_topology_and_degree(
    catalog: dict[str, Accelerator], accelerator_id: str, peers: int, gb_s: float
) -> None:
    assert catalog[accelerator_id].link_bytes_s(peers) == pytest.approx(gb_s * 1e9)


def test_mi355x_dense_peaks_from_clock_and_compute_units(catalog: dict[str, Accelerator]) -> None:
    mi355x = catalog["mi355x"]
    # 8,192 dense FP8 FLOP per clock per CU × 256 CUs (8 XCDs × 32) × 2.4 GHz = 5,033 TFLOPS.
    assert mi355x.peak_flops_s("fp8") == pytest.approx(8192 * 256 * 2.4e9, rel=1e-4)
    assert mi355x.peak_flops_s("bf16") == pytest.approx(4096 * 256 * 2.4e9, rel=1e-4)
    assert mi355x.memory_bytes == 288e9
