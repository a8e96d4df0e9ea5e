"""Accelerator facts, in one place: dense peaks per dtype, HBM capacity, links, ridge point.

Every other engine module asks these functions and properties; none keeps its own copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from service.engine.errors import UnsupportedDtypeError

# Every dtype name the API accepts, in order of decreasing width.
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")

# Storage bytes per element. int4/fp4 pack two values per byte.
DTYPE_BYTES: Mapping[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}

# Host link when a part names none: PCIe Gen4 x16 ≈ 32 GB/s per direction (NVIDIA prints
# "64 GB/s" bidirectional, e.g. https://www.nvidia.com/en-us/data-center/a100/).
PCIE_FALLBACK_GB_S = 32.0
# GPUs one node holds when the catalog says nothing (HGX/DGX, MI300X platforms: 8).
DEFAULT_GPUS_PER_NODE = 8
# 16-bit dtypes in order of preference for math that runs in "a 16-bit type" (attention).
SIXTEEN_BIT_DTYPES: tuple[str, ...] = ("bf16", "fp16")


@dataclass(frozen=True, slots=True)
class Topology:
    """Where an accelerator's peers are and how fast each kind of link is (per direction).

    - ``scale_up_domain_gpus``: GPUs reached over the scale-up link (NVLink/NVSwitch, xGMI,
      bridges): 2 for a 2-GPU bridge, 8 for an HGX board, 72 for an NVL72 rack; 1 without one.
    - ``scale_up_per_peer_gb_s``: a switchless full mesh (AMD xGMI) gives each peer one link of
      this rate, so a collective over N GPUs uses N − 1 links; 0 means a switch (any peer at the
      full ``interconnect_gb_s``).
    - ``host_link_gb_s``: PCIe per direction, for peers in the node outside the domain.
    - ``gpus_per_node`` and ``scale_out_gb_s``: the inter-node network per GPU (0: unknown).
    """

    scale_up_domain_gpus: int
    scale_up_per_peer_gb_s: float = 0.0
    host_link_gb_s: float = PCIE_FALLBACK_GB_S
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    scale_out_gb_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator (per device/chip), with dense peak compute per dtype in TFLOP/s.

    ``memory_gb`` is decimal (1 GB = 1e9 bytes), as the catalog stores it.
    """

    id: str
    vendor: str
    name: str
    memory_gb: float
    memory_bandwidth_gb_s: float
    peak_tflops: Mapping[str, float]
    interconnect_gb_s: float = 0.0  # scale-up link bandwidth per device, per direction
    tdp_w: float = 0.0
    price_usd_per_hour: float | None = None
    memory_type: str = ""
    extra: Mapping[str, object] = field(default_factory=dict)
    # Measured max achievable matmul TFLOP/s per dtype (MAMF); may be empty.
    measured_matmul_tflops: Mapping[str, float] = field(default_factory=dict)
    # Best measured DRAM read bandwidth, GB/s (a streaming benchmark); None when not measured.
    measured_memory_bandwidth_gb_s: float | None = None
    # Links by where the peers are; None: derived from ``interconnect_gb_s`` (see ``topology_of``).
    topology: Topology | None = None

    @property
    def memory_bytes(self) -> float:
        """Return device memory in bytes: the decimal GB figure × 1e9 (no GiB conversion)."""
        return self.memory_gb * 1e9

    @property
    def memory_bandwidth_bytes_s(self) -> float:
        return self.memory_bandwidth_gb_s * 1e9

    def peak_flops_s(self, dtype: str) -> float:
        """Return dense peak FLOP/s for a compute dtype, or raise UnsupportedDtypeError.

        No silent fallback between dtypes: a part without bf16 (V100) refuses bf16, as serving
        engines do, rather than running it at the fp16 rate.
        """
        tflops = self.peak_tflops.get(dtype)
        if not tflops:
            listed = ", ".join(d for d in DTYPES if self.peak_tflops.get(d))
            raise UnsupportedDtypeError(
                f"accelerator {self.id!r} has no {dtype} peak compute figure "
                f"(it lists {listed or 'none'})"
            )
        return float(tflops) * 1e12

    def sixteen_bit_dtype(self) -> str:
        """Return the 16-bit dtype this part computes in (bf16, else fp16 as on V100)."""
        for dtype in SIXTEEN_BIT_DTYPES:
            if self.peak_tflops.get(dtype):
                return dtype
        raise UnsupportedDtypeError(f"accelerator {self.id!r} has no bf16 or fp16 peak figure")

    def measured_matmul_fraction(self, dtype: str) -> float | None:
        """Return measured best-GEMM TFLOP/s over dense peak for a dtype, or None if unmeasured."""
        measured = self.measured_matmul_tflops.get(dtype)
        peak = self.peak_tflops.get(dtype)
        if measured is None or peak is None or not peak > 0:
            return None
        return measured / peak

    def measured_bandwidth_fraction(self) -> float | None:
        """Return measured DRAM read bandwidth over the spec sheet's, or None if unmeasured."""
        measured = self.measured_memory_bandwidth_gb_s
        if measured is None or not self.memory_bandwidth_gb_s > 0:
            return None
        return measured / self.memory_bandwidth_gb_s

    def ridge_point_flop_per_byte(self, dtype: str) -> float:
        """Peak FLOP/s over HBM bandwidth: the intensity above which a kernel is compute-bound."""
        return self.peak_flops_s(dtype) / self.memory_bandwidth_bytes_s

    @property
    def links(self) -> Topology:
        """Return the topology, derived from ``interconnect_gb_s`` when none is stored."""
        return topology_of(self)

    def send_bytes_s(self, first: int, second: int) -> float:
        """Return the per-direction rate of a send between two GPUs of one layout, numbered in
        placement order (scale-up domains filled in turn, then nodes): the scale-up link when
        both are in one domain, the host link when in one node, else the network per GPU."""
        top = self.links
        domain = max(top.scale_up_domain_gpus, 1)
        node = max(top.gpus_per_node, domain)
        if first // domain == second // domain:
            return self.link_bytes_s(2)
        if first // node == second // node:
            return self.link_bytes_s(domain + 1)  # beyond the domain, within the node
        return self.link_bytes_s(node + 1)  # beyond the node

    def link_bytes_s(self, peers: int = 2) -> float:
        """Return the per-direction bandwidth per GPU of a collective over ``peers`` GPUs.

        Within the scale-up domain: the scale-up rate (a switchless mesh: (N − 1) links of the
        per-peer rate, at most the aggregate). Beyond it within a node: the host link (PCIe).
        Beyond the node: the inter-node network per GPU (PCIe fallback when unknown).
        """
        top = self.links
        if peers <= top.scale_up_domain_gpus and self.interconnect_gb_s > 0:
            gb_s = self.interconnect_gb_s
            if top.scale_up_per_peer_gb_s > 0:
                gb_s = min(gb_s, (max(peers, 2) - 1) * top.scale_up_per_peer_gb_s)
        elif peers <= max(top.gpus_per_node, top.scale_up_domain_gpus):
            gb_s = top.host_link_gb_s
        else:
            gb_s = top.scale_out_gb_s if top.scale_out_gb_s > 0 else top.host_link_gb_s
        return gb_s * 1e9


