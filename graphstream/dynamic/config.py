"""``PGCConfig``: the parameters of PGC and of the workload model shared with the baselines."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ParameterError, finite_number, path_argument, whole_number
from ..partition.plan import MAX_PARTS


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
        # frozen: the checked values (numpy scalars as Python numbers) are set once, here
        # k within MAX_PARTS here as on the command line, where the Python API took any k
        whole = {"num_parts": ("-k", 1, MAX_PARTS), "rounds": ("rounds", 0, None),
                 "chunks_per_part": ("chunks_per_part", 1, None), "seed": ("seed", 0, None)}
        for field_name, (shown, minimum, maximum) in whole.items():
            object.__setattr__(self, field_name, whole_number(getattr(self, field_name), shown, minimum, maximum))
        numbers = {"spatial_weight": 0.0, "temporal_weight": 0.0, "balance": 1.0, "instance_cost": 0.0,
                   "edge_cost": 0.0}
        for field_name, minimum in numbers.items():
            object.__setattr__(self, field_name, finite_number(getattr(self, field_name), field_name, minimum))
        if self.chunk_cap is not None and finite_number(self.chunk_cap, "chunk_cap", 0.0) == 0:
            raise ParameterError(f"chunk_cap must be > 0, got {self.chunk_cap}")
        if self.memory_budget is not None:
            object.__setattr__(self, "memory_budget", whole_number(self.memory_budget, "memory_budget", 0))
        if self.cap_by not in ("volume", "instances"):
            raise ParameterError(f"cap_by must be volume or instances, got {self.cap_by!r}")
        if self.scratch_dir is not None:   # made when needed, not its parents: a FileNotFoundError then
            from .._atomic import check_scratch_parent
            scratch = path_argument(self.scratch_dir, "scratch_dir")
            check_scratch_parent(self.scratch_dir, "scratch_dir")
            object.__setattr__(self, "scratch_dir", scratch)
        if self.instance_cost + self.edge_cost == 0:
            raise ParameterError("instance_cost and edge_cost must not both be 0")
