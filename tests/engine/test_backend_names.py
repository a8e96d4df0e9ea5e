"""One spelling per serving engine: priors, scheduler defaults and profile choice agree."""

from __future__ import annotations

import pytest

from service.engine.backend_names import canonical_backend
from service.engine.calibration.priors import prior_backend, priors_for
from service.engine.hardware import Accelerator
from service.engine.traffic.backends import scheduler_defaults


@pytest.mark.parametrize(
    ("written", "name"),
    [("TensorRT-LLM", "trtllm"), ("trt-llm", "trtllm"), ("tensorrt_llm", "trtllm"),
     ("vLLM", "vllm"), (" SGLang ", "sglang"), ("", ""), ("my-engine", "my-engine")],
)  # fmt: skip
def test_canonical_backend(written: str, name: str) -> None:
    assert canonical_backend(written) == name


def test_every_spelling_gets_the_engines_priors_and_defaults(h100: Accelerator) -> None:
    for written in ("TensorRT-LLM", "trt-llm", "TRTLLM"):
        assert priors_for(written) == priors_for("trtllm")
        assert scheduler_defaults(written, h100) == scheduler_defaults("trtllm", h100)
    # runs spelled two ways are one engine's runs
    assert prior_backend(["TensorRT-LLM", "trtllm"]) == "trtllm"
