"""Fixtures for engine tests (values typed in from the reference tables; see engine_refs)."""

from __future__ import annotations

import pytest
from engine_refs import deepseek_v3, llama_31_8b, llama_31_70b, make_h100, make_h200

from service.engine.hardware import Accelerator
from service.engine.shapes import ModelShape


@pytest.fixture
def h100() -> Accelerator:
    return make_h100()


@pytest.fixture
def h200() -> Accelerator:
    return make_h200()


@pytest.fixture
def llama8b() -> ModelShape:
    return llama_31_8b()


@pytest.fixture
def llama70b() -> ModelShape:
    return llama_31_70b()


@pytest.fixture
def dsv3() -> ModelShape:
    return deepseek_v3()
