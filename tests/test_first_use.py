"""What a newcomer following the docs runs into: the slips of a first session get one clear line and exit 2
(or, for a closed pipe, no word at all), and the figures printed are the ones of what was written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphstream import GraphWriter, open_store
from graphstream.assemble import build_partitions
from graphstream.cli import main as cli_main
from graphstream.partition.plan import PartitionPlan


def _cli(*args, stdin=None, shell_pipe: str | None = None, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GRAPHSTREAM_PROGRESS": "0"}
    if shell_pipe is None:
        return subprocess.run([sys.executable, "-m", "graphstream", *map(str, args)], capture_output=True,
                              text=True, env=env, cwd=cwd)
    words = " ".join(f"'{a}'" for a in args)
    return subprocess.run(["bash", "-c", f"{sys.executable} -m graphstream {words} {shell_pipe}; "
                           "echo \"rc=${PIPESTATUS[0]}\""], capture_output=True, text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("first") / "g.zarr"
    rng = np.random.default_rng(0)
    with GraphWriter(path, num_nodes=60, directed=False, chunk_size=64) as w:
        w.append(rng.integers(0, 60, 300), rng.integers(0, 60, 300))
    return path


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_a_closed_stdout_is_no_traceback(store, flags):
    """``graphstream info g.zarr | true``: a BrokenPipeError traceback, exit 1."""
    proc = _cli("info", store, *flags, shell_pipe="| true")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert "rc=141" in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", ["ingest LOOP out.zarr", "export LOOP --to pyg out", "partition LOOP -k 2",
                                     "dataset cora out --root LOOP"])
def test_a_loop_of_symbolic_links_is_one_line(tmp_path, command):
    """Two links naming each other given as an input: RuntimeError "Symlink loop" traceback, exit 1."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    proc = _cli(*command.replace("LOOP", str(tmp_path / "a")).split(), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_column_beyond_the_line_is_named(tmp_path):
    """``--src-column 5`` on a 2-field file with a header: "non-numeric destination id 'b' in column 1 (pass
    --relabel for string ids)", the wrong fix."""
    (tmp_path / "e.csv").write_text("a,b\n0,1\n1,2\n")
    proc = _cli("ingest", tmp_path / "e.csv", tmp_path / "o.zarr", "--src-column", "5")
    assert proc.returncode == 2
    assert "src column 5 is beyond the 2 fields of the first line" in proc.stderr, proc.stderr
    assert not (tmp_path / "o.zarr").exists()


def test_relabel_takes_unsigned_64_bit_ids(tmp_path):
    """An id past 2**63 - 1 (an unsigned 64-bit hash) was refused with --relabel, which promises arbitrary
    64-bit ids, unless another line held a word."""
    (tmp_path / "u.txt").write_text("9223372036854775808 1\n1 18446744073709551615\n")
    assert cli_main(["ingest", str(tmp_path / "u.txt"), str(tmp_path / "u.zarr"), "--relabel"]) == 0
    s = open_store(tmp_path / "u.zarr")
    assert list(s.id_map()) == ["9223372036854775808", "1", "18446744073709551615"]
    batch = next(iter(s.stream()))
    assert list(batch.src) == [0, 1] and list(batch.dst) == [1, 2]
    proc = _cli("ingest", tmp_path / "u.txt", tmp_path / "v.zarr")   # without --relabel: one line, its fix
    assert proc.returncode == 2 and "pass --relabel" in proc.stderr, proc.stderr


def test_a_truncated_npy_is_called_truncated(tmp_path):
    """A header declaring 10**13 rows over 64 bytes of data: "needs about 60 TB of disk" hid the truncation."""
    with open(tmp_path / "h.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (10**13, 2)})
        f.write(b"\0" * 64)
    proc = _cli("ingest", tmp_path / "h.npy", tmp_path / "h.zarr")
    assert proc.returncode == 2 and "file is truncated" in proc.stderr, proc.stderr


def test_a_folder_or_file_given_for_a_store_is_named(tmp_path, store):
    """``partition w/cora`` (the dataset folder, not w/cora/graph.zarr): "not a Zarr group
    (GroupNotFoundError: No group found in store ...)"."""
    folder = tmp_path / "cora"
    folder.mkdir()
    os.symlink(store, folder / "graph.zarr")
    proc = _cli("partition", folder, "-k", "2")
    assert proc.returncode == 2 and f"did you mean {folder / 'graph.zarr'}?" in proc.stderr, proc.stderr
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "manifest.json").write_text("{}")
    proc = _cli("estimate", tmp_path / "parts", "-k", "2")
    assert proc.returncode == 2 and "a partitioned dataset" in proc.stderr, proc.stderr
    (tmp_path / "e.txt").write_text("0 1\n")
    proc = _cli("partition", tmp_path / "e.txt", "-k", "2")
    assert proc.returncode == 2 and "graphstream ingest makes a graph store" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, named", [
    (("partition", "STORE", "-k", "4", "--bogus"), "graphstream partition: error: unrecognized arguments: --bogus"),
    (("partition", "STORE", "-k", "x"), "graphstream partition: error: argument -k/--parts: invalid int value"),
    (("train", "STORE", "--model", "gcnn"), "graphstream train: error: argument --model: invalid choice"),
])
def test_argument_errors_are_one_line(store, args, named):
    """argparse printed its usage block first (16 lines for train), and named "graphstream:" for an
    unknown flag of a command."""
    proc = _cli(*[str(store) if a == "STORE" else a for a in args])
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and named in proc.stderr, proc.stderr


