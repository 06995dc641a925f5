"""The consumer of graphstream's partitions: GNN training by model averaging.

Static graphs: :mod:`trainer.models` (GCN, GraphSAGE-mean, GAT),
:mod:`trainer.sampler` (uniform neighbour sampling), :mod:`trainer.data`
(parts onto devices), :mod:`trainer.averaging` (weighted model averaging),
:mod:`trainer.loop` (the averaging rounds every trainer runs),
:mod:`trainer.train` (static node classification), :mod:`trainer.launch`
(spawning workers), :mod:`trainer.evaluate`. Dynamic graphs:
:mod:`trainer.dynamic` (the entry point), :mod:`trainer.temporal_models`,
:mod:`trainer.transfer` (snapshots onto the device),
:mod:`trainer.link_prediction`. The command: :mod:`trainer.cli`
(``graphstream train``, registered through the ``graphstream.commands``
entry point; it builds its parser without torch).

Importing this package is light; ``TrainConfig`` and ``run_training`` import
torch when first used. graphstream itself never imports torch at module level.
"""
from __future__ import annotations

__all__ = ["TrainConfig", "run_training"]


def __getattr__(name: str):
    # lazy: `graphstream --help` imports trainer.cli, which must not pay for torch
    if name in __all__:
        from . import train
        return getattr(train, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
