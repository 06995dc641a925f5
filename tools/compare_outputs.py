"""Check that two revisions of graphstream write byte-identical outputs (issue 13's "Checked by").

Usage (from the project root, with the project's environment)::

    .venv/bin/python tools/compare_outputs.py --base REV [--new REV] [--datasets ../shared/datasets]
                                              [--work /tmp/gs-compare] [--only WORD ...] [--perturb]
                                              [--dgl-python PATH] [--keep] [--json]

REV is checked out into a temporary ``git worktree`` (``git worktree add --detach``, removed at
the end) and the same list of CLI commands runs twice with the current interpreter: once as
``PYTHONPATH=<worktree of --base> python -m graphstream ...`` and once with the working tree's
code (``PYTHONPATH=<project root>``), or a second worktree with ``--new REV``. Both runs write to
the SAME absolute folder (``WORK/out``; manifests record absolute input paths), which is renamed
to ``WORK/base`` and ``WORK/new`` after each run. The script then compares

* the two output trees: same list of files and folders, same sha256 for every file (JSON files
  may differ in timings and in a manifest's checksum of its own text, which covers them; DGL's
  ``graph.dgl`` files, whose bytes differ between two runs of the same revision, are loaded and
  must hold the same nodes, edges and fields);
* every command's exit status and ``--json`` stdout, after dropping the fields that measure the
  run rather than describe the output (seconds, memory, throughput: ``VOLATILE_KEYS``).

The commands, on web-NotreDame, MUSAE facebook, CollegeMsg and an R-MAT scale-16 graph:
``generate rmat`` (scale 16, edge factor 16, seed 1); ``ingest`` of web-NotreDame (.txt.gz),
facebook's edge CSV (undirected) and CollegeMsg (1-based, time column 2); ``dataset facebook``
(graph + node data); ``partition -k 8 --out`` with every static algorithm (coarse-refine, spring,
2ps-l, hdrf, dbh, hash: the list is read from the base code and any algorithm left out is an
error) on facebook (with ``--nodes``), web-NotreDame and the R-MAT graph; ``snapshots`` of
CollegeMsg (``--num-snapshots`` sorted and ``--window`` unsorted) and ``partition --out`` of the
snapshot store with pgc, snapshot and sequence; ``export --to pyg`` of two facebook datasets, and
``--to dgl`` when a Python with dgl is given (``--dgl-python``, default ``.venv-dgl/bin/python`` if
it exists; otherwise it is listed under "skipped").

It prints one JSON object (``--json``) or a short summary: the commands run, the files compared,
every mismatch with its path. Exit status: 0 identical, 1 any mismatch, 2 the comparison could
not be made (bad revision, missing datasets, a command that fails with the base code).

``--only WORD`` keeps the commands whose name contains WORD (plus those they need), for a quick
check of one area. ``--perturb`` flips one byte of one "new" output file and one value of one
"new" --json record before comparing: a self-check that must report exactly those two mismatches
(exit 1). The whole comparison takes about 6 minutes on the 2-core development machine
(``--base 0f4862b --new 0f4862b``: 342 s, 30 commands, 1,621 files, 10.3 GiB; the numba kernels
of each worktree compile afresh) and needs about 22 GB free under WORK.

Examples::

    .venv/bin/python tools/compare_outputs.py --base 0f4862b            # renovation vs its base
    .venv/bin/python tools/compare_outputs.py --base HEAD --new HEAD    # must be identical
    .venv/bin/python tools/compare_outputs.py --base HEAD --new HEAD --perturb --only facebook
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
K = 8                   # parts of every static partition
K_DYNAMIC = 4           # parts of the snapshot-store partitions
DYNAMIC_ALGOS = ("pgc", "snapshot", "sequence")
# Fields that measure the run (wall time, memory), not the output: dropped from the --json records
# and from the JSON files the commands write (manifests record their timings and peak memory)
# before comparing. Matched on the key's name at any depth; a matched key drops its whole value
# ("phases" and "phase_seconds" are dicts of seconds per phase).
VOLATILE_KEYS = frozenset({"seconds", "time", "elapsed", "phases", "phase_seconds", "throughput"})
VOLATILE_SUFFIXES = ("_seconds", "_time", "_per_second", "_rss", "_rss_bytes", "_rss_mib")
VOLATILE_PREFIXES = ("peak_rss",)
DESCRIBES_OUTPUT = frozenset({"window_seconds"})   # the snapshots' window width: a result, kept
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
# A manifest's CRC-32C of its own text: it covers the timings too, so it follows them. Only the
# top-level key is the manifest's own; the files list's crc32c values describe the output and stay.
SELF_CHECKSUM = "crc32c"
CHECKSUM_TEXT = re.compile(r'"crc32c":\s*"[0-9a-f]+"')


def volatile(key: str) -> bool:
    if key in DESCRIBES_OUTPUT:
        return False
    return key in VOLATILE_KEYS or key.endswith(VOLATILE_SUFFIXES) or key.startswith(VOLATILE_PREFIXES)


@dataclass(frozen=True)
class Command:
    """One CLI call: ``graphstream ARGS --json``; ``{out}`` and ``{data}`` are filled in later."""
    name: str
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()


@dataclass
class RunRecord:
    name: str
    argv: list[str]
    returncode: int
    seconds: float
    stdout_json: object = None
    stdout_raw: str = ""
    stderr_tail: str = ""


@dataclass
class Report:
    base: str
    new: str
    commands: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    files_compared: int = 0
    volatile_only: list[str] = field(default_factory=list)   # JSON files equal but for timings/memory
    same_graph_other_bytes: list[str] = field(default_factory=list)   # .dgl files holding the same graph
    planted: list[str] = field(default_factory=list)         # --perturb's changes
    bytes_compared: int = 0
    mismatches: list[dict] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: dict = field(default_factory=dict)


def command_list(static_algos: list[str], with_dgl: bool) -> list[Command]:
    """Every command of the comparison, in dependency order."""
    cmds = [
        Command("generate-rmat", ("generate", "rmat", "{out}/rmat.zarr", "--scale", "16",
                                  "--edge-factor", "16", "--seed", "1")),
        Command("ingest-notredame", ("ingest", "{data}/snap/web-NotreDame.txt.gz", "{out}/notredame.zarr")),
        Command("ingest-facebook", ("ingest", "{data}/musae-facebook/facebook_edges.csv",
                                    "{out}/facebook-edges.zarr", "--undirected")),
        Command("ingest-collegemsg", ("ingest", "{data}/temporal/CollegeMsg.txt", "{out}/collegemsg.zarr",
                                      "--one-based", "--time-column", "2")),
        Command("dataset-facebook", ("dataset", "facebook", "{out}/facebook", "--root", "{data}")),
    ]
    graphs = {  # name -> (store, extra partition args, command that writes it)
        "facebook": ("{out}/facebook/graph.zarr", ("--nodes", "{out}/facebook"), "dataset-facebook"),
        "notredame": ("{out}/notredame.zarr", (), "ingest-notredame"),
        "rmat": ("{out}/rmat.zarr", (), "generate-rmat"),
    }
    for graph, (store, extra, need) in graphs.items():
        for algo in static_algos:
            cmds.append(Command(f"partition-{graph}-{algo}",
                                ("partition", store, "-k", str(K), "--algo", algo,
                                 "--out", f"{{out}}/parts-{graph}-{algo}", *extra), (need,)))
    cmds += [
        Command("snapshots-collegemsg", ("snapshots", "{out}/collegemsg.zarr", "{out}/collegemsg-snap.zarr",
                                         "--num-snapshots", "30", "--edge-life", "4"), ("ingest-collegemsg",)),
        # the other code path: unsorted bucketing, a window in seconds (one week), shorter keyframe period
        Command("snapshots-collegemsg-window", ("snapshots", "{out}/collegemsg.zarr",
                                                "{out}/collegemsg-snap-week.zarr", "--window", "604800",
                                                "--keyframe-every", "4", "--unsorted"), ("ingest-collegemsg",)),
    ]
    for algo in DYNAMIC_ALGOS:
        cmds.append(Command(f"partition-collegemsg-{algo}",
                            ("partition", "{out}/collegemsg-snap.zarr", "-k", str(K_DYNAMIC), "--algo", algo,
                             "--out", f"{{out}}/parts-collegemsg-{algo}"), ("snapshots-collegemsg",)))
    targets = ("pyg", "dgl") if with_dgl else ("pyg",)
    for algo in ("coarse-refine", "hdrf"):   # a vertex partition and an edge partitioner's owners
        if algo not in static_algos:
            continue
        for target in targets:
            cmds.append(Command(f"export-facebook-{algo}-{target}",
                                ("export", f"{{out}}/parts-facebook-{algo}", f"{{out}}/export-facebook-{algo}-{target}",
                                 "--to", target), (f"partition-facebook-{algo}",)))
    return cmds


def select(cmds: list[Command], only: list[str]) -> list[Command]:
    if not only:
        return cmds
    by_name = {c.name: c for c in cmds}
    keep: set[str] = set()

    def add(name: str) -> None:
        if name not in keep:
            keep.add(name)
            for need in by_name[name].needs:
                add(need)

    for c in cmds:
        if any(word in c.name for word in only):
            add(c.name)
    return [c for c in cmds if c.name in keep]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def add_worktree(rev: str, path: Path) -> str:
    """Check REV out (detached) at PATH; returns the full commit id."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    remove_worktree(path)
    git("worktree", "add", "--detach", str(path), commit)
    return commit


