"""The catalog's inter-node network figures (topology.scale_out_gb_s) reach the engine.

Each figure is Gb/s per NIC ÷ 8 = GB/s per direction per GPU (sources in the YAML files and
docs/reference/accelerators.md, N3–N12 and S27/S28).
"""

from __future__ import annotations

import pytest

from service.catalog_files import accelerator_from_record, load_accelerator_records
from service.engine.efficiency import EfficiencyParams
from service.engine.hardware import Accelerator
from service.engine.kernels import collective_cost


def _catalog() -> dict[str, Accelerator]:
    return {str(r["id"]): accelerator_from_record(r) for r in load_accelerator_records()}


@pytest.mark.parametrize(
    ("accelerator_id", "beyond_node", "gb_s"),
    [
        # 400 Gb/s ConnectX-7 per GPU: 400 / 8 = 50 GB/s.
        ("h200-sxm", 16, 50.0),
        ("b200", 16, 50.0),
        ("mi300x", 16, 50.0),
        ("mi325x", 16, 50.0),
        # 200 Gb/s ConnectX-6 HDR per GPU (DGX A100, Azure ND/NDm A100 v4): 200 / 8 = 25 GB/s.
        ("a100-sxm-40gb", 16, 25.0),
        ("a100-sxm-80gb", 16, 25.0),
        # GB200: beyond the 72-GPU NVLink rack, 400 Gb/s ConnectX-7 per GPU = 50 GB/s.
        ("gb200", 144, 50.0),
        # MI355X: the 50 GB/s NIC is in its notes but not seeded (its scale-up rate is
        # unknown), so every peer uses the PCIe fallback (32).
        ("mi355x", 16, 32.0),
        # TPU v5e: 2 x 100 Gbps per 8-chip host = 25 Gbps per chip = 3.125 GB/s; a collective
        # beyond the 256-chip ICI pod leaves over DCN.
        ("tpu-v5e", 512, 3.125),
        # TPU v5p: DCN 50 Gbps per chip = 6.25 GB/s beyond the 6,144-chip largest slice.
        ("tpu-v5p", 12288, 6.25),
        # TPU v6e: DCN per chip not published, so beyond the pod it falls back to PCIe (32).
        ("tpu-v6e", 512, 32.0),
    ],
)
def test_network_per_gpu_beyond_the_node(
    accelerator_id: str, beyond_node: int, gb_s: float
) -> None:
    assert _catalog()[accelerator_id].link_bytes_s(beyond_node) == pytest.approx(gb_s * 1e9)


@pytest.mark.parametrize(
    ("accelerator_id", "peers", "gb_s"),
    [
        ("b200", 8, 900.0),  # NVLink 5 within the HGX board
        ("gb200", 72, 900.0),  # NVLink 5 across the whole NVL72 rack
        ("a100-sxm-80gb", 8, 300.0),  # NVLink 3 within the HGX board
        ("mi300x", 2, 64.0),  # one xGMI link to the peer
        ("mi355x", 8, 32.0),  # scale-up rate unknown: PCIe fallback inside the node
        ("tpu-v5e", 256, 200.0),  # the whole pod on ICI
        ("tpu-v5p", 6144, 600.0),  # the largest slice on ICI
        ("tpu-v6e", 256, 400.0),
    ],
)
def test_peers_inside_the_domain_keep_the_scale_up_link(
    accelerator_id: str, peers: int, gb_s: float
) -> None:
    assert _catalog()[accelerator_id].link_bytes_s(peers) == pytest.approx(gb_s * 1e9)


def test_b200_tp16_decode_all_reduce_crosses_the_network() -> None:
    """TP=16 on B200 spans two 8-GPU nodes: the all-reduce of a decode step runs at 50 GB/s.

    Message M = 64 tokens x 8,192 hidden x 2 B = 1,048,576 B. Default params: bandwidth
    efficiency 0.85 -> 42.5e9 B/s; one-shot L = 6.3 us; ring L = 5 us + 0.8 us per hop.
      one-shot: 6.3e-6 + 15·M / 42.5e9                 = 376.39 us
      two-shot: 2·6.3e-6 + 2·15/16·M / 42.5e9          = 12.6 + 46.26 = 58.86 us  (cheapest)
      ring:     (5 + 30·0.8)e-6 + 2·15/16·M / 42.5e9   = 29 + 46.26 = 75.26 us
    TP=8 inside one node (NVLink 900 -> 765e9 B/s) two-shot: 12.6 + 1.75·M / 765e9 = 15.00 us.
    """
    b200 = _catalog()["b200"]
    params = EfficiencyParams()
    message = 64 * 8192 * 2
    across = collective_cost("all_reduce", 16, message, accelerator=b200, params=params)
    inside = collective_cost("all_reduce", 8, message, accelerator=b200, params=params)
    assert float(across.time_s) == pytest.approx(58.86e-6, rel=1e-3)
    assert float(inside.time_s) == pytest.approx(15.00e-6, rel=1e-3)


def test_a100_tp16_decode_all_reduce_crosses_hdr_infiniband() -> None:
    """TP=16 on A100 SXM spans two DGX A100 nodes: the all-reduce runs at 25 GB/s per GPU.

    M = 64 tokens x 8,192 hidden x 2 B = 1,048,576 B; 25e9 x 0.85 = 21.25e9 B/s.
      one-shot: 6.3e-6 + 15·M / 21.25e9                 = 746.47 us
      two-shot: 2·6.3e-6 + 2·15/16·M / 21.25e9          = 12.6 + 92.52 = 105.12 us  (cheapest)
      ring:     (5 + 30·0.8)e-6 + 2·15/16·M / 21.25e9   = 29 + 92.52 = 121.52 us
    """
    a100 = _catalog()["a100-sxm-80gb"]
    message = 64 * 8192 * 2
    cost = collective_cost("all_reduce", 16, message, accelerator=a100, params=EfficiencyParams())
    assert float(cost.time_s) == pytest.approx(105.12e-6, rel=1e-3)


def test_gb200_wide_ep_all_to_all_beyond_the_rack() -> None:
    """EP=144 over two NVL72 racks: the dispatch all-to-all leaves the rack at 50 GB/s.

    M = 16 MiB = 16,777,216 B; ring all-to-all moves (N−1)/N·M with N−1 hops.
      EP 144: 143/144·M / (50e9 x 0.85) + (5 + 143·0.8) us = 392.02 + 119.4 = 511.42 us
      EP 72:  71/72·M / (900e9 x 0.85) + (5 + 71·0.8) us   = 21.63 + 61.8  = 83.43 us
    """
    gb200 = _catalog()["gb200"]
    params = EfficiencyParams()
    message = 16 * 2**20
    across = collective_cost("alltoall", 144, message, accelerator=gb200, params=params)
    inside = collective_cost("alltoall", 72, message, accelerator=gb200, params=params)
    assert float(across.time_s) == pytest.approx(511.42e-6, rel=1e-3)
    assert float(inside.time_s) == pytest.approx(83.43e-6, rel=1e-3)
