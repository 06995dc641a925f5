"""graphstream train PARTS_DIR --model gcn|sage|gat|tgcn|evolvegcn [--workers Q] ...: model averaging over parts.

Static models train node classification on a partitioned dataset
(``graphstream partition ... --out DIR --nodes NODE_DIR``); dynamic models
(``tgcn``, ``evolvegcn``) train temporal link prediction on per-part snapshot
sequences (``graphstream partition SNAPSHOTS.zarr --algo pgc --out DIR``).

graphstream finds this command through the ``graphstream.commands`` entry
point (the core never imports the trainer) and, as for its own commands,
adds the subparser with the shared ``--json`` parent, then calls
``configure``; ``HELP`` is its help line. The parser is built without torch;
torch is imported only when the command runs. Flags become a
:class:`trainer.train.TrainConfig` or :class:`trainer.dynamic.DynamicConfig`
here, the only place the trainer sees argparse.
"""
from __future__ import annotations

from graphstream.commands.flags import add_threads

STATIC_MODELS = ("gcn", "sage", "gat")
DYNAMIC_MODELS = ("tgcn", "evolvegcn")


HELP = "train a GNN on a partitioned dataset by model averaging"


def configure(p) -> None:
    p.add_argument("parts", help="partitioned dataset folder (manifest.json + part-NNNNN/)")
    p.add_argument("--model", default="gcn", choices=STATIC_MODELS + DYNAMIC_MODELS,
                   help="gcn, sage, gat (node classification) or tgcn, evolvegcn (temporal links)")
    p.add_argument("--workers", type=int, default=1, help="worker processes, one per GPU (default 1)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--sync-every", type=int, default=1, help="epochs between model averaging (default 1)")
    p.add_argument("--epochs", type=int, default=None, help="epochs (default 200 static, 50 dynamic)")
    p.add_argument("--mini-batch", action="store_true", help="sampled mini-batches instead of full batch")
    p.add_argument("--fanout", default="25,10", help="neighbours sampled per hop, seeds first (25,10)")
    p.add_argument("--batch-size", type=int, default=512, help="seed nodes per mini-batch (512)")
    p.add_argument("--hidden", type=int, default=None, help="hidden size (default 256 static, 64 dynamic)")
    p.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (0.01)")
    p.add_argument("--dropout", type=float, default=0.5, help="dropout (0.5; static models)")
    p.add_argument("--weight-decay", type=float, default=5e-4, help="L2 weight decay (5e-4)")
    p.add_argument("--proximal", type=float, default=None,
                   help="strength of the pull of local models towards the last average (FedProx, per part: "
                        "mu = PROXIMAL / training nodes of the part; default 3, 0 = plain averaging; static models)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights, dropout and sampling (0)")
    p.add_argument("--centralized", action="store_true",
                   help="train the same model on the whole graph (one process) for comparison")
    p.add_argument("--checkpoint", default=None, help="checkpoint file (best-validation weights in PATH.best)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    add_threads(p, "torch CPU threads per worker (cores / workers)")
    p.add_argument("--master-addr", default=None, metavar="ADDR",
                   help="address of worker 0's host that every worker reaches, needed for workers on several "
                        "hosts (torchrun --nnodes N): the rendezvous and collectives then listen on the network. "
                        "Default: every worker on this machine, everything bound to 127.0.0.1")
    p.add_argument("--transfer", default="delta", choices=("full", "delta"),
                   help="dynamic models: ship full snapshots or keyframe + deltas to the device (delta)")
    p.set_defaults(run=run)


def _default(value, default):
    """The flag's value, or the model family's default when it was not given (0 is a value)."""
    return default if value is None else value


def run(args) -> dict:
    from graphstream.errors import ParameterError
    try:
        from .sampler import parse_fanouts
        from .train import PROXIMAL, TrainConfig, run_training
    except ImportError as exc:  # torch missing: the train extra
        raise ParameterError(f"graphstream train needs torch (pip install 'graphstream[train]'): {exc}") from exc
    if args.model in DYNAMIC_MODELS:
        from .dynamic import DynamicConfig, run_dynamic_training
        # an explicit 0 is checked by the config, never replaced by the default
        config = DynamicConfig(model=args.model, hidden=_default(args.hidden, 64), epochs=_default(args.epochs, 50),
                               lr=args.lr, seed=args.seed, device=args.device, transfer=args.transfer,
                               sync_every=args.sync_every)
        return run_dynamic_training(args.parts, config, workers=args.workers, centralized=args.centralized,
                                    threads=args.threads, master_addr=args.master_addr)
    try:
        fanouts = parse_fanouts(args.fanout)
    except ValueError as exc:
        raise ParameterError(f"--fanout: {exc}") from exc
    config = TrainConfig(model=args.model, hidden=_default(args.hidden, 256), epochs=_default(args.epochs, 200),
                         sync_every=args.sync_every, mini_batch=args.mini_batch, fanouts=fanouts,
                         batch_size=args.batch_size, lr=args.lr, dropout=args.dropout,
                         weight_decay=args.weight_decay, seed=args.seed, device=args.device,
                         checkpoint=args.checkpoint, resume=args.resume,
                         proximal=PROXIMAL if args.proximal is None else args.proximal)
    result = run_training(args.parts, config, workers=args.workers, centralized=args.centralized,
                          threads=args.threads, master_addr=args.master_addr)
    if not args.json:  # the per-epoch lists are for --json consumers
        result.pop("losses", None)
        result.pop("history", None)
    return result


__all__ = ["DYNAMIC_MODELS", "HELP", "STATIC_MODELS", "configure", "run"]
