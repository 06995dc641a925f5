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

import argparse

from graphstream.commands.flags import add_threads

STATIC_MODELS = ("gcn", "sage", "gat")
DYNAMIC_MODELS = ("tgcn", "evolvegcn")


HELP = "train a GNN on a partitioned dataset by model averaging"

# What `graphstream train` prints without --json or --verbose (graphstream.cli looks it up), in this
# order, those the run reported: the model's scores first, then how it was trained and where it went.
_HEADLINE = ("model", "mode", "metric", "test_roc_auc", "val_roc_auc", "test_accuracy", "val_accuracy",
             "test_macro_f1", "val_macro_f1", "test_auc", "val_auc", "best_epoch", "selected_by",
             "evaluated_on", "epochs", "num_parts", "workers", "sync_every", "seconds", "peak_rss_bytes",
             "checkpoint", "best_checkpoint", "note")


def SUMMARY(result: dict) -> tuple[str, ...]:  # noqa: N802 - the name graphstream.cli looks up
    # a dynamic run's test_accuracy / val_accuracy are --json's deprecated aliases of its ROC-AUC: printed
    # as "val_accuracy: 0.7752" beside val_auc, they read as an accuracy
    aliases = ("test_accuracy", "val_accuracy") if "test_auc" in result else ()
    return tuple(k for k in _HEADLINE if k in result and k not in aliases)


def configure(p) -> None:
    p.add_argument("parts", help="partitioned dataset folder (manifest.json + part-NNNNN/)")
    p.add_argument("--model", default="gcn", choices=STATIC_MODELS + DYNAMIC_MODELS,
                   help="gcn, sage, gat (node classification) or tgcn, evolvegcn (temporal links)")
    p.add_argument("--workers", type=int, default=1, metavar="Q",
                   help="worker processes; parts are dealt to them cyclically; with cuda one GPU each (default 1)")
    p.add_argument("--device", default="cpu", metavar="{cpu,cuda,cuda:N}",
                   help="cpu, cuda (worker r on GPU r mod the GPU count) or cuda:N (every worker on GPU N) "
                        "(default cpu)")
    p.add_argument("--sync-every", type=int, default=1, metavar="E",
                   help="epochs each part trains locally between two model averages (default 1)")
    p.add_argument("--epochs", type=int, default=None, metavar="N", help="epochs (default 200 static, 50 dynamic)")
    p.add_argument("--mini-batch", action="store_true",
                   help="static models: sampled mini-batches (--fanout, --batch-size) instead of full batch")
    p.add_argument("--fanout", default=None, metavar="F1,F2",
                   help="with --mini-batch: neighbours sampled per hop, the seeds' hop first, one per layer "
                        "(default 25,10)")
    p.add_argument("--batch-size", type=int, default=None, metavar="B",
                   help="with --mini-batch: seed (training) nodes per mini-batch (default 512)")
    p.add_argument("--hidden", type=int, default=None, metavar="H",
                   help="hidden size (default 256 static, 64 dynamic; gat: a multiple of its 4 heads)")
    p.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    p.add_argument("--dropout", type=float, default=None, help="static models: dropout probability (default 0.5)")
    p.add_argument("--weight-decay", type=float, default=None, metavar="WD",
                   help="static models: L2 weight decay (default 5e-4)")
    p.add_argument("--proximal", type=float, default=None,
                   help="static models: strength of the pull of local models towards the last average (FedProx, "
                        "per part: mu = PROXIMAL / training nodes of the part; 0 = none; default 0 with the drift "
                        "correction, 3 without it or with --mini-batch)")
    p.add_argument("--drift-correction", action=argparse.BooleanOptionalAction, default=None,
                   help="static models, full batch: correct every local gradient by the parts' mean gradient at "
                        "the last average minus the part's own (SCAFFOLD control variates; one more all_reduce "
                        "per round), so local models follow the whole graph between averages (the default; "
                        "docs/training.md)")
    p.add_argument("--class-weight", default="auto", choices=("auto", "balanced", "none"),
                   help="static models: weigh each class's loss by n / (classes x its training nodes) "
                        "(balanced) or not (none); auto (default): balanced for binary labels, none otherwise")
    p.add_argument("--average-optimizer-state", action=argparse.BooleanOptionalAction, default=None,
                   help="static models: average the parts' Adam moments (weighted like the weights) at every "
                        "synchronisation, so every part starts each round from the same optimizer state (the "
                        "default; --no-average-optimizer-state: each part keeps its own, see docs/training.md)")
    p.add_argument("--metric", default=None, choices=("accuracy", "macro_f1", "roc_auc"),
                   help="static models: the validation metric that picks the best model (default: roc_auc for "
                        "binary labels, accuracy otherwise; roc_auc needs binary labels); every metric that "
                        "fits the labels is reported either way")
    p.add_argument("--seed", type=int, default=0, help="seed of weights, dropout and sampling (default 0)")
    p.add_argument("--centralized", action="store_true",
                   help="train the same model on the whole graph (one process) for comparison")
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="static models: write the run's state to PATH after every average and the "
                        "best-validation weights to PATH.best (default: nothing is saved, and the output says "
                        "so); PATH must lie outside PARTS")
    p.add_argument("--resume", action="store_true",
                   help="continue the run saved in --checkpoint PATH (same parts, workers and --sync-every); "
                        "a new run when PATH is not there yet, so that a restartable job can always pass it")
    p.add_argument("--overwrite", action="store_true",
                   help="start a new run over an existing --checkpoint PATH (without it, or --resume, an existing "
                        "checkpoint is refused)")
    add_threads(p, "torch CPU threads per worker (default: CPU cores / workers)")
    p.add_argument("--master-addr", default=None, metavar="ADDR",
                   help="address of worker 0's host that every worker reaches, needed for workers on several "
                        "hosts (torchrun --nnodes N): the rendezvous and collectives then listen on the network. "
                        "Default: every worker on this machine, everything bound to 127.0.0.1")
    p.add_argument("--transfer", default=None, choices=("full", "delta"),
                   help="dynamic models: copy whole snapshots, or keyframes + deltas, to the device "
                        "(default delta)")
    p.set_defaults(run=run)


