"""Calibration fits run in child processes, so their CPU time does not hold the server's GIL."""

from __future__ import annotations

import os
from pathlib import Path

from service.catalog_files import accelerator_from_record, load_accelerator_records
from service.engine.calibration.parsers import parse_csv
from service.services import calibration as calibration_service

DATA = Path(__file__).parents[1] / "data" / "benchmarks"


def test_a_fit_runs_in_a_child_process_and_returns_its_result() -> None:
    records = {str(r["id"]): r for r in load_accelerator_records()}
    h100 = accelerator_from_record(records["h100-sxm"])
    gemms = parse_csv((DATA / "h100_gemm_subset.csv").read_text()).measurements
    result = calibration_service.run_fit(gemms, h100, {}, budget_s=120.0)
    assert result.accelerator == h100.id
    assert "gemm_compute_efficiency_bf16" in result.standard_errors
    pool = calibration_service._FIT_POOL._pool
    assert pool is not None
    children = {p.pid for p in pool._processes.values()}
    assert children and os.getpid() not in children