def remove_worktree(path: Path) -> None:
    if path.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True,
                       check=False)
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True, check=False)


def code_env(src: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src)        # ahead of the editable install's finder (appended to meta_path)
    env["PYTHONHASHSEED"] = "0"         # both runs alike, should anything depend on str hashing
    env.pop("PYTHONSTARTUP", None)
    return env


def check_import_origin(src: Path, cwd: Path) -> None:
    """The run must import graphstream from SRC, not from the editable install or the cwd."""
    out = subprocess.run([sys.executable, "-c", "import graphstream; print(graphstream.__file__)"],
                         cwd=cwd, env=code_env(src), check=True, capture_output=True, text=True).stdout.strip()
    if Path(out).resolve().parent != (src / "graphstream").resolve():
        raise RuntimeError(f"PYTHONPATH={src} imports graphstream from {out}")


def static_algorithms(src: Path, cwd: Path) -> list[str]:
    code = "from graphstream.partition import ALGORITHMS; print(' '.join(ALGORITHMS))"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=code_env(src), check=True,
                         capture_output=True, text=True).stdout
    return out.split()


def run_all(cmds: list[Command], src: Path, out: Path, data: Path, cwd: Path, label: str,
            dgl_python: str | None) -> dict[str, RunRecord]:
    records: dict[str, RunRecord] = {}
    env = code_env(src)
    out.mkdir(parents=True)
    for c in cmds:
        argv = [a.format(out=out, data=data) for a in c.args] + ["--json"]
        python = dgl_python if c.name.endswith("-dgl") and dgl_python else sys.executable
        t0 = time.perf_counter()
        proc = subprocess.run([python, "-m", "graphstream", *argv], cwd=cwd, env=env,
                              capture_output=True, text=True, check=False)
        dt = time.perf_counter() - t0
        rec = RunRecord(c.name, argv, proc.returncode, round(dt, 2), stdout_raw=proc.stdout,
                        stderr_tail=proc.stderr[-2000:])
        try:
            rec.stdout_json = json.loads(proc.stdout)
        except ValueError:
            rec.stdout_json = None
        records[c.name] = rec
        log(f"[{label}] {c.name}: rc={proc.returncode} {dt:.1f}s")
        if proc.returncode != 0:
            log(proc.stderr[-1000:])
    return records


