"""``PGCConfig``: the parameters of PGC and of the workload model shared with the baselines."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError


@dataclass(frozen=True, slots=True)
class PGCConfig:
    """Parameters of PGC (and of the workload model shared with the baselines)."""
    num_parts: int
    spatial_weight: float = 1.0
    temporal_weight: float = 2.0
    rounds: int = 30
    cap_by: str = "volume"          # "volume" (workload units) or "instances"
    chunk_cap: float | None = None  # default: total / (num_parts * chunks_per_part)
    chunks_per_part: int = 2
    balance: float = 1.05           # hard per-part cap: balance * total / num_parts
    instance_cost: float = 1.0
    edge_cost: float = 1.0
    seed: int = 0
    memory_budget: int | None = None  # bytes of O(instances) arrays kept in RAM
    scratch_dir: str | None = None

    def __post_init__(self) -> None:
        if self.num_parts is None:
            raise ParameterError("give -k K (number of parts) to partition a snapshot store")
        checks = [
            (self.num_parts >= 1, f"-k must be >= 1, got {self.num_parts}"),
            (self.spatial_weight >= 0 and self.temporal_weight >= 0,
             f"edge weights must be >= 0, got w_s={self.spatial_weight}, w_t={self.temporal_weight}"),
            (self.rounds >= 0, f"rounds must be >= 0, got {self.rounds}"),
            (self.cap_by in ("volume", "instances"), f"cap_by must be volume or instances, got {self.cap_by!r}"),
            (self.chunk_cap is None or self.chunk_cap > 0, f"chunk cap must be > 0, got {self.chunk_cap}"),
            (self.chunks_per_part >= 1, f"chunks_per_part must be >= 1, got {self.chunks_per_part}"),
            (self.balance >= 1.0, f"balance must be >= 1.0, got {self.balance}"),
            (self.instance_cost >= 0 and self.edge_cost >= 0 and self.instance_cost + self.edge_cost > 0,
             "instance_cost and edge_cost must be >= 0 and not both 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ParameterError(message)



