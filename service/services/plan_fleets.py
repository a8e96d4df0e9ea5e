"""Fleet sizing for plans with percentile targets: each ranked configuration's fleet is sized by
simulating the plan's traffic (``engine.traffic``), colocated or as prefill/decode pool groups,
and the configurations are re-ranked by fleet cost."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from service.engine.errors import EngineError
from service.engine.planning import PlanQuestion, PlanResult
from service.engine.traffic.disaggregation import PoolGroup
from service.engine.traffic.fleet import FleetSize, fewest_replicas_bound, size_fleet
from service.engine.traffic.model import Replica, SloTarget, TrafficSpec
from service.services.errors import FieldError
from service.services.traffic import (
    Deployment,
    TrafficRequest,
    capacity,
    percentiles_dict,
    pools_of,
    replica_for,
    scheduler_dict,
    traffic_spec,
)

if TYPE_CHECKING:
    from service.services.planning import PlanSpec

PLAN_REQUESTS = 300  # simulated requests per sizing run unless the plan's traffic says
MAX_SIZED_CONFIGURATIONS = 5  # exact fleets for the cheapest five; the rest are bounded out


def size_by_traffic(
    answer: dict[str, Any], result: PlanResult, question: PlanQuestion, spec: PlanSpec
) -> None:
    """Size each configuration's fleet from the percentile targets and re-rank by fleet cost.

    Branch and bound: a candidate cannot need fewer replicas than the rate over 1.25 × its
    closed-loop capacity, so candidates are sized in order of that lower bound on fleet cost
    (GPUs where unpriced) and sizing stops once the next bound exceeds the fifth fleet found;
    those left are listed in ``rejected`` as ``outranked`` with their bound.
    """
    assert spec.requests_per_s is not None
    rate = spec.requests_per_s
    base = spec.traffic or TrafficRequest(request_rate_per_s=rate, num_requests=PLAN_REQUESTS)
    request = dataclasses.replace(base, request_rate_per_s=rate, slo=spec.percentile_slo)
    rows = answer["configurations"]
    bounds: list[tuple[float, int, Deployment, Any, float]] = []
    for index, cfg in enumerate(result.configurations):
        c = cfg.candidate
        deployment = Deployment(
            c.model, c.accelerator, c.precision, c.parallelism, c.params, spec.backend
        )
        stream, targets, source = traffic_spec(
            deployment,
            request,
            input_tokens=question.input_tokens,
            output_tokens=question.output_tokens,
        )
        price = c.usd_per_gpu_hour
        try:
            if request.disaggregation:
                replica, _ = replica_for(deployment, stream)
                cap, replicas_bound = _group_bound(replica, stream, request, rate, spec.headroom)
            else:
                cap = capacity(deployment, stream)
                replicas_bound = fewest_replicas_bound(rate, spec.headroom, cap)
        except (EngineError, FieldError):
            continue
        per_replica = cfg.gpus_per_replica * (price if price is not None else math.inf)
        bound = replicas_bound * per_replica if price is not None else math.inf
        bounds.append((bound, index, deployment, (stream, targets, source), cap))
    bounds.sort(key=lambda b: (b[0], b[1]))
    sized: list[tuple[float, int, dict[str, Any]]] = []
    rejected = answer["rejected"]
    tokens_per_request = None
    for bound, index, deployment, (stream, targets, source), cap in bounds:
        row = rows[index]
        if len(sized) >= MAX_SIZED_CONFIGURATIONS and bound > sized[-1][0]:
            rejected.append(_outranked(row, bound, sized[-1][0]))
            continue
        chosen: dict[str, Any] | None = None
        colocated: FleetSize | None = None
        group_replicas = 1
        try:
            replica, _ = replica_for(deployment, stream)
            if request.disaggregation:
                fleet, chosen, group_replicas, cap = _size_groups(
                    replica, stream, targets, request, rate, spec.headroom, row
                )
                colocated = _size_colocated(replica, stream, targets, rate, spec.headroom)
                if chosen is not None:
                    chosen["tried"].append(_tried("colocated", colocated.replicas, row))
            else:
                fleet = size_fleet(
                    replica,
                    stream,
                    targets,
                    total_per_s=rate,
                    headroom=spec.headroom,
                    capacity_per_s=cap,
                )
        except (EngineError, FieldError) as exc:
            rejected.append(_traffic_rejection(row, "misses_slo", str(exc)))
            continue
        if fleet.replicas is None or fleet.result is None:
            reason = (
                f"percentile targets not met within {fleet.simulations} sizing runs "
                f"(last: {fleet.requests_per_s_per_replica:.3g} requests/s per replica)"
            )
            if colocated is not None and colocated.replicas is not None:
                reason += (
                    f"; by no pool ratio, while {max(colocated.replicas, spec.dp)} colocated "
                    "replicas meet them (the same plan without traffic.disaggregation)"
                )
            rejected.append(_traffic_rejection(row, "misses_slo", reason))
            continue
        tokens_per_request = stream.input_tokens.mean + stream.output_tokens.mean
        price = row["usd_per_gpu_hour"]
        # At least dp replicas: more than the sizing needs only lowers each one's load.
        replicas = max(fleet.replicas * group_replicas, spec.dp)
        gpus = replicas * row["gpus_per_replica"]
        fleet_usd = gpus * price if price is not None else None
        if chosen is not None and colocated is not None:
            chosen["colocated"] = _colocated_dict(colocated, spec.dp, gpus, fleet_usd, row)
        at = fleet.result
        row.update(
            replicas=replicas,
            gpus=gpus,
            usd_per_hour=fleet_usd,
            traffic={
                "requests_per_s_per_replica": fleet.requests_per_s_per_replica,
                "headroom": spec.headroom,
                "capacity_requests_per_s": cap,
                "scheduler": scheduler_dict(replica, source),
                "ttft_ms": percentiles_dict(at.ttft_ms),
                "tpot_ms": percentiles_dict(at.tpot_ms),
                "e2e_latency_ms": percentiles_dict(at.e2e_latency_ms),
                "usd_per_million_tokens_at_rate": (
                    fleet_usd / (rate * tokens_per_request * 3600.0) * 1e6
                    if fleet_usd is not None
                    else None
                ),
                "simulations": fleet.simulations,
                "disaggregation": chosen,
            },
        )
        cost = fleet_usd if fleet_usd is not None else math.inf
        sized.append((cost, gpus, row))
        sized.sort(key=lambda item: (item[0], item[1]))
    ranked = [row for _, _, row in sized]
    for rank, row in enumerate(ranked, 1):
        row["rank"] = rank
    answer["configurations"] = ranked
    answer["notes"].append(
        f"percentile targets {dict(spec.percentile_slo)}: fleets sized by simulating Poisson-"
        f"or-given traffic at {rate:g} requests/s with {spec.headroom:g} headroom, ranked by "
        "fleet cost (GPUs where unpriced)"
    )
    if request.disaggregation:
        names = ", ".join(f"{x}P{y}D" for x, y, _ in request.disaggregation)
        answer["notes"].append(
            "disaggregated pools: each configuration sized as groups of prefill + decode "
            f"replicas for the ratios {names}; its traffic.disaggregation says which ratio won "
            "(the cheapest fleet) and what the colocated fleet of the same configuration needs"
        )
        top = ranked[0]["traffic"]["disaggregation"] if ranked else None
        alone = top.get("colocated") if top else None
        if alone and alone["cheaper"]:
            answer["notes"].append(_colocated_note(ranked[0], alone))


def _group_bound(
    replica: Replica, stream: TrafficSpec, request: TrafficRequest, rate: float, headroom: float
) -> tuple[float, float]:
    """Return the best group capacity and the fewest replicas any ratio could need (bound)."""
    best_cap, fewest = 0.0, math.inf
    for ratio in request.disaggregation:
        pools = pools_of(ratio)
        cap = PoolGroup(replica, pools).capacity(stream)
        best_cap = max(best_cap, cap)
        fewest = min(fewest, fewest_replicas_bound(rate, headroom, cap) * pools.replicas)
    return best_cap, fewest


def _size_groups(
    replica: Replica,
    stream: TrafficSpec,
    targets: Sequence[SloTarget],
    request: TrafficRequest,
    rate: float,
    headroom: float,
    row: dict[str, Any],
) -> tuple[FleetSize, dict[str, Any] | None, int, float]:
    """Size the fleet as groups for each ratio; return the cheapest (GPUs where unpriced).

    Returns the winner's sizing, the ``disaggregation`` part of the answer, replicas per group
    and the group's capacity; a sizing with ``replicas`` None when no ratio meets the targets.
    """
    tried: list[dict[str, Any]] = []
    best: tuple[float, int, FleetSize, Any, float] | None = None
    last: FleetSize | None = None
    for ratio in request.disaggregation:
        pools = pools_of(ratio)
        group = PoolGroup(replica, pools)
        cap = group.capacity(stream)
        fleet = size_fleet(
            group, stream, targets, total_per_s=rate, headroom=headroom, capacity_per_s=cap
        )
        last = fleet
        entry = _tried(pools.name, fleet.replicas, row, pools.replicas)
        tried.append(entry)
        gpus, usd = entry["gpus"], entry["usd_per_hour"]
        if gpus is None:
            continue
        key = (usd if usd is not None else math.inf, gpus)
        if best is None or key < (best[0], best[1]):
            best = (key[0], gpus, fleet, pools, cap)
    if best is None:
        assert last is not None
        return last, None, 1, 0.0
    _, _, fleet, pools, cap = best
    chosen = {
        "prefill_replicas": pools.prefill_replicas,
        "decode_replicas": pools.decode_replicas,
        "groups": fleet.replicas,
        "tried": tried,
    }
    return fleet, chosen, pools.replicas, cap


def _size_colocated(
    replica: Replica,
    stream: TrafficSpec,
    targets: Sequence[SloTarget],
    rate: float,
    headroom: float,
) -> FleetSize:
    """Size the colocated fleet of the same configuration (each replica prefills and decodes).

    An engine error here (none is known: the pools ran the same replica) leaves the fleet
    unsized rather than rejecting the pools.
    """
    try:
        return size_fleet(
            replica,
            stream,
            targets,
            total_per_s=rate,
            headroom=headroom,
            capacity_per_s=replica.capacity(stream),
        )
    except EngineError:
        return FleetSize(None, math.nan, None, 0)


def _tried(name: str, count: int | None, row: dict[str, Any], per_group: int = 1) -> dict[str, Any]:
    """One entry of ``tried``: groups (replicas for colocated), GPUs and price of the fleet."""
    gpus = None if count is None else count * per_group * row["gpus_per_replica"]
    price = row["usd_per_gpu_hour"]
    usd = gpus * price if gpus is not None and price is not None else None
    return {"ratio": name, "groups": count, "gpus": gpus, "usd_per_hour": usd}


def _colocated_dict(
    fleet: FleetSize, dp: int, pools_gpus: int, pools_usd: float | None, row: dict[str, Any]
) -> dict[str, Any]:
    """Compare the colocated fleet (at least dp replicas, as the pools) with the chosen pools.

    Cheaper: fewer dollars per hour, or fewer GPUs where unpriced; the same accelerator prices
    both, so the two agree. ``saving_*``: the pools' figure less the colocated one.
    """
    if fleet.replicas is None:
        return {
            "replicas": None,
            "gpus": None,
            "usd_per_hour": None,
            "cheaper": False,
            "saving_gpus": None,
            "saving_usd_per_hour": None,
        }
    replicas = max(fleet.replicas, dp)
    gpus = replicas * row["gpus_per_replica"]
    price = row["usd_per_gpu_hour"]
    usd = gpus * price if price is not None else None
    saving_usd = pools_usd - usd if pools_usd is not None and usd is not None else None
    return {
        "replicas": replicas,
        "gpus": gpus,
        "usd_per_hour": usd,
        "cheaper": (saving_usd > 0.0) if saving_usd is not None else gpus < pools_gpus,
        "saving_gpus": pools_gpus - gpus,
        "saving_usd_per_hour": saving_usd,
    }


def _colocated_note(row: dict[str, Any], colocated: dict[str, Any]) -> str:
    """Say that the top configuration would cost less colocated, and by how much."""
    chosen = row["traffic"]["disaggregation"]
    name = f"{chosen['prefill_replicas']}P{chosen['decode_replicas']}D"
    if colocated["saving_usd_per_hour"] is not None:
        saved = colocated["saving_usd_per_hour"]
        by = f"{saved:.4g} $/h ({saved / row['usd_per_hour']:.0%}) less"
    else:
        by = f"{colocated['saving_gpus']} GPUs fewer"
    return (
        f"the top configuration ({row['model']} on {row['accelerator']}) would cost {by} "
        f"colocated: {colocated['replicas']} colocated replica(s), {colocated['gpus']} GPU(s), "
        f"meet the targets, against its {chosen['groups']} × {name} group(s), {row['gpus']} "
        "GPUs; the pools stay the answer, as asked; the same plan without "
        "traffic.disaggregation ranks colocated fleets"
    )


def _outranked(row: dict[str, Any], bound: float, tenth: float) -> dict[str, Any]:
    return _traffic_rejection(
        row,
        "outranked",
        f"not sized: its fleet costs at least {bound:.4g} $/h at the rate (capacity bound), "
        f"more than the {MAX_SIZED_CONFIGURATIONS}th sized fleet ({tenth:.4g} $/h)",
    )


def _traffic_rejection(row: dict[str, Any], code: str, reason: str) -> dict[str, Any]:
    return {
        "model": row["model"],
        "accelerator": row["accelerator"],
        "parallelism": row["parallelism"],
        "precision": row["precision"],
        "code": code,
        "reason": reason,
    }