def strip_volatile(obj):
    if isinstance(obj, dict):
        return {k: strip_volatile(v) for k, v in obj.items() if not volatile(k)}
    if isinstance(obj, list):
        return [strip_volatile(v) for v in obj]
    return obj


def strip_self_checksum(obj):
    if isinstance(obj, dict):
        return {k: v for k, v in obj.items() if k != SELF_CHECKSUM}
    return obj


def same_json_but_volatile(a: Path, b: Path) -> bool:
    """True when two JSON files differ only in the values of volatile keys (and the self-checksum
    that covers them).

    Two checks: the texts with every number and checksum replaced by '#' are equal (same keys,
    order, strings and layout), and the parsed values with the volatile keys and the top-level
    self-checksum dropped are equal (same numbers and file checksums everywhere else)."""
    try:
        ta, tb = a.read_text(), b.read_text()
        if NUMBER.sub("#", CHECKSUM_TEXT.sub("#", ta)) != NUMBER.sub("#", CHECKSUM_TEXT.sub("#", tb)):
            return False
        return (strip_volatile(strip_self_checksum(json.loads(ta)))
                == strip_volatile(strip_self_checksum(json.loads(tb))))
    except (UnicodeDecodeError, ValueError):
        return False


def json_diff(a, b, path: str = "") -> list[str]:
    """Paths (a.b[3].c) where two JSON values differ; at most a few per record."""
    if isinstance(a, dict) and isinstance(b, dict):
        diffs = [f"{path}.{k}: only in {'base' if k in a else 'new'}" for k in sorted(a.keys() ^ b.keys())]
        for k in a.keys() & b.keys():
            diffs += json_diff(a[k], b[k], f"{path}.{k}")
        return diffs
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in json_diff(x, y, f"{path}[{i}]")]
    if a != b or type(a) is not type(b):
        return [f"{path or '.'}: base {json.dumps(a)[:200]} != new {json.dumps(b)[:200]}"]
    return []


