"""The consumer of graphstream's partitions: GNN training by model averaging.

Static graphs: :mod:`trainer.models` (GCN, GraphSAGE-mean, GAT),
:mod:`trainer.sampler` (uniform neighbour sampling), :mod:`trainer.data`
(parts onto devices), :mod:`trainer.averaging` (weighted model averaging),
:mod:`trainer.train` (the worker loop), :mod:`trainer.launch` (spawning
workers), :mod:`trainer.evaluate`. Dynamic graphs: :mod:`trainer.dynamic`.
Importing this package imports torch; graphstream itself never does at
module level.
"""
from .train import TrainConfig, run_training

__all__ = ["TrainConfig", "run_training"]
