"""The names of serving engines (backends), in one spelling.

Requests, uploaded runs and stored profiles may write an engine as its users do
(``TensorRT-LLM``, ``trt-llm``, ``SGLang``); the priors, scheduler defaults and profile choice
compare one canonical name: lower case, with the aliases below.
"""

from __future__ import annotations

from collections.abc import Mapping

# Spellings of the engines' names in harness files and requests, to the names used here.
ALIASES: Mapping[str, str] = {
    "tensorrt-llm": "trtllm",
    "tensorrt_llm": "trtllm",
    "tensorrtllm": "trtllm",
    "trt-llm": "trtllm",
}


def canonical_backend(name: str) -> str:
    """The one spelling of a backend's name ("" stays "": no backend)."""
    key = name.strip().lower()
    return ALIASES.get(key, key)