def tree(path: Path) -> tuple[dict[str, Path], set[str]]:
    files: dict[str, Path] = {}
    dirs: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(path):
        rel = Path(dirpath).relative_to(path)
        for d in dirnames:
            dirs.add(str(rel / d))
        for f in filenames:
            files[str(rel / f)] = Path(dirpath) / f
    return files, dirs


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# DGL's save_graphs does not write the same bytes twice for the same graph (the same revision run
# twice differs in every graph.dgl), so .dgl files whose bytes differ are loaded and compared.
SAME_DGL_GRAPHS = """
import sys, dgl, torch
(ga,), _ = dgl.load_graphs(sys.argv[1])
(gb,), _ = dgl.load_graphs(sys.argv[2])
def same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
ok = (ga.num_nodes() == gb.num_nodes() and all(same(x, y) for x, y in zip(ga.edges(), gb.edges()))
      and ga.ndata.keys() == gb.ndata.keys() and ga.edata.keys() == gb.edata.keys()
      and all(same(ga.ndata[k], gb.ndata[k]) for k in ga.ndata.keys())
      and all(same(ga.edata[k], gb.edata[k]) for k in ga.edata.keys()))
sys.exit(0 if ok else 1)
"""


def same_dgl_graphs(a: Path, b: Path, dgl_python: str | None) -> bool:
    """True when two .dgl files hold the same graph: nodes, edges in order, every node and edge field."""
    if dgl_python is None:
        return False
    return subprocess.run([dgl_python, "-c", SAME_DGL_GRAPHS, str(a), str(b)], capture_output=True).returncode == 0


def compare_trees(base: Path, new: Path, report: Report, dgl_python: str | None = None) -> None:
    bf, bd = tree(base)
    nf, nd = tree(new)
    for d in sorted(bd ^ nd):
        report.mismatches.append({"kind": "folder", "path": d, "only_in": "base" if d in bd else "new"})
    for f in sorted(bf.keys() ^ nf.keys()):
        report.mismatches.append({"kind": "file", "path": f, "only_in": "base" if f in bf else "new"})
    for f in sorted(bf.keys() & nf.keys()):
        report.files_compared += 1
        size_b, size_n = bf[f].stat().st_size, nf[f].stat().st_size
        report.bytes_compared += size_b
        if size_b != size_n and not f.endswith((".json", ".dgl")):
            report.mismatches.append({"kind": "bytes", "path": f, "size_base": size_b, "size_new": size_n})
            continue
        hb, hn = sha256(bf[f]), sha256(nf[f])
        if hb == hn:
            continue
        if f.endswith(".json") and same_json_but_volatile(bf[f], nf[f]):
            report.volatile_only.append(f)
            continue
        if f.endswith(".dgl") and same_dgl_graphs(bf[f], nf[f], dgl_python):
            report.same_graph_other_bytes.append(f)
            continue
        entry = {"kind": "bytes", "path": f, "sha256_base": hb, "sha256_new": hn}
        if f.endswith(".json"):         # say which values differ (or that only the layout does)
            try:
                diff = json_diff(strip_volatile(json.loads(bf[f].read_text())),
                                 strip_volatile(json.loads(nf[f].read_text())))
                entry["diff"] = diff[:10] or ["same values, different text (order or layout)"]
            except (UnicodeDecodeError, ValueError):
                pass
        report.mismatches.append(entry)


