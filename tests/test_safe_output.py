"""Safe output (issue 14 items 2, 3, 8, 9): outputs apart from inputs, atomic overwrite under
SIGKILL, SIGINT/SIGTERM cleanup and exit codes, leftovers of killed runs, one run per output,
disk full.

The kill and signal tests run the CLI in subprocesses (``python -m graphstream``): each waits
until the run has started writing its hidden sibling, then kills it at several delays.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from graphstream import _atomic
from graphstream._atomic import (
    OutputLockedError,
    atomic_dir,
    check_outputs_apart,
    claim_outputs,
    output_lock,
    recover_leftovers,
)
from graphstream.cli import main
from graphstream.errors import DiskFullError, ParameterError
from graphstream.store import GraphWriter, open_partitions, open_snapshots, open_store

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
ENV = {**os.environ, "GRAPHSTREAM_PROGRESS": "0"}


# -- helpers ---------------------------------------------------------------------------------------

def tree_hash(path: Path, skip: tuple[str, ...] = ()) -> str:
    """Names and bytes of every file under ``path`` (or of the file itself)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if f.name in skip:
            continue
        h.update(str(f.relative_to(path) if f != path else f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def write_store(path: Path, n: int = 200, m: int = 2000, seed: int = 0, with_time: bool = False,
                chunk_size: int = 1 << 16, overwrite: bool = False) -> Path:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    with GraphWriter(path, num_nodes=n, with_time=with_time, chunk_size=chunk_size, overwrite=overwrite) as w:
        w.append(src, dst, time=rng.integers(0, 1 << 20, m) if with_time else None)
        w.close()
    return path


def write_nodes(folder: Path, n: int) -> Path:
    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "features.npy", rng.standard_normal((n, 4)).astype(np.float32))
    np.save(folder / "labels.npy", rng.integers(0, 3, n))
    for split in ("train", "val", "test"):
        np.save(folder / f"{split}_mask.npy", rng.random(n) < 0.3)
    return folder


def cli(*args, capsys) -> tuple[int, str]:
    rc = main([str(a) for a in args])
    err = capsys.readouterr().err
    return rc, err


def hidden_siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def spawn(*args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphstream", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def run_cli(*args, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphstream", *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def wait_for_sibling(proc: subprocess.Popen, out: Path, kind: str = "tmp", timeout: float = 60) -> bool:
    """Wait until ``proc`` has created ``.OUT.<kind>-*`` (it is writing); False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(name.startswith(f".{out.name}.{kind}-") for name in hidden_siblings(out)):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.01)
    raise AssertionError(f"{out}: no .{kind}- sibling after {timeout} s")


# -- item 2: outputs apart from inputs ------------------------------------------------------------

def test_check_outputs_apart_relations(tmp_path):
    d = tmp_path / "d"
    (d / "graph.zarr").mkdir(parents=True)
    (tmp_path / "link").symlink_to(d)
    before = tree_hash(tmp_path)
    cases = [
        ({"--out": d}, {"input store": d / "graph.zarr"}, "contains the input store"),
        ({"--out": d / "graph.zarr" / "x"}, {"input store": d / "graph.zarr"}, "lies inside the input store"),
        ({"--out": d}, {"--nodes folder": d}, "is the --nodes folder"),
        ({"--out": tmp_path / "link"}, {"--nodes folder": d}, "is the --nodes folder"),   # symlink followed
        ({"--out": tmp_path / "link" / "graph.zarr"}, {"input store": d / "graph.zarr"}, "is the input store"),
    ]
    for outputs, inputs, words in cases:
        with pytest.raises(ParameterError, match=words) as info:
            check_outputs_apart(outputs, inputs)
        assert "choose an output outside every input" in str(info.value)
    # apart, siblings with a common prefix, None values: accepted
    check_outputs_apart({"--out": tmp_path / "d2"}, {"input store": d, "--nodes folder": None})
    check_outputs_apart({"--out": None}, {"input store": d})
    assert tree_hash(tmp_path) == before


def test_partition_out_over_its_inputs_refused(tmp_path, capsys):
    """The issue's probe: this deleted d (the input store and node data) before failing."""
    d = tmp_path / "d"
    d.mkdir()
    write_store(d / "graph.zarr")
    write_nodes(d, 200)
    before = tree_hash(d)
    for extra in (["--out", d, "--nodes", d], ["--out", d / "graph.zarr"], ["--out", d / "graph.zarr" / "p"]):
        rc, err = cli("partition", d / "graph.zarr", "-k", 4, *extra, "--overwrite", capsys=capsys)
        assert rc == 2 and "choose an output outside every input" in err and len(err.strip().splitlines()) == 1
        assert tree_hash(d) == before
    assert hidden_siblings(d) == []


def test_partition_work_dir_in_an_input_or_output_refused(tmp_path, capsys):
    """--work-dir is written into (the vertex stream, an edge partitioner's part[e] as edge_parts.zarr):
    the input store itself, a folder inside it or the --nodes folder would be changed by the run, and an
    --out over it (or inside it) would be replaced with it. A work dir that holds the inputs is fine."""
    d = tmp_path / "d"
    d.mkdir()
    write_store(d / "graph.zarr")
    write_nodes(d, 200)
    before, store_before = tree_hash(d), tree_hash(d / "graph.zarr")
    cases = [(["--work-dir", d / "graph.zarr"], "is the input store"),
             (["--work-dir", d / "graph.zarr" / "scratch"], "lies inside the input store"),
             (["--algo", "hdrf", "--work-dir", d / "graph.zarr"], "is the input store"),
             (["--out", tmp_path / "w", "--nodes", d, "--work-dir", d], "is the --nodes folder"),
             (["--out", tmp_path / "w", "--work-dir", tmp_path / "w" / "scratch"], "lies inside the output --out"),
             (["--out", tmp_path / "w", "--work-dir", tmp_path / "w"], "is the output --out"),
             (["--out", tmp_path / "w" / "p", "--work-dir", tmp_path / "w"], "contains the output --out")]
    for extra, words in cases:
        rc, err = cli("partition", d / "graph.zarr", "-k", 4, *extra, capsys=capsys)
        assert rc == 2 and words in err and "choose a scratch folder" in err, err
        assert len(err.strip().splitlines()) == 1
        assert tree_hash(d) == before
    assert not (tmp_path / "w").exists()
    # a work dir that holds the input store: accepted, the store untouched, the part[e] file kept there
    rc, err = cli("partition", d / "graph.zarr", "-k", 4, "--algo", "hdrf", "--work-dir", d, capsys=capsys)
    assert rc == 0, err
    assert tree_hash(d / "graph.zarr") == store_before
    assert (d / "edge_parts.zarr").exists()


def test_ingest_over_its_source_refused(tmp_path, capsys):
    e = tmp_path / "e.txt"
    e.write_text("0 1\n1 2\n")
    rc, err = cli("ingest", e, e, "--overwrite", capsys=capsys)
    assert rc == 2 and "is the input file" in err and e.read_text() == "0 1\n1 2\n"
    (tmp_path / "alias.txt").symlink_to(e)
    rc, err = cli("ingest", tmp_path / "alias.txt", e, "--overwrite", capsys=capsys)
    assert rc == 2 and e.read_text() == "0 1\n1 2\n"
    # the library refuses too
    from graphstream.ingest import ingest
    with pytest.raises(ParameterError, match="is the input file"):
        ingest(e, e, overwrite=True)
    assert e.read_text() == "0 1\n1 2\n"


def test_snapshots_export_dataset_over_their_inputs_refused(tmp_path, capsys):
    g = write_store(tmp_path / "g.zarr", with_time=True)
    before = tree_hash(g)
    rc, err = cli("snapshots", g, g, "--num-snapshots", 2, "--overwrite", capsys=capsys)
    assert rc == 2 and "is the input store" in err and tree_hash(g) == before
    rc, err = cli("snapshots", g, g / "s.zarr", "--num-snapshots", 2, capsys=capsys)
    assert rc == 2 and "lies inside the input store" in err and tree_hash(g) == before
    assert open_store(g).num_edges == 2000

    parts = tmp_path / "parts"
    assert main(["partition", str(g), "-k", "2", "--algo", "hash", "--out", str(parts)]) == 0
    before = tree_hash(parts)
    for out in (parts, parts / "pyg", tmp_path):
        rc, err = cli("export", parts, "--to", "pyg", out, "--overwrite", capsys=capsys)
        assert rc == 2 and "the partitioned dataset" in err and tree_hash(parts) == before

    root = tmp_path / "root"
    (root / "planetoid").mkdir(parents=True)
    (root / "planetoid" / "ind.cora.x").write_bytes(b"keep me")
    for out in (root, root / "planetoid", root / "planetoid" / "cora"):
        rc, err = cli("dataset", "cora", out, "--root", root, "--overwrite", capsys=capsys)
        assert rc == 2 and "the dataset folder" in err
        assert (root / "planetoid" / "ind.cora.x").read_bytes() == b"keep me"


def test_overwrite_replaces_graphstreams_outputs_only(tmp_path, capsys):
    """--overwrite named after a folder of the user's (a typo: `ingest edges.txt ~ --overwrite`) removed it
    whole with exit 0; now only a folder graphstream wrote or an empty one is replaced."""
    e = tmp_path / "e.txt"
    e.write_text("0 1\n1 2\n")
    mine = tmp_path / "mine"
    (mine / "inner").mkdir(parents=True)
    (mine / "inner" / "thesis.tex").write_text("keep")
    before = tree_hash(mine)
    for args in (("ingest", e, mine), ("generate", "rmat", mine, "--scale", 3),
                 ("snapshots", write_store(tmp_path / "t.zarr", with_time=True), mine, "--num-snapshots", 2)):
        rc, err = cli(*args, "--overwrite", capsys=capsys)
        assert rc == 2 and "is not a graphstream output (it holds inner)" in err, err
        assert tree_hash(mine) == before
    g = write_store(tmp_path / "g.zarr")
    rc, err = cli("partition", g, "-k", 2, "--algo", "hash", "--out", mine, "--overwrite", capsys=capsys)
    assert rc == 2 and "not a graphstream output" in err and tree_hash(mine) == before

    # every kind of output graphstream writes is replaced, as is an empty folder
    parts, snaps = tmp_path / "parts", tmp_path / "s.zarr"
    outputs = [("ingest", e, tmp_path / "out.zarr"),
               ("partition", g, "-k", 2, "--algo", "hash", "--out", parts),
               ("export", parts, "--to", "pyg", tmp_path / "pyg"),
               ("snapshots", tmp_path / "t.zarr", snaps, "--num-snapshots", 2),
               ("partition", snaps, "-k", 2, "--out", tmp_path / "dyn"),
               ("ingest", e, tmp_path / "empty")]
    (tmp_path / "empty").mkdir()
    for args in outputs:
        rc, err = cli(*args, "--overwrite", capsys=capsys)
        assert rc == 0, (args, err)
    for args in outputs:   # again, over themselves
        rc, err = cli(*args, "--overwrite", capsys=capsys)
        assert rc == 0, (args, err)
    # a DistDGL export is known by its config (its writer needs dgl: the folder as it lays it out)
    dgl = tmp_path / "dgl"
    (dgl / "part0").mkdir(parents=True)
    (dgl / "g.json").write_text(json.dumps({"graph_name": "g", "num_parts": 1, "node_map": {}, "edge_map": {}}))
    assert _atomic.replaceable(dgl) and not _atomic.replaceable(mine)


def test_overwrite_judges_every_entry_of_a_folder(tmp_path, capsys):
    """One graphstream file at the top was enough: a graph store's zarr.json (or a dataset folder's
    graph.zarr) copied into a folder of the user's made its other files replaceable."""
    g = write_store(tmp_path / "g.zarr")
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copytree(g, proj / "graph.zarr")
    (proj / "thesis.tex").write_text("keep")
    mixed = tmp_path / "mixed"
    shutil.copytree(g, mixed)
    (mixed / "notes.txt").write_text("keep")
    for folder in (proj, mixed):
        rc, err = cli("generate", "rmat", folder, "--scale", 3, "--overwrite", capsys=capsys)
        assert rc == 2 and "not a graphstream output" in err, err
    assert (proj / "thesis.tex").exists() and (mixed / "notes.txt").exists()
    # a damaged output of ours is replaced; another tool's Zarr group is not
    damaged = tmp_path / "damaged"
    shutil.copytree(g, damaged)
    (damaged / "zarr.json").write_text("garbage")
    other = tmp_path / "other.zarr"
    shutil.copytree(g, other)
    doc = json.loads((other / "zarr.json").read_text())
    doc["attributes"] = {"format": "somebody.else"}
    (other / "zarr.json").write_text(json.dumps(doc))
    assert _atomic.replaceable(damaged) and not _atomic.replaceable(other)


def test_overwrite_does_not_replace_a_users_file_with_a_folder(tmp_path, capsys):
    """`export ... thesis.txt --overwrite` (and generate) replaced the user's file with an export folder,
    exit 0. A file output (an HTML report) still replaces a file."""
    g = write_store(tmp_path / "g.zarr")
    parts = tmp_path / "parts"
    assert main(["partition", str(g), "-k", "2", "--algo", "hash", "--out", str(parts)]) == 0
    thesis = tmp_path / "thesis.txt"
    thesis.write_text("keep")
    for args in (("export", parts, "--to", "pyg", thesis), ("generate", "rmat", thesis, "--scale", 3)):
        rc, err = cli(*args, "--overwrite", capsys=capsys)
        assert rc == 2 and "thesis.txt: --overwrite replaces what graphstream wrote, and this is a file" in err, err
        assert thesis.read_text() == "keep"
    pytest.importorskip("matplotlib")
    page = tmp_path / "report.html"
    page.write_text("old")
    rc, err = cli("report", parts, "--html", page, "--overwrite", capsys=capsys)
    assert rc == 0 and page.read_text().startswith("<!doctype html>"), err


def test_refusals_name_what_is_in_the_way(tmp_path, capsys):
    """A user's file beside an export's was hidden behind the export's own files in the refusal (which
    called the export "not a graphstream output"); a file two folders up was called a missing folder."""
    g = write_store(tmp_path / "g.zarr")
    parts, pyg = tmp_path / "parts", tmp_path / "pyg"
    assert main(["partition", str(g), "-k", "2", "--algo", "hash", "--out", str(parts)]) == 0
    assert main(["export", str(parts), "--to", "pyg", str(pyg)]) == 0
    (pyg / "my_notes.txt").write_text("keep")
    rc, err = cli("export", parts, "--to", "pyg", pyg, "--overwrite", capsys=capsys)
    assert rc == 2 and "(it holds my_notes.txt, " in err, err
    (tmp_path / "afile").write_text("")
    rc, err = cli("export", parts, "--to", "pyg", tmp_path / "afile" / "sub" / "deeper", capsys=capsys)
    assert rc == 2 and f"{tmp_path / 'afile'} is a file, not a folder" in err, err


@pytest.mark.parametrize("name", [".", "./", "/", ".."])
def test_an_output_named_by_the_current_folder_or_root_is_refused(tmp_path, capsys, monkeypatch, name):
    """`ingest e.txt .` was a traceback (PosixPath('.') has an empty name), exit 1."""
    work = tmp_path / "w"
    work.mkdir()
    (work / "e.txt").write_text("0 1\n")
    monkeypatch.chdir(work)
    named = name if name == "/" else os.path.join(str(work), name)   # reported absolute, as every path
    for args in (("ingest", "e.txt", name), ("generate", "rmat", name, "--scale", 3)):
        rc, err = cli(*args, "--overwrite", capsys=capsys)
        assert rc == 2 and (f"{named!r}: an output is named by a new folder" in err or "contains the input" in err), err
    assert sorted(p.name for p in work.iterdir()) == ["e.txt"]


# -- item 3: atomic overwrite under SIGKILL -------------------------------------------------------

DELAYS = (0.0, 0.3, 1.0)


def kill_run(args: list, out: Path, delay: float) -> bool:
    """Start the CLI, wait until it writes its hidden sibling, wait ``delay`` more, SIGKILL it;
    True if it was still running when killed."""
    proc = spawn(*args, env=ENV)
    if wait_for_sibling(proc, out):
        time.sleep(delay)
    running = proc.poll() is None
    proc.kill()
    proc.communicate()
    return running


def check_killed_runs(args: list, out: Path, opener, skip: tuple[str, ...] = ()) -> None:
    """OUT holds the old output; after each SIGKILL it is the old or the new complete output,
    and the next run clears the leftovers (finally completing, so the new output is known)."""
    opener(out)
    old = tree_hash(out, skip)
    seen, killed = [], 0
    for delay in DELAYS:
        killed += kill_run(args, out, delay)
        opener(out)                      # complete: the old output or the new one, never a mix
        seen.append(tree_hash(out, skip))
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert hidden_siblings(out) == []    # leftovers of the killed runs recognised and removed
    new = tree_hash(out, skip)
    assert new != old
    assert set(seen) <= {old, new}, seen
    assert killed >= 2, "the runs ended before the kills: use a bigger input"


def test_sigkill_generate_overwrite(tmp_path):
    out = tmp_path / "g.zarr"
    assert run_cli("generate", "rmat", out, "--scale", 17, "--seed", 1).returncode == 0
    check_killed_runs(["generate", "rmat", out, "--scale", 17, "--seed", 2, "--overwrite"], out, open_store)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Path:
    """A timed graph large enough that building from it takes a couple of seconds."""
    path = tmp_path_factory.mktemp("big") / "g.zarr"
    return write_store(path, n=1 << 16, m=1 << 21, seed=3, with_time=True, chunk_size=1 << 18)


def test_sigkill_partition_out(tmp_path, big_store):
    out = tmp_path / "parts"
    assert run_cli("partition", big_store, "-k", 2, "--algo", "hash", "--out", out).returncode == 0
    args = ["partition", big_store, "-k", 4, "--algo", "hash", "--out", out, "--overwrite"]
    # manifest.json records timings: compare the part files; open_partitions checks the manifest
    check_killed_runs(args, out, open_partitions, skip=("manifest.json",))


def test_sigkill_snapshots(tmp_path, big_store):
    out = tmp_path / "s.zarr"
    assert run_cli("snapshots", big_store, out, "--num-snapshots", 4).returncode == 0
    args = ["snapshots", big_store, out, "--num-snapshots", 16, "--overwrite"]
    check_killed_runs(args, out, open_snapshots)


def test_interrupted_swap_is_restored(tmp_path, capsys):
    """Leftovers of a run killed between the two renames of a swap (file systems without
    RENAME_EXCHANGE): OUT missing and .OUT.old-* present means .old is the old output."""
    out = write_store(tmp_path / "g.zarr")
    old = tree_hash(out)
    os.replace(out, tmp_path / ".g.zarr.old-1234abcd")
    write_store(tmp_path / ".g.zarr.tmp-5678abcd", seed=9)
    (tmp_path / ".g.zarr.scratch-x").mkdir()
    rc, err = cli("generate", "rmat", out, "--scale", 4, capsys=capsys)
    assert rc == 2 and "exists" in err                       # restored, so it exists
    assert tree_hash(out) == old and hidden_siblings(out) == []
    # OUT present and a stale .old (killed while removing it): removed
    shutil.copytree(out, tmp_path / ".g.zarr.old-99999999")
    assert main(["generate", "rmat", str(out), "--scale", "4", "--overwrite"]) == 0
    assert hidden_siblings(out) == [] and open_store(out).num_nodes == 16


def test_swap_without_rename_exchange(tmp_path, monkeypatch):
    monkeypatch.setattr(_atomic, "_exchange", lambda a, b: False)
    out = write_store(tmp_path / "g.zarr")
    write_store(out, seed=5, m=10, overwrite=True)
    assert open_store(out).num_edges == 10 and hidden_siblings(out) == []


def test_failed_overwrite_keeps_the_old_store(tmp_path):
    out = write_store(tmp_path / "g.zarr")
    old = tree_hash(out)
    with pytest.raises(RuntimeError), GraphWriter(out, overwrite=True, num_nodes=10) as w:
        w.append(np.arange(5), np.arange(5))
        raise RuntimeError("boom")
    assert tree_hash(out) == old and hidden_siblings(out) == []


# -- item 8: signals and disk full ------------------------------------------------------------------

@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_removes_partial_output(tmp_path, sig, code):
    out = tmp_path / "g.zarr"
    assert run_cli("generate", "rmat", out, "--scale", 10).returncode == 0
    old = tree_hash(out)
    proc = spawn("generate", "rmat", out, "--scale", 18, "--overwrite", env=ENV)
    assert wait_for_sibling(proc, out)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert len(err.strip().splitlines()) == 1 and signal.Signals(sig).name in err
    assert tree_hash(out) == old and hidden_siblings(out) == []


def test_sigterm_removes_spill_folder_and_stale_ones_go(tmp_path, big_store):
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = scratch / f"graphstream-parts-{dead}-abcd1234"        # a SIGKILLed run's (its lock dropped)
    stale.mkdir()
    (stale / "part.zarr").write_text("x")
    (stale / ".owner.lock").touch()
    foreign = scratch / f"graphstream-parts-{os.getpid()}-live"    # a live process's: kept
    foreign.mkdir()
    out = tmp_path / "parts"
    proc = spawn("partition", big_store, "-k", 4, "--algo", "hdrf", "--out", out,
                 env={**ENV, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(f"graphstream-parts-{proc.pid}-") for p in scratch.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert sorted(p.name for p in scratch.iterdir()) == [foreign.name]
    assert not out.exists() and hidden_siblings(out) == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_raised_in_a_finalizer_is_delivered_again(signum):
    """A signal whose exception is raised in a finalizer (a ``__del__`` the garbage collector runs, where
    Python prints it and goes on: llvmlite's, in 1 of 17 runs of the test above) still ends the command:
    it is delivered again and raised once the finalizer has returned. Handlers and hook restored after."""
    from graphstream.cli import Terminated, _on_signal, _signals_to

    class Finalized:
        def __del__(self):
            signal.raise_signal(signum)
            for _ in range(100):   # the handler runs here, at a check of the loop
                pass

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook)
    after_finalizer = []
    with pytest.raises(KeyboardInterrupt if signum == signal.SIGINT else Terminated), _signals_to(_on_signal):
        obj = Finalized()
        del obj
        after_finalizer.append(True)
        for _ in range(100):
            pass
        time.sleep(1)   # not reached with the fix
    assert after_finalizer == [True]   # raised past the finalizer, not in it
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before


def test_enospc_simulated_gives_one_line(tmp_path, capsys, monkeypatch):
    """ENOSPC raised by the store's writes (in-process): exit 2, one line, nothing left."""
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(GraphWriter, "_write_column", full)
    out = tmp_path / "g.zarr"
    rc, err = cli("generate", "rmat", out, "--scale", 12, "--chunk-size", 1024, capsys=capsys)
    assert rc == 2 and "disk full" in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_enospc_at_allocation(tmp_path, monkeypatch):
    """Memory-mapped outputs are allocated first: ENOSPC there is a DiskFullError, not a SIGBUS."""
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(DiskFullError, match="disk full"), atomic_dir(tmp_path / "o") as tmp:
        _atomic.allocated_memmap(tmp / "x.npy", np.float32, (10, 4))
    assert list(tmp_path.iterdir()) == []


def _tmpfs_runner() -> list[str] | None:
    """A command prefix that can mount a tmpfs: unshare -rm (own mount namespace), else root."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-rm"]
    if os.geteuid() == 0:
        return []
    return None


def _on_tmpfs(prefix: list[str], mnt: Path, size: str, setup: str, argv: list[str]) -> subprocess.CompletedProcess:
    """``graphstream ARGV`` with a tmpfs of ``size`` mounted at ``mnt`` (after the shell commands ``setup``);
    its stderr ends with ``rc=N`` and what is left on the tmpfs (``ls -A``). Skips when the mount fails."""
    mnt.mkdir()
    cmd = " ".join(f"'{a}'" for a in (sys.executable, "-m", "graphstream", *argv))
    script = (f"mount -t tmpfs -o size={size} tmpfs '{mnt}' || exit 99; {setup}{cmd}; rc=$?; "
              f"echo \"rc=$rc\" >&2; ls -A '{mnt}' >&2; umount '{mnt}'")
    proc = subprocess.run([*prefix, "sh", "-c", script], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode == 99:
        pytest.skip(f"mounting a tmpfs failed: {proc.stderr.strip()}")
    return proc


TMPFS_CASES = [
    ("generate", ["generate", "rmat", "{mnt}/g.zarr", "--scale", "16"]),
    ("dataset cora", ["dataset", "cora", "{mnt}/cora", "--root", str(DATASETS)]),
    ("dataset facebook", ["dataset", "facebook", "{mnt}/fb", "--root", str(DATASETS)]),
    ("export pyg", ["export", "{parts}", "--to", "pyg", "{mnt}/pyg"]),
]


@pytest.mark.parametrize(("name", "args"), TMPFS_CASES, ids=[c[0] for c in TMPFS_CASES])
def test_disk_full_on_a_small_tmpfs(tmp_path, big_store, name, args):
    """A real ENOSPC: a 512 KiB tmpfs. Exit 2, one line, an empty file system afterwards."""
    prefix = _tmpfs_runner()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here (no unshare -rm, not root)")
    if name.startswith("dataset") and not DATASETS.is_dir():
        pytest.skip(f"{DATASETS} not found")
    parts = tmp_path / "parts"
    if name == "export pyg":
        pytest.importorskip("torch")
        nodes = write_nodes(tmp_path / "nodes", 1 << 16)
        assert run_cli("partition", big_store, "-k", 2, "--algo", "hash", "--out", parts,
                       "--nodes", nodes).returncode == 0
    mnt = tmp_path / "mnt"
    proc = _on_tmpfs(prefix, mnt, "512k", "", [a.format(mnt=mnt, parts=parts) for a in args])
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "rc=2", proc.stderr              # ls printed nothing: the tmpfs is empty
    # generate checks its estimated size against the free space before writing (issue 18):
    # refused up front, which is the same guarantee reached earlier.
    reason = "needs about" if name == "generate" else "disk full"
    assert len(lines) == 2 and reason in lines[0], proc.stderr


def test_an_already_full_disk_names_the_output_and_leaves_no_lock(tmp_path, big_store):
    """Full before the command starts: the lock file is the first write. The message named no path, and an
    empty .OUT.lock stayed behind."""
    prefix = _tmpfs_runner()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here (no unshare -rm, not root)")
    mnt = tmp_path / "mnt"
    proc = _on_tmpfs(prefix, mnt, "256k", f"dd if=/dev/zero of='{mnt}/fill' bs=4k 2>/dev/null; ",
                     ["partition", str(big_store), "-k", "2", "--algo", "hash", "--out", f"{mnt}/parts"])
    lines = proc.stderr.strip().splitlines()
    assert lines[-2:] == ["rc=2", "fill"], proc.stderr   # nothing but the filler left
    assert f"{mnt}/parts: disk full before anything was written" in lines[-3], proc.stderr


RECORD = np.dtype([("node", np.int32), ("part", np.int16), ("delta", np.int32), ("kind", np.int8)])
NPY_CASES = {
    "int64": np.arange(1000),
    "2-D float32": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4),
    "0-d": np.array(7),
    "empty": np.zeros(0, dtype=np.int8),
    "records": np.array([(1, 2, -3, 4), (5, 6, 7, 0)], dtype=RECORD),
    "Fortran order": np.asfortranarray(np.arange(12).reshape(3, 4)),
    "strided": np.arange(24).reshape(4, 6)[:, ::2],
    "objects": np.array(["a", None], dtype=object),
    "header past 64 KiB": np.zeros(2, dtype=[(f"f{i}_{'x' * 200}", np.int8) for i in range(400)]),
}


@pytest.mark.parametrize("name", list(NPY_CASES))
def test_save_npy_writes_the_bytes_numpy_would(tmp_path, name):
    """Shards and node data are written from the array's buffer, not through np.save's copies: the file
    must still be np.save's, byte for byte, whatever the array."""
    import io
    import warnings

    array = NPY_CASES[name]
    expected = io.BytesIO()
    with warnings.catch_warnings():   # numpy warns that a 2.0 header needs numpy >= 1.9
        warnings.simplefilter("ignore", UserWarning)
        np.save(expected, array, allow_pickle=True)
    _atomic.save_npy(tmp_path / "a.npy", array)
    assert (tmp_path / "a.npy").read_bytes() == expected.getvalue()


def test_save_npy_of_blocks_is_their_concatenation(tmp_path):
    import io

    blocks = [np.arange(5, dtype=np.int32), np.zeros(0, dtype=np.int32), np.arange(3, dtype=np.int32)[::-1]]
    expected = io.BytesIO()
    np.save(expected, np.concatenate(blocks))
    _atomic.save_npy(tmp_path / "b.npy", blocks)
    assert (tmp_path / "b.npy").read_bytes() == expected.getvalue()
    with pytest.raises(ValueError, match="one dtype"):
        _atomic.save_npy(tmp_path / "c.npy", [np.arange(2, dtype=np.int32), np.arange(2, dtype=np.int64)])


def test_save_npy_on_a_full_disk_raises_enospc(tmp_path, monkeypatch):
    """A short write on a full disk is an OSError with errno ENOSPC (the CLI's "disk full", exit 2),
    not numpy's errno-less one."""
    import builtins

    real_open = builtins.open

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            if len(memoryview(data)) > 256:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.f.write(data)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(_atomic, "open", lambda *a, **kw: Full(real_open(*a, **kw)), raising=False)
    for array in (np.arange(10_000), np.asfortranarray(np.ones((100, 100)))):
        with pytest.raises(OSError) as err:
            _atomic.save_npy(tmp_path / "full.npy", array)
        assert err.value.errno == errno.ENOSPC


# -- item 9: one run per output ---------------------------------------------------------------------

def test_second_run_on_a_locked_output_fails_naming_the_holder(tmp_path, capsys):
    out = tmp_path / "g.zarr"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom graphstream._atomic import output_lock\n"
         f"with output_lock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        rc, err = cli("generate", "rmat", out, "--scale", 4, capsys=capsys)
        assert rc == 2 and f"pid {holder.pid}" in err and "in use" in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
        with pytest.raises(OutputLockedError):
            GraphWriter(out)
    finally:
        holder.kill()
        holder.wait()
    # the holder died (SIGKILL) leaving its lock file: a stale lock, taken over
    assert (tmp_path / ".g.zarr.lock").exists()
    rc, err = cli("generate", "rmat", out, "--scale", 4, capsys=capsys)
    assert rc == 0, err
    assert hidden_siblings(out) == [] and open_store(out).num_nodes == 16


def test_two_concurrent_runs_one_wins(tmp_path):
    out = tmp_path / "g.zarr"
    procs = [spawn("generate", "rmat", out, "--scale", 16, "--seed", s, env=ENV) for s in (1, 2)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    # one wins; the other is refused, by the lock (in use) or, if it started after, as existing
    assert codes == [0, 2], results
    assert any("in use" in err or "exists" in err for rc, err in results if rc == 2)
    open_store(out)


def test_lock_is_reentrant_and_released(tmp_path):
    out = tmp_path / "o"
    with claim_outputs({"OUT": out}, {}, overwrite=False), atomic_dir(out) as tmp:
        (tmp / "f").write_text("x")
        assert (tmp_path / ".o.lock").exists()
    assert (out / "f").read_text() == "x" and hidden_siblings(out) == []
    with output_lock(out):
        pass
    assert recover_leftovers(out) == []


def test_atomic_file_keeps_the_old_file_on_failure(tmp_path):
    """What a checkpoint writer uses: the old file stays whole until the new one is complete."""
    from graphstream._atomic import atomic_file
    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"old")
    with pytest.raises(OSError), atomic_file(ckpt) as tmp:
        tmp.write_bytes(b"ne")
        raise OSError(errno.EIO, "I/O error")
    assert ckpt.read_bytes() == b"old" and hidden_siblings(ckpt) == []
    with pytest.raises(DiskFullError, match="disk full"), atomic_file(ckpt) as tmp:
        raise OSError(errno.ENOSPC, "No space left on device")
    with atomic_file(ckpt) as tmp:
        tmp.write_bytes(b"new")
    assert ckpt.read_bytes() == b"new" and hidden_siblings(ckpt) == []


def test_a_scratch_folder_is_kept_while_its_owner_lives_whatever_its_pid(tmp_path):
    """The sweep removed any folder whose pid was not alive here: another container's, or another host's
    in the shared folder a cluster run puts its scratch in, while that run was still using it."""
    folder, fd = _atomic.new_scratch_folder("graphstream-t-", tmp_path)
    elsewhere = tmp_path / "graphstream-t-999999-abcdefgh"   # a pid that means nothing here
    folder.rename(elsewhere)
    assert not _atomic._pid_alive(999999)
    other, other_fd = _atomic.new_scratch_folder("graphstream-t-", tmp_path)   # its sweep
    assert elsewhere.is_dir()
    os.close(fd)   # the owner ends: the kernel drops its lock
    third, third_fd = _atomic.new_scratch_folder("graphstream-t-", tmp_path)
    assert not elsewhere.exists() and other.is_dir()
    for f in (other_fd, third_fd):
        os.close(f)


def test_a_scratch_folder_without_an_owner_lock_goes_by_pid_and_age(tmp_path):
    """Made by an older version (no lock file): removed when its pid is dead here and it is old enough
    that it cannot be a folder another namespace is just making."""
    fresh = tmp_path / "graphstream-t-999998-aaaaaaaa"
    old = tmp_path / "graphstream-t-999997-bbbbbbbb"
    fresh.mkdir()
    old.mkdir()
    past = time.time() - 2 * _atomic.UNLOCKED_SCRATCH_SECONDS
    os.utime(old, (past, past))
    _, fd = _atomic.new_scratch_folder("graphstream-t-", tmp_path)
    os.close(fd)
    assert fresh.is_dir() and not old.exists()


def test_an_overwrite_whose_old_output_cannot_be_removed_succeeds(tmp_path, monkeypatch, capsys):
    """The new output was swapped in, then removing the old one (read-only contents) raised: the command
    failed after replacing the output, and every later run on it failed removing that leftover."""
    out = tmp_path / "g.zarr"
    assert main(["generate", "rmat", str(out), "--scale", "6", "--seed", "2"]) == 0
    real = _atomic.remove_path

    def read_only(path):
        if ".g.zarr.tmp-" in str(path) or ".g.zarr.old-" in str(path):
            raise PermissionError(13, "Permission denied", str(path))
        real(path)
    monkeypatch.setattr(_atomic, "remove_path", read_only)
    # warnings, said with progress off too (a service's or CI's run never saw them: the copy held its space)
    monkeypatch.setenv("GRAPHSTREAM_PROGRESS", "0")
    capsys.readouterr()
    assert main(["generate", "rmat", str(out), "--scale", "6", "--seed", "1", "--overwrite", "--json"]) == 0
    err = capsys.readouterr().err
    assert "graphstream: warning: " in err and "replaced; the previous output" in err and "remove it by hand" in err
    assert json.loads((out / "zarr.json").read_text())["attributes"]["generator"]["seed"] == 1
    # the next run on it is not blocked by the leftover it cannot remove either
    assert main(["generate", "rmat", str(out), "--scale", "6", "--seed", "3", "--overwrite", "--json"]) == 0
    err = capsys.readouterr().err
    assert err.count("could not remove") == 1, err   # once a run (it was said twice)


def test_a_full_work_folder_is_named(tmp_path, monkeypatch):
    """A full --work-dir (or TMPDIR) said "I/O error: 16384 requested and 7136 written; nothing was
    written" (numpy's short write) or "disk full" without a path, and the work files were np.save'd."""
    from graphstream.partition import partition, vertex_stream

    with GraphWriter(tmp_path / "g.zarr") as w:
        w.append(np.arange(50) % 20, (np.arange(50) * 7) % 20)
    store = open_store(tmp_path / "g.zarr")

    def full(path, array):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(vertex_stream, "save_npy", full)
    work = tmp_path / "work"
    with pytest.raises(DiskFullError, match=f"{work}: disk full writing the partitioner's work files"):
        partition(store, 2, "coarse-refine", work_dir=work)


def test_the_service_sweep_leaves_a_users_folder_that_looks_like_scratch(tmp_path):
    """remove_scratch_of(pid) after a failed step removed any old `graphstream-*<pid>-*` folder of a dead
    pid: a user's `graphstream-2024-11` went with its files when the failed command's pid was 2024."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    users = tmp_path / f"graphstream-{dead}-11"
    users.mkdir()
    (users / "results.csv").write_text("1,2\n")
    past = time.time() - 3600
    os.utime(users, (past, past))
    assert _atomic.remove_scratch_of(int(dead), tmp_path) == []
    assert (users / "results.csv").exists()


def test_without_flock_a_dead_owners_folder_goes_by_pid(tmp_path, monkeypatch):
    """On a file system without flock (NFS nolock) the lock file exists but cannot be locked: the pid and
    the age decide, as they did before the locks, rather than the folder staying forever."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    folder = tmp_path / f"graphstream-t-{dead}-abcdefgh"
    folder.mkdir()
    (folder / _atomic.SCRATCH_OWNER).touch()
    past = time.time() - 3600
    os.utime(folder, (past, past))

    def no_flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(_atomic.fcntl, "flock", no_flock)
    _, fd = _atomic.new_scratch_folder("graphstream-t-", tmp_path)
    os.close(fd)
    assert not folder.exists()


def test_a_folder_kept_until_exit_holds_no_descriptor():
    """Each direct algorithm run without a work_dir kept one more descriptor open until exit."""
    def open_inside(folders) -> list[str]:
        # what each of this process's descriptors points at, not how many there are: other threads (an
        # earlier test's dask or service threads, the garbage collector) open and close their own meanwhile,
        # and a count was off by one either way in full CI runs
        targets = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:   # closed between the listing and the reading
                pass
        return [t for t in targets if any(t == str(f) or t.startswith(f"{f}/") for f in folders)]
    folders = [_atomic.scratch_folder_until_exit("graphstream-fdtest-") for _ in range(5)]
    try:
        assert all(folder.is_dir() for folder in folders)
        assert open_inside(folders) == []
    finally:
        for folder in folders:
            _atomic._remove_if_mine(folder, os.getpid())


def test_an_output_at_a_symlink_is_noted_at_its_own_path(tmp_path, monkeypatch):
    """--overwrite of an output that is a symlink replaces the link: the note named the link's target."""
    (tmp_path / "target.zarr").mkdir()
    (tmp_path / "out.zarr").symlink_to(tmp_path / "target.zarr")
    log = tmp_path / "published"
    monkeypatch.setenv(_atomic.PUBLISHED_LOG_ENV, str(log))
    with atomic_dir(tmp_path / "out.zarr", overwrite=True) as tmp:
        (tmp / "x").write_text("new")
    assert (tmp_path / "out.zarr").is_dir() and not (tmp_path / "out.zarr").is_symlink()
    assert _atomic.published_here(log, tmp_path / "out.zarr")


def test_a_note_matches_its_inode_and_mtime_only(tmp_path, monkeypatch):
    """A freed inode comes back for another output at the same path (seen on ext4): the mtime, to the
    nanosecond, tells them apart."""
    log = tmp_path / "published"
    monkeypatch.setenv(_atomic.PUBLISHED_LOG_ENV, str(log))
    with atomic_dir(tmp_path / "out") as tmp:
        (tmp / "x").write_text("mine")
    out = tmp_path / "out"
    assert _atomic.published_here(log, out)
    st = os.lstat(out)
    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns + 1))   # the same inode, another output's mtime
    assert not _atomic.published_here(log, out)


@pytest.mark.parametrize("where", ["attrs", "array"])
def test_a_full_disk_while_the_store_is_created_leaves_nothing(tmp_path, monkeypatch, where):
    """ENOSPC between the hidden sibling's folder and the store's arrays (8-16 KiB free) escaped the
    constructor: the sibling .g.zarr.tmp-* stayed, blocking the next run's free-space check, and the CLI
    printed a line without the store's path."""
    from graphstream.store import graph as graph_module

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "attrs":
        monkeypatch.setattr(graph_module.GraphManifest, "header", staticmethod(no_space))
    else:
        monkeypatch.setattr(graph_module.GraphWriter, "_create_array", no_space)
    out = tmp_path / "g.zarr"
    with pytest.raises(DiskFullError, match=f"{out}: disk full while writing the store"):
        GraphWriter(out, num_nodes=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_file_output_named_as_a_folder_is_refused(tmp_path, capsys, monkeypatch):
    """`report PARTS --html newr/` wrote a file newr and reported "newr/"."""
    import shutil

    from graphstream.assemble import build_partitions
    from graphstream.ingest.rmat import generate_rmat
    from graphstream.partition import partition
    store = generate_rmat(tmp_path / "g.zarr", scale=5, edge_factor=4, seed=0)
    build_partitions(store, partition(store, 2, algo="hash"), tmp_path / "parts")
    monkeypatch.chdir(tmp_path)
    rc, err = cli("report", "parts", "--html", "newr/", capsys=capsys)
    assert rc == 2 and f"'{tmp_path}/newr/': ends with '/', a folder's name; this output is a file" in err, err
    assert not (tmp_path / "newr").exists()
    shutil.rmtree(tmp_path / "parts")


def test_a_file_size_limit_is_named_and_leaves_nothing(tmp_path):
    """Under `ulimit -f`: export was a torch traceback (RuntimeError "unexpected pos", exit 1), the others
    "I/O error: [Errno 27] File too large" without a path, and train left a lone PATH.best that refused the
    next run."""
    import resource

    import numpy as np

    from graphstream.store.nodedata import write_manifest
    data = tmp_path / "data"
    data.mkdir()
    assert main(["generate", "rmat", str(data / "graph.zarr"), "--scale", "8", "--undirected"]) == 0
    rng = np.random.default_rng(0)
    np.save(data / "features.npy", rng.random((256, 64), dtype=np.float32))
    np.save(data / "labels.npy", rng.integers(0, 3, 256))
    np.save(data / "train_mask.npy", rng.random(256) < 0.5)
    write_manifest(data)
    parts = tmp_path / "parts"
    assert main(["partition", str(data / "graph.zarr"), "-k", "2", "--algo", "hash", "--out", str(parts),
                 "--nodes", str(data)]) == 0

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))

    for args, out in ((("export", parts, "--to", "pyg", tmp_path / "pyg"), tmp_path / "pyg"),
                      (("generate", "rmat", tmp_path / "g.zarr", "--scale", "12"), tmp_path / "g.zarr"),
                      (("train", parts, "--epochs", "2", "--hidden", "256", "--threads", "1", "--checkpoint",
                        tmp_path / "ck"), tmp_path / "ck")):
        proc = run_cli(*args, preexec_fn=limited)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "file size limit (40,000 bytes; ulimit -f)" in proc.stderr and str(out) in proc.stderr, proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "parts"], args
    # an --overwrite run whose best weights fit and whose checkpoint does not: its PATH.best beside the run
    # before's PATH were two runs' files, said to be "nothing written"
    train = ("train", parts, "--epochs", "2", "--hidden", "256", "--threads", "1", "--checkpoint", tmp_path / "ck")
    assert run_cli(*train).returncode == 0
    before = (tmp_path / "ck").read_bytes()

    def best_fits():
        resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))
    proc = run_cli(*train, "--overwrite", preexec_fn=best_fits)
    assert proc.returncode == 2 and "file size limit" in proc.stderr, proc.stderr
    assert (tmp_path / "ck").read_bytes() == before and not (tmp_path / "ck.best").exists(), proc.stderr
    assert "the best weights of the run before were replaced by this run's before it failed" in proc.stderr