def _default(value, default):
    """The flag's value, or the model family's default when it was not given (0 is a value)."""
    return default if value is None else value


def run(args) -> dict:
    from graphstream.errors import ParameterError
    try:
        from .sampler import parse_fanouts
        from .train import TrainConfig, run_training
    except ImportError as exc:  # torch missing: the train extra
        raise ParameterError(f"graphstream train needs torch (pip install 'graphstream[train]'): {exc}") from exc
    if args.centralized:   # one model in one process, trained on the whole graph: refused rather than ignored
        for given, flag in ((args.workers != 1, "--workers"), (args.sync_every != 1, "--sync-every"),
                            (args.proximal is not None, "--proximal"),
                            (args.drift_correction is not None, "--[no-]drift-correction"),
                            (args.average_optimizer_state is not None, "--[no-]average-optimizer-state")):
            if given:
                raise ParameterError(f"{flag} applies to averaged training; --centralized trains one model on the "
                                     "whole graph in one process")
    if args.mini_batch and args.drift_correction:   # refused rather than ignored: it needs full-batch gradients
        raise ParameterError("--drift-correction applies to full-batch training; with --mini-batch the local "
                             "models are held near the average by --proximal (default 3)")
    if args.model in DYNAMIC_MODELS:
        if args.checkpoint or args.resume:  # refused rather than ignored: the user would expect a file
            raise ParameterError(f"--checkpoint/--resume apply to the static models ({', '.join(STATIC_MODELS)}), "
                                 f"not {args.model}")
        for given, flag in ((args.average_optimizer_state, "--[no-]average-optimizer-state"),
                            (args.drift_correction, "--[no-]drift-correction"), (args.proximal, "--proximal"),
                            (None if args.class_weight == "auto" else args.class_weight, "--class-weight"),
                            (args.mini_batch or None, "--mini-batch"), (args.fanout, "--fanout"),
                            (args.batch_size, "--batch-size"), (args.dropout, "--dropout"),
                            (args.weight_decay, "--weight-decay")):
            if given is not None:   # refused rather than ignored, like --checkpoint
                raise ParameterError(f"{flag} applies to the static models ({', '.join(STATIC_MODELS)}), "
                                     f"not {args.model}")
        if args.metric not in (None, "roc_auc"):   # link prediction is measured by ROC-AUC only
            raise ParameterError(f"--metric {args.metric}: {args.model} (temporal link prediction) reports roc_auc "
                                 "only")
        from .dynamic import DynamicConfig, run_dynamic_training
        # an explicit 0 is checked by the config, never replaced by the default
        config = DynamicConfig(model=args.model, hidden=_default(args.hidden, 64), epochs=_default(args.epochs, 50),
                               lr=args.lr, seed=args.seed, device=args.device,
                               transfer=_default(args.transfer, "delta"),
                               sync_every=args.sync_every)
        return run_dynamic_training(args.parts, config, workers=args.workers, centralized=args.centralized,
                                    threads=args.threads, master_addr=args.master_addr)
    if args.transfer is not None:   # refused rather than ignored: static parts are copied to the device once
        raise ParameterError(f"--transfer applies to the dynamic models ({', '.join(DYNAMIC_MODELS)}), "
                             f"not {args.model}")
    if not args.mini_batch:   # refused rather than ignored: full batch uses every neighbour and node
        for given, flag in ((args.fanout, "--fanout"), (args.batch_size, "--batch-size")):
            if given is not None:
                raise ParameterError(f"{flag} applies with --mini-batch (full-batch training has no fan-outs or "
                                     "batches)")
    try:
        fanouts = parse_fanouts(_default(args.fanout, "25,10"))
    except ValueError as exc:
        raise ParameterError(f"--fanout: {exc}") from exc
    config = TrainConfig(model=args.model, hidden=_default(args.hidden, 256), epochs=_default(args.epochs, 200),
                         sync_every=args.sync_every, mini_batch=args.mini_batch, fanouts=fanouts,
                         batch_size=_default(args.batch_size, 512), lr=args.lr, dropout=_default(args.dropout, 0.5),
                         weight_decay=_default(args.weight_decay, 5e-4), seed=args.seed, device=args.device,
                         checkpoint=args.checkpoint, resume=args.resume, overwrite=args.overwrite, metric=args.metric,
                         proximal=args.proximal, class_weight=args.class_weight,
                         drift_correction=_default(args.drift_correction, True),
                         average_optimizer_state=_default(args.average_optimizer_state, True))
    result = run_training(args.parts, config, workers=args.workers, centralized=args.centralized,
                          threads=args.threads, master_addr=args.master_addr)
    if not args.json:  # the per-epoch lists are for --json consumers
        result.pop("losses", None)
        result.pop("history", None)
    return result


__all__ = ["DYNAMIC_MODELS", "HELP", "STATIC_MODELS", "configure", "run"]