def compare_records(base: dict[str, RunRecord], new: dict[str, RunRecord], report: Report) -> None:
    for name, b in base.items():
        n = new[name]
        if b.returncode != n.returncode:
            report.mismatches.append({"kind": "exit", "command": name, "base": b.returncode, "new": n.returncode,
                                      "new_stderr": n.stderr_tail[-500:]})
            continue
        if b.stdout_json is None or n.stdout_json is None:
            if b.stdout_raw != n.stdout_raw:
                report.mismatches.append({"kind": "stdout", "command": name, "diff": ["not JSON and different"]})
            continue
        diffs = json_diff(strip_volatile(b.stdout_json), strip_volatile(n.stdout_json))
        if diffs:
            report.mismatches.append({"kind": "json", "command": name, "diff": diffs[:10]})


def perturb(new_out: Path, records: dict[str, RunRecord]) -> list[str]:
    """Flip one byte of the largest output file, add 1 to a manifest's num_nodes and change one
    --json value: the self-check's plants, each of which must be reported."""
    files, _ = tree(new_out)
    target = max(files.values(), key=lambda p: (p.stat().st_size, str(p)))
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    planted = [str(target.relative_to(new_out))]
    # a real value in a manifest, to show that masking the timings hides nothing else
    manifest = next((p for rel, p in sorted(files.items()) if rel.endswith("manifest.json")), None)
    if manifest is not None:
        text = manifest.read_text()
        changed = re.sub(r'"num_nodes": (\d+)', lambda m: f'"num_nodes": {int(m.group(1)) + 1}', text, count=1)
        if changed != text:
            manifest.write_text(changed)
            planted.append(f"{manifest.relative_to(new_out)}: .num_nodes + 1")
    for rec in records.values():
        if isinstance(rec.stdout_json, dict):
            key = next((k for k in sorted(rec.stdout_json) if not isinstance(rec.stdout_json[k], (dict, list))
                        and not volatile(k)), None)
            if key is not None:
                rec.stdout_json[key] = ["perturbed", rec.stdout_json[key]]
                planted.append(f"{rec.name}: .{key}")
                break
    return planted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="revision whose code writes the reference outputs")
    ap.add_argument("--new", default=None, help="revision to compare (default: the working tree's code)")
    ap.add_argument("--datasets", default=str(ROOT.parent / "shared" / "datasets"),
                    help="shared datasets folder (default ../shared/datasets)")
    ap.add_argument("--work", default="/tmp/gs-compare", help="scratch folder (emptied first)")
    ap.add_argument("--only", action="append", default=[], metavar="WORD",
                    help="keep only commands whose name contains WORD (and what they need); repeatable")
    ap.add_argument("--perturb", action="store_true", help="self-check: plant one byte and one JSON change")
    ap.add_argument("--dgl-python", default=None,
                    help="python with dgl for export --to dgl (default .venv-dgl/bin/python if present)")
    ap.add_argument("--keep", action="store_true", help="keep WORK/base and WORK/new afterwards")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    data = Path(args.datasets).resolve()
    work = Path(args.work).resolve()
    dgl_python = args.dgl_python
    if dgl_python is None and (ROOT / ".venv-dgl" / "bin" / "python").exists():
        dgl_python = str(ROOT / ".venv-dgl" / "bin" / "python")
    report = Report(base=args.base, new=args.new or "working tree")
    out, base_out, new_out = work / "out", work / "base", work / "new"
    src_base, src_new = work / "src-base", work / "src-new"
    run_cwd = work / "cwd"         # not the project root: `python -m` puts the cwd first on sys.path
    status = 2
    try:
        for need in ("snap/web-NotreDame.txt.gz", "musae-facebook/facebook_edges.csv", "temporal/CollegeMsg.txt"):
            if not (data / need).exists():
                raise RuntimeError(f"{data / need} is missing (--datasets)")
        for p in (out, base_out, new_out):
            shutil.rmtree(p, ignore_errors=True)
        run_cwd.mkdir(parents=True, exist_ok=True)
        report.base = f"{args.base} ({add_worktree(args.base, src_base)[:12]})"
        if args.new is not None:
            report.new = f"{args.new} ({add_worktree(args.new, src_new)[:12]})"
            new_src = src_new
        else:
            new_src = ROOT
        for src in (src_base, new_src):
            check_import_origin(src, run_cwd)

        algos = static_algorithms(src_base, run_cwd)
        cmds = command_list(algos, with_dgl=dgl_python is not None)
        if dgl_python is None:
            report.skipped.append("export --to dgl (no python with dgl: tools/dgl-env.sh, or --dgl-python)")
        cmds = select(cmds, args.only)
        report.commands = [c.name for c in cmds]

        t0 = time.perf_counter()
        base_records = run_all(cmds, src_base, out, data, run_cwd, "base", dgl_python)
        out.rename(base_out)
        report.seconds["base_run"] = round(time.perf_counter() - t0, 1)
        t0 = time.perf_counter()
        new_records = run_all(cmds, new_src, out, data, run_cwd, "new", dgl_python)
        out.rename(new_out)
        report.seconds["new_run"] = round(time.perf_counter() - t0, 1)

        if args.keep:
            for label, records in (("base", base_records), ("new", new_records)):
                (work / f"{label}-records.json").write_text(
                    json.dumps({n: r.__dict__ for n, r in records.items()}, indent=1))
        failed = [name for name, rec in base_records.items() if rec.returncode != 0]
        if failed:
            report.errors.append(f"commands that fail with the base code: {', '.join(failed)}")
        if args.perturb:
            report.planted = perturb(new_out, new_records)
        t0 = time.perf_counter()
        compare_trees(base_out, new_out, report, dgl_python)
        compare_records(base_records, new_records, report)
        report.seconds["compare"] = round(time.perf_counter() - t0, 1)
        status = 2 if report.errors else (1 if report.mismatches else 0)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", None)
        report.errors.append(f"{exc}" + (f": {detail.strip()}" if detail else ""))
        status = 2
    finally:
        remove_worktree(src_base)
        if args.new is not None:
            remove_worktree(src_new)
        if not args.keep:
            for p in (out, base_out, new_out):
                shutil.rmtree(p, ignore_errors=True)
        report.seconds["total"] = round(time.perf_counter() - t_start, 1)

    result = {"identical": status == 0, "status": status, **report.__dict__,
              "num_commands": len(report.commands), "num_mismatches": len(report.mismatches)}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        verdict = {0: "IDENTICAL", 1: "MISMATCH", 2: "ERROR"}[status]
        print(f"{verdict}: base {report.base} vs new {report.new}: {len(report.commands)} commands, "
              f"{report.files_compared} files ({report.bytes_compared / 2**20:.1f} MiB), "
              f"{len(report.mismatches)} mismatches, {report.seconds.get('total')} s")
        if report.volatile_only:
            print(f"  {len(report.volatile_only)} JSON files differ only in timings/memory "
                  f"(e.g. {report.volatile_only[0]})")
        if report.same_graph_other_bytes:
            print(f"  {len(report.same_graph_other_bytes)} DGL files hold the same graph in other bytes "
                  f"(e.g. {report.same_graph_other_bytes[0]})")
        for p in report.planted:
            print("  planted (--perturb):", p)
        for m in report.mismatches:
            print("  mismatch:", json.dumps(m))
        for e in report.errors:
            print("  error:", e)
        for s in report.skipped:
            print("  skipped:", s)
    return status


if __name__ == "__main__":
    sys.exit(main())
