"""Scheduler defaults per serving engine, as each engine documents or sets them.

- vLLM (V1 engine, ``EngineArgs.get_batch_defaults`` in vllm/engine/arg_utils.py, OpenAI
  server context): max_num_batched_tokens 8192 and max_num_seqs 1024 on GPUs with at least
  70 GiB that are not A100; 2048 and 256 elsewhere. Chunked prefill is always on and the
  scheduler serves running requests (decodes) before new prompts: decode-first.
- SGLang (``ServerArgs`` in python/sglang/srt/server_args.py): chunked_prefill_size 2048
  below 35 GB of GPU memory, 8192 below 160 GB (A100, H100, H200), 16384 above (B200, MI300X);
  max_running_requests follows from the KV-cache pool; a new prefill batch runs before
  decoding resumes (mixed chunks are off by default): prefill-first.
- TensorRT-LLM (trtllm-serve ``--max_num_tokens``, default 8192; in-flight batching puts
  context chunks and generation tokens in one step): decode-first; at most 2048 running
  requests (``max_batch_size``, default 2048 in the LLM API's ``BaseLlmArgs``,
  tensorrt_llm/llmapi/llm_args.py, which trtllm-serve builds on), or fewer where the KV cache
  binds.
- No backend named: 8192 tokens per step, the KV-cache limit, decode-first.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.engine.backend_names import canonical_backend
from service.engine.hardware import Accelerator

GIB_BYTES = 2**30


@dataclass(frozen=True, slots=True)
class SchedulerDefaults:
    """A backend's default step budget, running cap (None: KV-cache limit) and policy."""

    max_num_batched_tokens: int
    max_running_requests: int | None
    scheduling: str
    source: str


def scheduler_defaults(backend: str | None, accelerator: Accelerator) -> SchedulerDefaults:
    """Return the scheduler knobs a backend uses by default on an accelerator."""
    name = canonical_backend(backend or "")
    memory_bytes = accelerator.memory_gb * 1e9
    if name == "vllm":
        large = memory_bytes >= 70 * GIB_BYTES and "a100" not in accelerator.id.lower()
        return SchedulerDefaults(
            8192 if large else 2048,
            1024 if large else 256,
            "decode_first",
            "vLLM EngineArgs.get_batch_defaults (OpenAI server)",
        )
    if name == "sglang":
        if memory_bytes < 35 * GIB_BYTES:
            chunk = 2048
        elif memory_bytes < 160 * GIB_BYTES:
            chunk = 8192
        else:
            chunk = 16384
        return SchedulerDefaults(chunk, None, "prefill_first", "SGLang ServerArgs defaults")
    if name == "trtllm":
        return SchedulerDefaults(
            8192, 2048, "decode_first", "trtllm-serve --max_num_tokens, LLM API max_batch_size"
        )
    return SchedulerDefaults(8192, None, "decode_first", "Ridgeline default")
