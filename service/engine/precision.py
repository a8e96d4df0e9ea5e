"""Numeric precision of weights, activations and KV cache, and the compute dtype they imply."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from service.engine.backend_names import canonical_backend
from service.engine.errors import UnsupportedDtypeError
from service.engine.hardware import DTYPE_BYTES, DTYPES, Accelerator

if TYPE_CHECKING:
    from service.engine.shapes import ModelShape

# Weights dtype meaning "the model's shipped format" (``ModelShape.native_weights_dtype``).
NATIVE = "native"
WIDE_DTYPES = frozenset({"fp32", "tf32", "bf16", "fp16"})
# Activation dtypes a GEMM can take as input (int4 activations are not a serving format).
ACTIVATION_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
# Activations and KV-cache dtype meaning "what serving engines run these weights with on this
# accelerator" (``default_activations``, ``default_kv_cache``), resolved by
# ``Precision.resolved``.
AUTO_ACTIVATIONS = AUTO_KV_CACHE = "auto"
# Backends whose fp8 and fp4 checkpoints carry a quantized KV cache when the weights are
# quantized for them. TensorRT-LLM's cache dtype "auto" follows the checkpoint's
# kv_cache_quant_algo, and NVIDIA Model Optimizer, which makes its checkpoints, quantizes the
# cache to fp8 unless told not to (hf_ptq.py: --kv_cache_qformat defaults to fp8). vLLM's and
# SGLang's --kv-cache-dtype auto keep the model dtype (bf16) unless the checkpoint carries
# cache scales, which the usual llm-compressor fp8 checkpoints and the natively fp8/fp4
# checkpoints (DeepSeek-V3/R1, gpt-oss) do not.
QUANTIZED_CACHE_BACKENDS = frozenset({"trtllm"})
# SSM-state dtype meaning "the model dtype" (vLLM's default for --mamba-ssm-cache-dtype).
AUTO = "auto"
# Dtypes the recurrent SSM state of Mamba2 layers may be kept in: vLLM's MambaDType
# ("auto", "float32", "float16", "bfloat16"; CacheConfig.mamba_ssm_cache_dtype,
# https://docs.vllm.ai/en/latest/api/vllm/config/cache.html). No engine keeps it in 8 bits:
# the state is read, updated and written back at every step, so rounding errors accumulate.
SSM_STATE_DTYPES = (AUTO, "fp32", "fp16", "bf16")

# Quantisation scale bytes stored per weight element, for sub-16-bit weights:
# - fp8/int8: one fp32 scale per 128×128 block (DeepSeek-V3 fp8 checkpoints,
# docs/reference/notes.md B1);
#   per-channel or per-tensor scales are smaller still.
# - int4/fp4: one 8-bit scale per 32 weights (MXFP4 block size; AWQ/GPTQ with a 16-bit scale
#   per 128 weights and packed zeros is about the same, 0.02–0.03 B).
QUANT_SCALE_BYTES_PER_WEIGHT = {
    "fp8": 4.0 / (128 * 128),
    "int8": 4.0 / (128 * 128),
    "int4": 1.0 / 32,
    "fp4": 1.0 / 32,
}


@dataclass(frozen=True, slots=True)
class Precision:
    """Storage dtypes of weights, activations and KV cache.

    Compute dtype: equal weight and activation dtypes compute in that dtype (fp8×fp8 → fp8 math);
    16/32-bit activations with narrower weights are weight-only quantisation (dequantised in the
    kernel, so bf16 math); 8-bit activations with 4-bit weights (W4A8) compute in the 8-bit dtype;
    activations narrower than the weights compute in the weights' dtype.
    Quantisation covers the decoder-layer linear weights; embeddings, LM head, router and norms
    stay in 16-bit, as in vLLM/TensorRT-LLM fp8 and AWQ/GPTQ checkpoints.
    ``ssm_state`` is the dtype of the recurrent SSM state of Mamba2 layers (vLLM
    ``--mamba-ssm-cache-dtype``): ``auto`` keeps it in the model dtype (``unquantized_dtype``);
    the conv state always stays in the model dtype. Models without Mamba2 layers ignore it.
    """

    weights: str = "bf16"
    activations: str = "bf16"
    kv_cache: str = "bf16"
    ssm_state: str = AUTO

    def resolved(
        self, model: ModelShape, accelerator: Accelerator, backend: str | None = None
    ) -> Precision:
        """Return this precision with ``weights="native"`` replaced by the model's dtype (fp16
        for a bf16 model on a part without bf16),
        ``activations="auto"`` by what engines run those weights with on ``accelerator``, and
        ``kv_cache="auto"`` by the cache dtype ``backend`` (None: no engine named) keeps beside
        them."""
        weights = model.native_weights_dtype if self.weights == NATIVE else self.weights
        if self.weights == NATIVE and weights == "bf16":
            # engines load a bf16 checkpoint as fp16 on parts without bf16 (V100): same bytes
            weights = sixteen_bit_on(accelerator)
        activations = (
            default_activations(weights, accelerator, model.quantizes_only_experts(weights))
            if self.activations == AUTO_ACTIVATIONS
            else self.activations
        )
        if self.kv_cache == AUTO_KV_CACHE:
            requantized = self.weights not in (NATIVE, model.native_weights_dtype)
            engine = canonical_backend(backend or "")
            quantized_cache = requantized and engine in QUANTIZED_CACHE_BACKENDS
            kv_cache = default_kv_cache(activations, quantized_cache)
        else:
            kv_cache = self.kv_cache
        return replace(self, weights=weights, activations=activations, kv_cache=kv_cache)

    @property
    def weights_source(self) -> str:
        """Return ``native`` when the weights dtype still names the model's format."""
        return NATIVE if self.weights == NATIVE else "request"

    def validate(self) -> None:
        """Raise UnsupportedDtypeError for an unknown dtype name (resolve ``native`` first)."""
        for role, dtype in (("weights", self.weights), ("kv_cache", self.kv_cache)):
            if dtype not in DTYPES:
                raise UnsupportedDtypeError(
                    f"{role} dtype {dtype!r} is not one of {', '.join(DTYPES)}"
                )
        if self.activations not in ACTIVATION_DTYPES:
            raise UnsupportedDtypeError(
                f"activations dtype {self.activations!r} is not one of "
                f"{', '.join(ACTIVATION_DTYPES)}"
            )
        if self.ssm_state not in SSM_STATE_DTYPES:
            raise UnsupportedDtypeError(
                f"ssm_state dtype {self.ssm_state!r} is not one of {', '.join(SSM_STATE_DTYPES)}"
            )

    @property
    def compute_dtype(self) -> str:
        """Return the dtype the decoder GEMMs run in (see the class docstring)."""
        w, a = self.weights, self.activations
        if w == a or a in WIDE_DTYPES:
            return a
        return a if DTYPE_BYTES[w] <= DTYPE_BYTES[a] else w

    @property
    def unquantized_dtype(self) -> str:
        """Return the dtype of embeddings, LM head and router: 16-bit, or wider activations."""
        return self.activations if self.activations in WIDE_DTYPES else "bf16"

    @property
    def weight_bytes_per_element(self) -> float:
        """Return bytes per decoder-layer weight, quantisation scales included."""
        return DTYPE_BYTES[self.weights] + QUANT_SCALE_BYTES_PER_WEIGHT.get(self.weights, 0.0)

    @property
    def unquantized_bytes_per_element(self) -> float:
        """Return bytes per embedding/LM-head/router weight."""
        return DTYPE_BYTES[self.unquantized_dtype]

    @property
    def activation_bytes_per_element(self) -> float:
        return DTYPE_BYTES[self.activations]

    @property
    def kv_bytes_per_element(self) -> float:
        return DTYPE_BYTES[self.kv_cache]

    @property
    def ssm_state_dtype(self) -> str:
        """Return the dtype of the Mamba2 SSM state (``auto``: the model dtype, stored as fp32
        when that is tf32, a compute mode of fp32 values)."""
        if self.ssm_state != AUTO:
            return self.ssm_state
        return "fp32" if self.unquantized_dtype == "tf32" else self.unquantized_dtype

    @property
    def ssm_state_bytes_per_element(self) -> float:
        return DTYPE_BYTES[self.ssm_state_dtype]

    @property
    def communication_bytes_per_element(self) -> float:
        """Return bytes per element of TP all-reduces (at least 16-bit: reductions are not fp8)."""
        return max(DTYPE_BYTES[self.activations], 2.0)