def test_a_work_dir_whose_parent_is_missing_is_refused(tmp_path, store):
    """``--work-dir /nonexistent/x`` made the whole tree and left the vertex stream there."""
    proc = _cli("partition", store, "-k", "2", "--work-dir", tmp_path / "typo" / "x")
    assert proc.returncode == 2 and f"folder {tmp_path / 'typo'} does not exist" in proc.stderr, proc.stderr
    assert not (tmp_path / "typo").exists()


def test_pyg_export_counts_the_halo_it_exports(tmp_path, store):
    """With --halo-hops 2, ``parts[i].num_halo`` was the part's 2-hop halo while the export holds the
    inner rows' edges and the 1-hop halo they reach."""
    pytest.importorskip("torch")
    owner = (np.arange(60) % 3).astype(np.int32)
    plan = PartitionPlan(algorithm="test", num_parts=3, owner=owner, params={"k": 3}, metrics={})
    build_partitions(open_store(store), plan, tmp_path / "parts", halo_hops=2)
    proc = _cli("export", tmp_path / "parts", "--to", "pyg", tmp_path / "pyg", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["parts"]
    import torch
    for p, row in enumerate(rows):
        graph = torch.load(tmp_path / "pyg" / f"part_{p}" / "graph.pt", weights_only=True)
        reached = set(graph["row"].tolist()) | set(graph["col"].tolist())
        inner = set(np.flatnonzero(owner == p).tolist())
        assert row["num_halo"] == len(reached - inner), (p, row)


def test_stdout_closed_or_full(store, tmp_path):
    """Started with stdout closed (``>&-``): an AttributeError traceback at the final flush (sys.stdout is
    None). On a full stdout (``>/dev/full``): an OSError traceback, exit 1."""
    closed = _cli("info", store, shell_pipe=">&-")
    assert "Traceback" not in closed.stderr and "rc=0" in closed.stdout, closed.stdout + closed.stderr
    if Path("/dev/full").exists():
        full = _cli("info", store, "--json", shell_pipe=">/dev/full")
        assert "rc=2" in full.stdout and "Traceback" not in full.stderr, full.stdout + full.stderr
        assert "cannot write the result to stdout" in full.stderr


def test_work_dir_that_is_a_file_or_under_one(tmp_path, store):
    (tmp_path / "afile").write_text("")
    for work, named in (("afile", "a file, not a folder"), ("afile/x", "afile is a file, not a folder"),
                        ("afile/x/y", "afile is a file, not a folder")):   # was "folder afile/x does not exist"
        proc = _cli("partition", store, "-k", "2", "--work-dir", tmp_path / work)
        assert proc.returncode == 2 and named in proc.stderr, proc.stderr


def test_serve_port_out_of_range_is_one_line(tmp_path):
    proc = _cli("serve", "--root", tmp_path, "--port", "99999")
    assert proc.returncode == 2 and "--port must be in [0, 65535]" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_report_skips_a_sibling_that_is_a_loop_of_links(tmp_path, store):
    """A symbolic-link loop beside the dataset: a RuntimeError traceback from the report's look at its
    siblings (other partitionings of the same graph)."""
    owner = (np.arange(60) % 2).astype(np.int32)
    plan = PartitionPlan(algorithm="test", num_parts=2, owner=owner, params={"k": 2}, metrics={})
    build_partitions(open_store(store), plan, tmp_path / "parts")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    proc = _cli("report", tmp_path / "parts", "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_the_paths_a_command_reports_are_absolute(store, tmp_path):
    """README: paths in --json are absolute. partition's "out", report's "html" and dataset's "path" and
    "graph" were the relative paths as given."""
    import json
    import shutil

    shutil.copytree(store, tmp_path / "g.zarr")
    proc = _cli("partition", "g.zarr", "-k", "2", "--algo", "hash", "--out", "parts", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["out"] == str(tmp_path / "parts")
    proc = _cli("report", "parts", "--html", "r.html", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["html"] == str(tmp_path / "r.html")
    proc = _cli("estimate", "g.zarr", "-k", "2", "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["path"] == str(tmp_path / "g.zarr"), proc.stderr
    proc = _cli("info", "nope.zarr", cwd=tmp_path)
    assert proc.returncode == 2 and f"{tmp_path / 'nope.zarr'}: no such file or folder" in proc.stderr
    root = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if (root / "planetoid").is_dir():
        proc = _cli("dataset", "cora", "d", "--root", root, "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert (out["path"], out["graph"]) == (str(tmp_path / "d"), str(tmp_path / "d" / "graph.zarr"))


def test_a_signal_once_the_command_finished_is_said_not_silent(store):
    """SIGTERM while the result was printed (the output already committed) killed the process without a word
    (status -15): a supervisor took a finished run for a failed one. It still stops the printing at once (a
    stalled reader must not hold it off)."""
    script = ("import os, signal, sys\n"
              "from graphstream import cli\n"
              "real = cli._print_human\n"
              "def printing(result, args):\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    real(result, args)\n"
              "cli._print_human = printing\n"
              f"sys.exit(cli.main(['info', {str(store)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "GRAPHSTREAM_PROGRESS": "0"})
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert ("graphstream info: SIGTERM received once the command had finished: its output is complete, the "
            "result printed may be cut short") in proc.stderr, proc.stderr
