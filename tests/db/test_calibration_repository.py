"""Calibration persistence: versions, measurements, constraints, the profile `auto` chooses, and
how estimates resolve ``calibration`` against stored profiles."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.calibration_repository import (
    CalibrationRepository,
    IdempotencyRepository,
    profile_choice,
)
from service.db.models import CalibrationProfileModelRow, CalibrationProfileRow, IdempotencyKeyRow
from service.engine.calibration.priors import with_engine_priors
from service.engine.efficiency import spec_sheet_efficiency
from service.services.catalog import CatalogService
from service.services.efficiency_lookup import resolve_efficiency
from service.services.errors import NotFoundError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def profile(
    profile_id: str,
    *,
    accelerator: str = "h100-sxm",
    backend: str = "",
    name: str = "p",
    version: int = 1,
    minutes: int = 0,
    step_overhead_us: float = 400.0,
    models: dict[str, str] | None = None,
) -> CalibrationProfileRow:
    """A stored profile; ``models``: id → kind of the models its runs were fitted on."""
    result: dict[str, Any] = {
        "accelerator": accelerator,
        "parameters": {"step_overhead_us": step_overhead_us},
    }
    if models:
        result["domain"] = {"models": [{"id": m, "kind": k} for m, k in models.items()]}
    return CalibrationProfileRow(
        id=profile_id,
        accelerator=accelerator,
        backend=backend,
        backend_version="",
        name=name,
        version=version,
        n_measurements=0,
        result=result,
        summary={},
        created_at=T0 + timedelta(minutes=minutes),
    )


def gemm(m: int) -> dict[str, Any]:
    data = {"kind": "gemm", "dtype": "bf16", "m": m, "n": 1024, "k": 1024, "latency_ms": 0.01}
    return {"kind": "gemm", "data": data}


def test_measurements_are_stored_in_upload_order(db_session: Session) -> None:
    repo = CalibrationRepository(db_session)
    repo.add(profile("cal_a"), [gemm(m) for m in (64, 1, 16)])
    repo.add(profile("cal_b", version=2), [gemm(8)])
    assert [r.data["m"] for r in repo.measurements("cal_a")] == [64, 1, 16]
    assert repo.count_measurements("cal_a") == 3 and repo.count_measurements("cal_b") == 1


def test_versions_count_per_accelerator_backend_and_name(db_session: Session) -> None:
    repo = CalibrationRepository(db_session)
    assert repo.next_version("h100-sxm", "", "p") == 1
    repo.add(profile("cal_a"), [])
    repo.add(profile("cal_b", version=2), [])
    assert repo.next_version("h100-sxm", "", "p") == 3
    assert repo.next_version("h100-sxm", "vllm", "p") == 1
    assert repo.next_version("h100-sxm", "", "other") == 1
    assert repo.next_version("h200-sxm", "", "p") == 1


def test_a_version_cannot_be_stored_twice(db_session: Session) -> None:
    repo = CalibrationRepository(db_session)
    repo.add(profile("cal_a"), [])
    with pytest.raises(IntegrityError):
        repo.add(profile("cal_b"), [])
    db_session.rollback()


def test_an_idempotency_key_is_unique_per_owner_and_endpoint(db_session: Session) -> None:
    repo = IdempotencyRepository(db_session)

    def key(owner: str) -> IdempotencyKeyRow:
        return IdempotencyKeyRow(
            owner=owner, endpoint="POST /x", key="k", request_hash="h", status_code=201, response={}
        )

    repo.add(key("alice"))
    repo.add(key("bob"))
    stored = repo.get("alice", "POST /x", "k")
    assert stored is not None and stored.owner == "alice"
    assert repo.get("alice", "POST /y", "k") is None
    with pytest.raises(IntegrityError):
        repo.add(key("alice"))
    db_session.rollback()


def test_pages(db_session: Session) -> None:
    repo = CalibrationRepository(db_session)
    repo.add(profile("cal_1", backend="vllm", minutes=1), [])
    repo.add(profile("cal_2", backend="", minutes=2), [])
    repo.add(profile("cal_3", backend="vllm", name="q", minutes=3), [])
    repo.add(profile("cal_4", accelerator="h200-sxm", minutes=4), [])
    assert [r.id for r in repo.page(viewer="", limit=2)] == ["cal_1", "cal_2"]
    assert [r.id for r in repo.page(viewer="", after_id="cal_2")] == ["cal_3", "cal_4"]
    assert [r.id for r in repo.page(viewer="", accelerator="h200-sxm")] == ["cal_4"]


def test_resolution_of_auto_none_ids_and_transfer(db_session: Session) -> None:
    repo = CalibrationRepository(db_session)
    catalog = CatalogService(db_session)
    h100, h200 = catalog.accelerator("h100-sxm"), catalog.accelerator("h200-sxm")
    unfitted = resolve_efficiency(db_session, "h100-sxm", "vllm", "auto")
    # No profile: the spec sheet with the named backend's engine priors (vLLM: 1000 µs a step).
    assert unfitted.calibration is None
    assert unfitted.params == with_engine_priors(spec_sheet_efficiency(h100), "vllm")
    assert unfitted.params.step_overhead_us == 1000.0
    assert unfitted.efficiency_prior == "measured_matmul"
    generic = resolve_efficiency(db_session, "h100-sxm", None, "none")
    assert generic.params == spec_sheet_efficiency(h100)
    trt = resolve_efficiency(db_session, "h100-sxm", "TensorRT-LLM", "none")
    assert trt.params.step_overhead_us == 200.0
    repo.add(profile("cal_plain", minutes=1, step_overhead_us=111.0), [])
    repo.add(profile("cal_trt", backend="trtllm", minutes=2, step_overhead_us=222.0), [])

    auto_vllm = resolve_efficiency(db_session, "h100-sxm", "vllm", "auto")
    assert auto_vllm.calibration is not None and auto_vllm.calibration["id"] == "cal_plain"
    assert auto_vllm.params.step_overhead_us == 111.0
    # Naming no backend never takes another backend's profile, however new (cal_trt is newer).
    auto_generic = resolve_efficiency(db_session, "h100-sxm", None, "auto")
    assert auto_generic.calibration is not None and auto_generic.calibration["id"] == "cal_plain"
    auto_trt = resolve_efficiency(db_session, "h100-sxm", "trtllm", "auto")
    assert auto_trt.calibration is not None and auto_trt.calibration["id"] == "cal_trt"
    assert auto_trt.params.step_overhead_us == 222.0 and not auto_trt.transferred
    none = resolve_efficiency(db_session, "h100-sxm", "trtllm", "none")
    assert none.calibration is None
    assert none.params == with_engine_priors(spec_sheet_efficiency(h100), "trtllm")

    moved = resolve_efficiency(db_session, "h200-sxm", None, "cal_trt")
    assert moved.calibration == {
        "id": "cal_trt",
        "name": "p",
        "backend": "trtllm",
        "transferred_from": "h100-sxm",
    }
    assert moved.transferred and moved.params.step_overhead_us == 222.0
    # Fitted fp8 compute efficiency (prior 0.71 here) moves by H200/H100 measured fp8 fraction.
    fp8_ratio = (1453.4 / h200.peak_tflops["fp8"]) / (1402.6 / h100.peak_tflops["fp8"])
    assert moved.params.gemm_compute_efficiency_fp8 == pytest.approx(0.71 * fp8_ratio)
    assert moved.params.gemm_compute_efficiency_bf16 == pytest.approx(0.80)  # same bf16 MAMF
    assert moved.efficiency_prior == "measured_matmul"
    h200_auto = resolve_efficiency(db_session, "h200-sxm", None, "auto")
    assert h200_auto.calibration is None and h200_auto.params == spec_sheet_efficiency(h200)
    with pytest.raises(NotFoundError):
        resolve_efficiency(db_session, "h100-sxm", None, "cal_missing")


def test_choose_applies_one_rule_in_python_and_in_the_freshness_column(
    db_session: Session,
) -> None:
    repo = CalibrationRepository(db_session)
    repo.add(profile("cal_plain_old", minutes=1), [])
    repo.add(profile("cal_plain", name="q", minutes=2), [])
    repo.add(profile("cal_vllm", backend="vllm", minutes=3), [])
    repo.add(profile("cal_h200", accelerator="h200-sxm", minutes=4), [])
    cases = {
        ("h100-sxm", "vllm", "auto"): "cal_vllm",  # that backend's newest
        ("h100-sxm", "trtllm", "auto"): "cal_plain",  # none of trtllm: newest without backend
        ("h100-sxm", None, "auto"): "cal_plain",  # never the newer vllm profile
        ("b200", "vllm", "auto"): None,
        ("b200", None, "cal_h200"): "cal_h200",  # an id, whatever accelerator it was fitted on
        ("h100-sxm", None, "cal_missing"): None,
    }
    for (accelerator, backend, calibration), expected in cases.items():
        assert _chosen(db_session, accelerator, backend, calibration) == expected


def _chosen(
    session: Session, accelerator: str, backend: str | None, calibration: str, model_id: str = ""
) -> str | None:
    """The profile ``choose`` picks, checked to be the one the freshness column picks."""
    row = CalibrationRepository(session).choose(
        accelerator, backend, calibration, model_id=model_id
    )
    chosen = row.id if row is not None else None
    choice = profile_choice(backend, calibration)
    params = {"accelerator_id": accelerator, "model_id": model_id, **choice.params}
    assert session.scalar(select(choice.column), params) == chosen
    return chosen


def test_auto_prefers_a_profile_fitted_on_the_model_then_on_its_kind(db_session: Session) -> None:
    """Among a backend's profiles, one fitted on the request's model beats a newer one; then
    one fitted on a model of the same kind (dense, MoE); the newest among equals."""
    repo = CalibrationRepository(db_session)
    repo.add(
        profile(
            "cal_llama",
            name="cal_llama",
            backend="vllm",
            minutes=1,
            models={"llama-3.1-8b": "dense"},
        ),
        [],
    )
    repo.add(
        profile(
            "cal_qwen", name="cal_qwen", backend="vllm", minutes=2, models={"qwen3-32b": "dense"}
        ),
        [],
    )
    repo.add(
        profile(
            "cal_oss", name="cal_oss", backend="vllm", minutes=3, models={"gpt-oss-120b": "moe"}
        ),
        [],
    )
    repo.add(
        profile("cal_kernels", name="cal_kernels", backend="vllm", minutes=4), []
    )  # kernel tables only
    repo.add(profile("cal_plain", minutes=5, models={"llama-3.1-8b": "dense"}), [])
    cases = {
        ("vllm", "llama-3.1-8b"): "cal_llama",  # fitted on it, though the oldest
        ("vllm", "qwen3-32b"): "cal_qwen",
        ("vllm", "llama-3.1-70b"): "cal_qwen",  # newest dense; the newer MoE one is passed over
        ("vllm", "qwen3-235b-a22b"): "cal_oss",  # MoE like gpt-oss-120b
        ("vllm", "deepseek-v3"): "cal_kernels",  # MLA: no fitted model of its kind, newest
        ("vllm", ""): "cal_kernels",
        ("sglang", "qwen3-32b"): "cal_plain",  # no sglang profile: the backendless one
        (None, "qwen3-32b"): "cal_plain",
    }
    for (backend, model_id), expected in cases.items():
        assert _chosen(db_session, "h100-sxm", backend, "auto", model_id) == expected, model_id
    # An id is an id, whatever the model.
    assert _chosen(db_session, "h100-sxm", "vllm", "cal_oss", "llama-3.1-8b") == "cal_oss"
    kinds = dict(
        db_session.execute(
            select(CalibrationProfileModelRow.profile_id, CalibrationProfileModelRow.model_kind)
        ).all()
    )
    assert kinds == {
        "cal_llama": "dense",
        "cal_qwen": "dense",
        "cal_oss": "moe",
        "cal_plain": "dense",
    }