def default_activations(weights: str, accelerator: Accelerator, experts_only: bool) -> str:
    """Activations dtype engines pair with ``weights`` on ``accelerator``.

    8- and 4-bit float weights compute in their own dtype where the accelerator has a tensor-core
    peak for it: vLLM, SGLang and TensorRT-LLM run fp8 checkpoints as W8A8 on Ada, Hopper and
    Blackwell, and NVFP4 checkpoints as W4A4 on Blackwell; elsewhere they run them weight-only
    (vLLM's Marlin kernels). A checkpoint that quantizes only its routed experts
    (``experts_only``: gpt-oss's MXFP4) is run weight-only, as are int8 and int4 weights
    (GPTQ, AWQ; W8A8 int8 must be asked for). Weight-only means 16-bit activations: bf16, or
    fp16 on parts without a bf16 peak (V100).
    """
    if weights in ("fp8", "fp4") and not experts_only and accelerator.peak_tflops.get(weights):
        return weights
    return sixteen_bit_on(accelerator)


def sixteen_bit_on(accelerator: Accelerator) -> str:
    """The 16-bit dtype ``accelerator`` computes in: bf16, or fp16 on parts without bf16."""
    try:
        return accelerator.sixteen_bit_dtype()
    except UnsupportedDtypeError:
        return "bf16"  # the check that the part has a peak for the compute dtype names the gap


def default_kv_cache(activations: str, quantized_cache: bool) -> str:
    """KV-cache dtype of a deployment that does not name one: fp8 beside fp8 or fp4
    activations where the checkpoint quantizes its cache (``quantized_cache``;
    ``QUANTIZED_CACHE_BACKENDS``), else the activations' own wide dtype, or bf16 beside
    narrower activations (the model dtype those engines keep the cache in)."""
    if quantized_cache and activations in ("fp8", "fp4"):
        return "fp8"
    return activations if activations in WIDE_DTYPES else "bf16"


BF16 = Precision()
