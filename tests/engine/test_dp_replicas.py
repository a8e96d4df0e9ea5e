"""Data-parallel replicas: GPUs and price scale with dp; bad counts name dp."""

from __future__ import annotations

import pytest

from service.engine.errors import InvalidLayoutError
from service.engine.replicas import MAX_REPLICAS, check_replicas, fleet_gpus, fleet_usd_per_hour


def test_fleet_of_dp_replicas() -> None:
    # 3 replicas of TP8: 24 GPUs at 3 × one replica's $/h.
    assert fleet_gpus(8, 3) == 24
    assert fleet_usd_per_hour(8 * 2.5, 3) == 60.0
    assert fleet_usd_per_hour(None, 3) is None


@pytest.mark.parametrize("dp", [0, -2, MAX_REPLICAS + 1, 2.0, True])
def test_bad_replica_counts_name_dp(dp: object) -> None:
    with pytest.raises(InvalidLayoutError, match=r"^dp must be"):
        check_replicas(dp)  # type: ignore[arg-type]