def topology_of(accelerator: Accelerator) -> Topology:
    """Return the stored topology, or one derived from the scale-up figure alone.

    Derived: with a scale-up link, an 8-GPU domain (HGX-style boards); without one, each GPU is
    its own domain and peers are reached over the PCIe fallback.
    """
    if accelerator.topology is not None:
        return accelerator.topology
    domain = DEFAULT_GPUS_PER_NODE if accelerator.interconnect_gb_s > 0 else 1
    return Topology(scale_up_domain_gpus=domain)


TOPOLOGY_FIELDS: tuple[str, ...] = (
    "scale_up_domain_gpus",
    "scale_up_per_peer_gb_s",
    "host_link_gb_s",
    "gpus_per_node",
    "scale_out_gb_s",
)


def topology_from_mapping(values: Mapping[str, object] | None) -> Topology | None:
    """Build a Topology from stored fields (None: none stored); absent fields keep defaults.

    Raises ValueError naming a field that is unknown or out of range.
    """
    if values is None:
        return None
    unknown = set(values) - set(TOPOLOGY_FIELDS)
    if unknown:
        raise ValueError(f"unknown topology fields: {', '.join(sorted(unknown))}")
    if "scale_up_domain_gpus" not in values:
        raise ValueError("topology.scale_up_domain_gpus is required")
    numbers: dict[str, float] = {}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ValueError(f"topology.{name} must be a non-negative number")
        numbers[name] = float(value)
    for name in ("scale_up_domain_gpus", "gpus_per_node"):
        if name in numbers and (numbers[name] < 1 or numbers[name] != int(numbers[name])):
            raise ValueError(f"topology.{name} must be a positive integer")
    return Topology(
        scale_up_domain_gpus=int(numbers["scale_up_domain_gpus"]),
        scale_up_per_peer_gb_s=numbers.get("scale_up_per_peer_gb_s", 0.0),
        host_link_gb_s=numbers.get("host_link_gb_s", PCIE_FALLBACK_GB_S) or PCIE_FALLBACK_GB_S,
        gpus_per_node=int(numbers.get("gpus_per_node", DEFAULT_GPUS_PER_NODE)),
        scale_out_gb_s=numbers.get("scale_out_gb_s", 0.0),
    )
