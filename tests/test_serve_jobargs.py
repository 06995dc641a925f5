"""The service's checks of a job's arguments (graphstream.serve.jobargs) and its runner's handling of a
step's outputs (graphstream.serve.runner), without a server: the mapping to the CLI's argv, which
arguments are paths, where outputs and scratch folders may go, inputs that must exist, the commands'
own preflight, and the claim that lets a rerun finish a step whose output an earlier attempt wrote."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from graphstream import GraphWriter
from graphstream.serve import jobargs
from graphstream.serve.jobargs import JobArgsError, job_steps
from graphstream.serve.runner import _outcome, _run_step, _Status, run_job

pytest.importorskip("fastapi")


def small_store(path: Path, n: int = 64, m: int = 400) -> Path:
    rng = np.random.default_rng(0)
    with GraphWriter(path) as w:
        w.append(rng.integers(0, n, m), rng.integers(0, n, m))
    return path


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    small_store(root / "g.zarr")
    return root.resolve()


def refused(root: Path, kind: str, args: dict, status: int) -> str:
    with pytest.raises(JobArgsError) as info:
        job_steps(kind, args, root)
    assert info.value.status == status, str(info.value)
    return str(info.value)


# -- which arguments are paths --------------------------------------------------------------------

# Every free string argument is confined as a path unless it is listed in TEXT_ARGS. A new option of
# either kind must be placed on purpose: this table fails until it is.
PATH_ARGS = {
    "graphstream dataset": ["out_dir", "root"],
    "graphstream export": ["parts", "out"],
    "graphstream generate": [],
    "graphstream generate rmat": ["out"],
    "graphstream info": ["store"],
    "graphstream ingest": ["source", "out"],
    "graphstream partition": ["store", "work_dir", "out", "nodes"],
    "graphstream snapshots": ["store", "out"],
    "graphstream verify": ["path"],
}


def test_every_path_argument_is_known():
    found = {}
    for kind in jobargs.KINDS:
        for parser in jobargs._parsers(jobargs.command_parser(kind)):
            found[parser.prog] = [a.dest for a in parser._actions if jobargs._is_path(a)]
            written = {a.dest for a in parser._actions} & (jobargs.OUTPUT_ARGS | jobargs.SCRATCH_ARGS)
            # a rerun after a crash may replace an output its earlier attempt wrote (runner.py)
            if written & jobargs.OUTPUT_ARGS:
                assert any(a.dest == "overwrite" for a in parser._actions), parser.prog
    assert found == PATH_ARGS


def test_export_target_is_a_name_not_a_path(root, tmp_path):
    (root / "p4").mkdir()   # exists: inputs must (what is in it is the command's to check)
    for target in ("pyg", "dgl"):
        [step] = job_steps("export", {"parts": "p4", "out": f"p4-{target}", "to": target}, root)
        assert f"--to={target}" in step.argv
        assert step.outputs == (str(root / f"p4-{target}"),)
    assert refused(root, "export", {"parts": "p4", "out": "x", "to": "tf"}, 422) == \
        "graphstream export: error: unknown export target 'tf': expected one of dgl, pyg"


def test_positionals_take_their_names_in_the_help_usage(root):
    """service.md: positionals "by the names in the command's --help usage"; ingest's SRC and info's PATH
    were 422 "unknown args" (only the dests, source and store, were taken)."""
    (root / "e.txt").write_text("0 1\n")
    for name in ("SRC", "src", "source"):
        [step] = job_steps("ingest", {name: "e.txt", "out": "e.zarr"}, root)
        assert str(root / "e.txt") in step.argv
    for name in ("PATH", "path", "store"):
        [step] = job_steps("info", {name: "g.zarr"}, root)
        assert str(root / "g.zarr") in step.argv
    assert "name the same argument" in refused(root, "ingest", {"SRC": "e.txt", "source": "e.txt", "out": "x"},
                                               422)


def test_a_missing_positional_is_named(root):
    """Without its first positional the others moved into its place: export without parts said
    "required: out", dataset's out_dir was taken as its name ("invalid choice: 'c1'")."""
    assert refused(root, "export", {"out": "gx", "to": "pyg"}, 422) == \
        "graphstream export: missing 'parts' (a positional argument)"
    assert "missing 'name'" in refused(root, "dataset", {"out_dir": "c1", "root": "."}, 422)
    # generate's sub-command too (its arguments were "unknown args ['out', 'scale']")
    assert refused(root, "generate", {"out": "g2.zarr", "scale": 5}, 422) == \
        "graphstream generate: missing 'generator' or 'GENERATOR' (a positional argument)"


# -- outputs, scratch folders and inputs ----------------------------------------------------------

def test_work_dir_is_confined_like_an_output(root):
    (root / "scratch").mkdir()
    job_steps("partition", {"store": "g.zarr", "k": 2, "algo": "hdrf", "work_dir": "scratch"}, root)
    job_steps("partition", {"store": "g.zarr", "k": 2, "work_dir": "new-scratch", "out": "p2"}, root)
    # the input store itself, a folder inside it, or another graph store: the run would write into them
    assert "is the graph store 'g.zarr'" in refused(root, "partition", {"store": "g.zarr", "k": 2, "work_dir": "g.zarr"},
                                                    400)
    assert "lies inside" in refused(root, "partition", {"store": "g.zarr", "k": 2, "work_dir": "g.zarr/w"}, 400)
    small_store(root / "other.zarr")
    message = refused(root, "partition", {"store": "g.zarr", "k": 2, "work_dir": "other.zarr"}, 400)
    assert "is the graph store 'other.zarr'" in message and str(root) not in message
    assert "lies inside the output --out" in refused(
        root, "partition", {"store": "g.zarr", "k": 2, "out": "p", "work_dir": "p/w"}, 400)


def test_no_output_inside_a_store_or_dataset(root):
    small_store(root / "other.zarr")
    message = refused(root, "generate", {"generator": "rmat", "out": "other.zarr/g.zarr", "scale": 4}, 400)
    assert "lies inside the graph store 'other.zarr'" in message
    (root / "p4").mkdir()
    (root / "p4" / "manifest.json").write_text(json.dumps({"format": "graphstream.partitions"}))
    assert "lies inside the partitioned dataset 'p4'" in refused(
        root, "partition", {"store": "g.zarr", "k": 2, "out": "p4/p2"}, 400)
    # replacing a dataset whole is what --overwrite is for
    job_steps("partition", {"store": "g.zarr", "k": 2, "out": "p4", "overwrite": True}, root)


def test_no_output_inside_an_earlier_steps_store(root):
    """In a pipeline the earlier step's store is not there yet to be recognised: refused all the same, as
    the same output is as a job of its own once the store exists. A `dataset` folder takes more files."""
    message = refused(root, "pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "nest.zarr", "scale": 6}},
        {"kind": "generate", "args": {"generator": "rmat", "out": "nest.zarr/inner.zarr", "scale": 6}}]}, 400)
    assert message == ("pipeline step 2: generate out 'nest.zarr/inner.zarr': lies inside 'nest.zarr', the output "
                       "of an earlier step; choose a folder of its own")
    assert "the output of an earlier step" in refused(root, "pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "made.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "made.zarr", "k": 2, "algo": "hdrf", "work_dir": "made.zarr"}}]},
        400)
    (root / "datasets").mkdir()
    job_steps("pipeline", {"steps": [
        {"kind": "dataset", "args": {"name": "cora", "out_dir": "cora", "root": "datasets"}},
        {"kind": "generate", "args": {"generator": "rmat", "out": "cora/extra.zarr", "scale": 6}}]}, root)
    assert refused(root, "pipeline", {"steps": [{"kind": "pipeline", "args": {"steps": []}}]}, 422) == \
        "pipeline step 1: kind 'pipeline': a step is one command (dataset, export, generate, info, ingest, " \
        "partition, snapshots, verify), not a pipeline"


def test_inputs_must_exist_unless_an_earlier_step_makes_them(root):
    assert "not found" in refused(root, "partition", {"store": "nope.zarr", "k": 2, "out": "x"}, 400)
    assert "not found" in refused(root, "info", {"store": "nope.zarr"}, 400)
    steps = job_steps("pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "made.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "made.zarr", "k": 2, "out": "made-p2"}},
        {"kind": "export", "args": {"parts": "made-p2", "to": "pyg", "out": "made-pyg"}}]}, root)
    assert [s.outputs for s in steps] == [(str(root / "made.zarr"),), (str(root / "made-p2"),),
                                          (str(root / "made-pyg"),)]
    message = refused(root, "pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "made.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "other.zarr", "k": 2, "out": "p2"}}]}, 400)
    assert message.startswith("pipeline step 2: ") and "not found" in message


def test_the_commands_preflight_runs_at_submission(root):
    """What the CLI refuses before opening anything is a 422 with its message, not a job that fails."""
    assert refused(root, "partition", {"store": "g.zarr", "k": 0, "out": "x"}, 422) == \
        "graphstream partition: error: k must be in [1, 1024], got 0"
    assert "k must be in [1, 1024], got 5000" in refused(root, "partition", {"store": "g.zarr", "k": 5000}, 422)
    assert "unknown algorithm 'nope'" in refused(root, "partition", {"store": "g.zarr", "k": 2, "algo": "nope"}, 422)
    message = refused(root, "partition", {"store": "g.zarr", "k": 2, "algo": "pgc"}, 422)
    assert "needs a snapshot store" in message and str(root) not in message
    # a store an earlier step makes is not there to read its kind: the names of both kinds pass
    job_steps("pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "made.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "made.zarr", "k": 2, "algo": "hdrf"}}]}, root)


def test_generate_parameters_are_refused_at_submission(root):
    """The CLI refused --scale 99 at once; the service accepted the job (201), which then failed."""
    assert "scale must be an integer in [1, 48], got 99" in refused(
        root, "generate", {"generator": "rmat", "out": "g99.zarr", "scale": 99}, 422)


def test_partition_parameters_are_refused_at_submission(root):
    """A seed beyond int64, a balance for hash, a parameter hash does not take: the CLI refused them at once,
    the service accepted the job (201), which then failed."""
    for args, said in (({"seed": 10**23}, "seed must be an integer in [0, 2**63)"),
                       ({"balance": 1.1}, "balance does not apply to hash"),
                       ({"passes": 5}, "--passes does not apply to --algo hash (its own flags: --hash-mode")):
        assert said in refused(root, "partition", {"store": "g.zarr", "k": 2, "algo": "hash", **args}, 422)


def test_a_pipeline_whose_steps_write_one_output_is_refused(root):
    """Two steps writing the same path: accepted, then the second failed on the first's output."""
    message = refused(root, "pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "same.zarr", "scale": 6}},
        {"kind": "ingest", "args": {"source": "g.zarr", "out": "same.zarr"}}]}, 400)
    assert "is 'same.zarr', the output of an earlier step" in message


def test_snapshot_algorithm_names_match_the_dynamic_package():
    from graphstream.commands.partition import SNAPSHOT_ALGORITHMS
    from graphstream.dynamic.partition import ALGORITHMS
    assert set(SNAPSHOT_ALGORITHMS) == set(ALGORITHMS)


# -- the runner: results, reruns and cancels ------------------------------------------------------

def spec_for(root: Path, job_dir: Path, steps, attempt: int) -> dict:
    return {"job_id": "j", "attempt": attempt, "root": str(root), "job_dir": str(job_dir),
            "steps": [s.to_dict() for s in steps], "scheduler": None, "max_running": 1}


def test_results_are_relative_to_the_root(tmp_path):
    root = str(tmp_path / "r")
    spec = {"root": root, "attempt": 1}
    out = _outcome(tmp_path, spec, "succeeded", result={"path": f"{root}/g.zarr", "steps": [{"out": f"{root}/p"}],
                                                        "root": root, "other": f"{root}2/x", "n": 3})
    assert out["result"] == {"path": "g.zarr", "steps": [{"out": "p"}], "root": ".", "other": f"{root}2/x", "n": 3}
    # a path inside a text: ingest's source of several inputs showed the server's root from the second on
    out = _outcome(tmp_path, spec, "succeeded", result={"source": f"raw/a.csv, {root}/raw/b.csv"})
    assert out["result"] == {"source": "raw/a.csv, raw/b.csv"}
    # the root's name as the start of another folder's is that folder's (it read "/r+old/y" as "./+old/y")
    others = [f"{root}+old/y", f"{root} y/z", f"{root}~/y", f"{root}2/x", f"{root}.y/z"]
    out = _outcome(tmp_path, spec, "succeeded", result={"o": others, "twice": f"{root}//a"})
    assert out["result"] == {"o": others, "twice": "a"}
    out = _outcome(tmp_path, spec, "failed", error=f"bad {root}+old/y; no room on {root}")
    assert out["error"] == f"bad {root}+old/y; no room on the service root"
    out = _outcome(tmp_path, spec, "failed", error=f"/mnt{root}/a and nfs:{root}/b are elsewhere")
    assert out["error"] == f"/mnt{root}/a and nfs:{root}/b are elsewhere"
    out = _outcome(tmp_path, spec, "failed", error=f"only 1 GB free on {root}; {root}/g.zarr: bad")
    assert out["error"] == "only 1 GB free on the service root; g.zarr: bad"


def crash_after_commit(job_dir: Path, last_beat: float) -> None:
    """What a server killed between a step's commit and its record leaves: no step-0.json, no result.json,
    the dead attempt's last heartbeat in status.json."""
    (job_dir / "step-0.json").unlink()
    (job_dir / "result.json").unlink()
    status = json.loads((job_dir / "status.json").read_text())
    (job_dir / "status.json").write_text(json.dumps({**status, "heartbeat": last_beat}))


def test_rerun_finishes_a_step_whose_output_the_dead_attempt_wrote(root, tmp_path):
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    steps = job_steps("generate", {"generator": "rmat", "out": "g6.zarr", "scale": 6}, root)
    first = run_job(spec_for(root, job_dir, steps, 1))
    assert first["state"] == "succeeded", first
    crash_after_commit(job_dir, last_beat=time.time())
    again = run_job(spec_for(root, job_dir, steps, 2))
    log = (job_dir / "log").read_text()
    assert again["state"] == "succeeded", (again, log)
    assert again["result"]["num_edges"] == first["result"]["num_edges"] and again["result"]["path"] == "g6.zarr"
    assert "g6.zarr written by the attempt before" in log and "--overwrite" in log


def test_rerun_leaves_an_output_the_dead_attempt_did_not_write(root, tmp_path):
    """Another job's output of the same name (put there after the claim, say while this job's first attempt
    waited on the lock), or one there before the step was claimed: not the job's to replace, however recent;
    the step fails naming it, the output untouched."""
    for case in ("another job's", "before"):
        job_dir = tmp_path / f"job-{case[:5]}"
        job_dir.mkdir()
        out = f"g-{case[:5]}.zarr"
        steps = job_steps("generate", {"generator": "rmat", "out": out, "scale": 6}, root)
        assert run_job(spec_for(root, job_dir, steps, 1))["state"] == "succeeded"
        crash_after_commit(job_dir, last_beat=time.time())
        if case == "another job's":
            shutil.rmtree(root / out)   # removed, and another job's written in its place (a new inode)
            small_store(root / out)
        else:
            claim = json.loads((job_dir / "step-0.claim.json").read_text())
            (job_dir / "step-0.claim.json").write_text(json.dumps({**claim, "fresh": []}))
        before = sorted((p.name, p.stat().st_mtime_ns) for p in (root / out).rglob("*"))
        again = run_job(spec_for(root, job_dir, steps, 2))
        assert again["state"] == "failed" and again["error"] == \
            f"graphstream generate: error: {out}: output exists (pass --overwrite to replace it)"
        assert sorted((p.name, p.stat().st_mtime_ns) for p in (root / out).rglob("*")) == before


def test_a_rerun_of_the_same_attempt_is_an_interrupted_run(root, tmp_path):
    """dask runs a task again when its worker dies: the runner sees that attempt's status.json and ends at
    once as interrupted (counted by the dispatcher, never recorded as the job's result), running nothing."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    steps = job_steps("generate", {"generator": "rmat", "out": "g8.zarr", "scale": 6}, root)
    (job_dir / "status.json").write_text(json.dumps({"attempt": 1, "pid": 4242, "host": "node7", "heartbeat": 1.0}))
    (job_dir / ".stdout-1234abcd").write_text("")
    outcome = run_job(spec_for(root, job_dir, steps, 1))
    assert outcome == {"state": "interrupted", "result": None, "attempt": 1,
                       "error": "its worker (pid 4242 on node7) was lost"}
    assert not (job_dir / "result.json").exists() and not (root / "g8.zarr").exists()
    # the next attempt runs, and clears the dead worker's leftovers in the job's folder
    assert run_job(spec_for(root, job_dir, steps, 2))["state"] == "succeeded"
    assert not list(job_dir.glob(".stdout-*"))


def test_an_earlier_attempts_failure_written_late_does_not_end_the_job(root, tmp_path):
    """The dispatcher lost the scheduler and queued the job again; attempt 1's command, still running, then
    failed for the same loss and wrote result.json: attempt 2 returned it, and one scheduler restart failed a
    job with attempts left. An earlier success is still taken (its server died before recording it)."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    steps = job_steps("generate", {"generator": "rmat", "out": "g9.zarr", "scale": 6}, root)
    (job_dir / "result.json").write_text(json.dumps({
        "state": "failed", "result": None, "attempt": 1,
        "error": "graphstream generate: error: lost the dask scheduler (...); nothing was written"}))
    again = run_job(spec_for(root, job_dir, steps, 2))
    assert again["state"] == "succeeded" and again["attempt"] == 2, again
    assert (root / "g9.zarr").is_dir()
    third = run_job(spec_for(root, job_dir, steps, 3))   # the success is the job's, whichever attempt asks
    assert third == again
    # the same attempt's own failure, its task run again by dask: that failure, not a lost worker
    own = {"state": "failed", "result": None, "attempt": 4, "error": "graphstream generate: error: bad input"}
    (job_dir / "result.json").write_text(json.dumps(own))
    (job_dir / "status.json").write_text(json.dumps({"attempt": 4, "pid": 4242, "host": "node7", "heartbeat": 1.0}))
    assert run_job(spec_for(root, job_dir, steps, 4)) == own


def test_a_damaged_job_file_fails_the_run_naming_it(root, tmp_path):
    """The job's own files, edited by hand: the run fails with one line naming the file (it raised a
    KeyError, which the dispatcher retried as an interrupted run)."""
    steps = job_steps("generate", {"generator": "rmat", "out": "g7.zarr", "scale": 6}, root)
    cases = {"step-0.claim.json": '{"time": 1}', "result.json": '[1, 2]', "step-0.json": '{"num_edges": '}
    for name, text in cases.items():
        job_dir = tmp_path / f"job-{name}"
        job_dir.mkdir()
        if name != "step-0.claim.json":
            (job_dir / "step-0.claim.json").write_text(json.dumps({"time": time.time(), "fresh": []}))
        (job_dir / name).write_text(text)
        outcome = run_job(spec_for(root, job_dir, steps, 1))
        assert outcome["state"] == "failed" and outcome["error"].startswith(f"the job's {name} is damaged"), outcome
        assert json.loads((job_dir / "result.json").read_text()) == outcome
    assert not (root / "g7.zarr").exists()


def test_a_cancel_after_the_commit_leaves_no_output(root, tmp_path, monkeypatch):
    """The command swapped its output into place before the signal took effect: the claimed output is
    removed whole; an output that was there before the claim is not."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    [step] = job_steps("generate", {"generator": "rmat", "out": "late.zarr", "scale": 6}, root)
    with monkeypatch.context() as env:   # as the command left it, just before its exit status was read
        env.setenv("GRAPHSTREAM_PUBLISHED_LOG", str(job_dir / "step.published"))
        small_store(root / "late.zarr")
    (job_dir / "cancel").touch()
    claim = {"time": time.time(), "fresh": [str(root / "late.zarr")]}
    with open(job_dir / "log", "a") as log, _Status(job_dir, 1) as status:
        state, result, error = _run_step(step.to_dict(), spec_for(root, job_dir, [step], 1), job_dir, log, status,
                                         "generate", claim)
    assert (state, result, error) == ("cancelled", None, "cancelled")
    assert not os.path.lexists(root / "late.zarr")
    assert not [p for p in root.iterdir() if p.name.startswith(".late.zarr")]
    assert "removed late.zarr, written before the cancel took effect" in (job_dir / "log").read_text()


def test_a_cancel_leaves_another_jobs_output_of_the_same_name(root, tmp_path):
    """Claimed while absent, then written by another job before this job's command took the lock (the
    command failed on it, then the cancel came): the output is not this job's, and stays."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    [step] = job_steps("generate", {"generator": "rmat", "out": "shared.zarr", "scale": 6}, root)
    claim = {"time": time.time(), "fresh": [str(root / "shared.zarr")]}
    small_store(root / "shared.zarr")   # the other job's, its commands noting nothing in this job's file
    (job_dir / "cancel").touch()
    with open(job_dir / "log", "a") as log, _Status(job_dir, 1) as status:
        state, _, _ = _run_step(step.to_dict(), spec_for(root, job_dir, [step], 1), job_dir, log, status,
                                "generate", claim)
    assert state == "cancelled"
    assert (root / "shared.zarr" / "zarr.json").exists()
    assert "removed" not in (job_dir / "log").read_text()


def test_a_failed_step_leaves_nothing_beside_its_output(root, tmp_path):
    """A command killed by SIGKILL (no unwinding): the job's error says so, not its last progress line, and
    the temporary output, lock and scratch folders it left are cleared."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    [step] = job_steps("generate", {"generator": "rmat", "out": "killed.zarr", "scale": 6}, root)
    spec = spec_for(root, job_dir, [step], 1)
    argv = ["-c", "import fcntl, os, signal, sys; root = sys.argv[1]; "
            "os.mkdir(os.path.join(root, '.killed.zarr.tmp-0badc0de')); "
            "open(os.path.join(root, '.killed.zarr.lock'), 'w').close(); "
            "scratch = os.path.join(root, f'graphstream-parts-{os.getpid()}-abcd1234'); os.mkdir(scratch); "
            "owner = open(os.path.join(scratch, '.owner.lock'), 'w'); fcntl.flock(owner, fcntl.LOCK_EX); "
            "print('graphstream: build: degrees: 1 task', file=sys.stderr, flush=True); "
            "os.kill(os.getpid(), signal.SIGKILL)", str(root)]
    fake = {**step.to_dict(), "kind": "generate"}
    import graphstream.serve.runner as runner
    real = runner.subprocess.Popen

    def popen(cmd, **kw):   # the step's command replaced by one that leaves what a killed build leaves
        return real([cmd[0], *argv], **kw)
    runner.subprocess.Popen = popen
    try:
        with open(job_dir / "log", "a") as log, _Status(job_dir, 1) as status:
            state, _, error = _run_step(fake, spec, job_dir, log, status, "generate", {"fresh": []})
    finally:
        runner.subprocess.Popen = real
    assert (state, error) == ("failed", "the command was killed by SIGKILL (exit status -9)")
    assert sorted(p.name for p in root.iterdir()) == ["g.zarr"]


def test_a_lock_error_does_not_show_the_other_jobs_command(tmp_path):
    """The lock's holder is another job maybe: its pid, host and command line stay out of this job's log."""
    from graphstream.serve.runner import _segment
    line = ("graphstream generate: error: /r/x.zarr: output is in use by pid 11482 on vm (graphstream partition "
            "--out=/r/x.zarr big.zarr --scheduler tcp://127.0.0.1:41145, since 2026-11-30T18:00:00) (lock file "
            "/r/.x.zarr.lock); wait for that run to end or choose another output")
    with open(tmp_path / "log", "w") as log, _Status(tmp_path, 1) as status:
        _segment(line, log, status)
    assert status.error_line == ("graphstream generate: error: /r/x.zarr: output is in use by another run (lock file "
                                 "/r/.x.zarr.lock); wait for that run to end or choose another output")
    assert "11482" not in (tmp_path / "log").read_text()


class _Done:
    """A finished dask future holding ``outcome``."""

    def __init__(self, outcome: dict):
        self.outcome = outcome

    def done(self) -> bool:
        return True

    def result(self) -> dict:
        return self.outcome

    def release(self) -> None:
        pass


@pytest.mark.parametrize("max_attempts", [1, 2])
def test_a_lost_worker_counts_as_an_attempt(tmp_path, max_attempts):
    """The runner's 'interrupted' outcome (dask ran the job again after its worker died) is an interrupted
    attempt: queued again while attempts are left, else failed naming it; never recorded as the result."""
    from graphstream.serve.dispatcher import Dispatcher, _Run
    from graphstream.serve.jobs import JobStore

    store = JobStore(tmp_path / "jobs.db")
    job, _ = store.submit("alice", "generate", {}, [], idempotency_key=None, max_attempts=max_attempts)
    job = store.claim_next()
    dispatcher = Dispatcher(store, None, root=tmp_path, jobs_dir=tmp_path / "jobs", max_running=1, scheduler=None)
    lost = {"state": "interrupted", "result": None, "attempt": 1, "error": "its worker (pid 7 on vm) was lost"}
    dispatcher._runs[job.id] = _Run(job, _Done(lost))
    dispatcher._ended(job.id, dispatcher._runs[job.id])
    after = store.get(job.id)
    if max_attempts == 1:
        assert (after.state, after.error) == ("failed", "interrupted 1 times, last: its worker (pid 7 on vm) was "
                                                        "lost (max_attempts 1)")
    else:
        assert (after.state, after.attempts) == ("queued", 1)
    assert "attempt 1 interrupted (its worker (pid 7 on vm) was lost)" in (tmp_path / "jobs" / job.id / "log").read_text()


def test_the_kind_of_a_store_an_earlier_step_writes_is_its_own_even_over_an_old_one(root):
    """snapshots --overwrite over a graph store, then pgc on it: refused (the old store's kind was read)."""
    small_store(root / "old.zarr")
    job_steps("pipeline", {"steps": [
        {"kind": "snapshots", "args": {"store": "g.zarr", "out": "old.zarr", "num_snapshots": 3, "overwrite": True}},
        {"kind": "partition", "args": {"store": "old.zarr", "k": 2, "algo": "pgc", "out": "old-p2"}}]}, root)


def test_a_pipeline_partitions_the_snapshot_store_an_earlier_step_makes(root, tmp_path):
    """`snapshots` then `partition` of its output: the store is not there at submission to be recognised
    as a snapshot store, and pgc (named, or the default for one) was refused as needing one (a 422)."""
    rng = np.random.default_rng(1)
    with GraphWriter(root / "events.zarr", num_nodes=40, with_time=True) as w:
        w.append(rng.integers(0, 40, 600), rng.integers(0, 40, 600), time=np.sort(rng.integers(0, 1000, 600)))
    for algo in ({"algo": "pgc"}, {}):
        out = f"parts-{algo.get('algo', 'default')}"
        steps = job_steps("pipeline", {"steps": [
            {"kind": "snapshots", "args": {"store": "events.zarr", "out": f"{out}.snap.zarr", "num_snapshots": 6}},
            {"kind": "partition", "args": {"store": f"{out}.snap.zarr", "k": 2, "out": out, **algo}}]}, root)
        job_dir = tmp_path / f"job-{out}"
        job_dir.mkdir()
        done = run_job(spec_for(root, job_dir, steps, 1))
        assert done["state"] == "succeeded", (done, (job_dir / "log").read_text())
        assert done["result"]["steps"][1]["algorithm"] == "pgc"
    # a graph store an earlier step makes is still refused for pgc, at submission
    message = refused(root, "pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "made.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "made.zarr", "k": 2, "algo": "pgc"}}]}, 422)
    assert message.startswith("pipeline step 2: ") and "needs a snapshot store" in message


def test_a_cancelled_pipeline_leaves_no_output_of_its_earlier_steps(root, tmp_path, monkeypatch):
    """The docs' promise, "a cancelled job leaves nothing, and the same job can be submitted again": the
    first step's store stayed, and the job submitted again failed on it ("output exists")."""
    from graphstream.serve import runner
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (root / "before.zarr").mkdir()   # there before the job: not the job's to remove
    steps = job_steps("pipeline", {"steps": [
        {"kind": "generate", "args": {"generator": "rmat", "out": "first.zarr", "scale": 6}},
        {"kind": "partition", "args": {"store": "first.zarr", "k": 2, "out": "first-p2"}}]}, root)
    real = runner._run_step

    def then_cancel(step, *args, **kwargs):   # the cancel comes while step 1 ends
        outcome = real(step, *args, **kwargs)
        (job_dir / "cancel").touch()
        return outcome

    monkeypatch.setattr(runner, "_run_step", then_cancel)
    outcome = run_job(spec_for(root, job_dir, steps, 1))
    assert outcome["state"] == "cancelled", outcome
    assert not os.path.lexists(root / "first.zarr") and not os.path.lexists(root / "first-p2")
    assert (root / "before.zarr").is_dir()
    assert "step 1: removed first.zarr (the job was cancelled)" in (job_dir / "log").read_text()


def test_an_output_name_too_long_or_under_a_file_is_refused_at_submission(root):
    """A 260-byte name failed at its lock file (ENAMETOOLONG) inside the run, which the service took for a
    lost worker: three attempts, then the clean-up raised and stopped the dispatcher for every job."""
    message = refused(root, "generate", {"generator": "rmat", "out": "b" * 260, "scale": 6}, 400)
    assert "its name is 260 bytes; at most 223" in message and str(root) not in message
    (root / "notes.txt").write_text("x")
    message = refused(root, "generate", {"generator": "rmat", "out": "notes.txt/x.zarr", "scale": 6}, 400)
    assert "its folder 'notes.txt' is a file" in message and str(root) not in message
    # deeper, or a folder that is not there (the job failed after it was accepted)
    for out, said in (("notes.txt/x/g.zarr", "its folder 'notes.txt' is a file"),   # was "'notes.txt/x' does not exist"
                      ("nodir/g.zarr", "its folder 'nodir' does not exist")):
        assert said in refused(root, "generate", {"generator": "rmat", "out": out, "scale": 6}, 400)
    # an earlier step's output may hold a later one's folder
    job_steps("pipeline", {"steps": [
        {"kind": "dataset", "args": {"name": "cora", "out_dir": "d", "root": "g.zarr"}},
        {"kind": "generate", "args": {"generator": "rmat", "out": "d/g6.zarr", "scale": 6}}]}, root)


def test_a_run_that_raises_fails_the_job_in_one_line(root, tmp_path, monkeypatch):
    """An error of the run itself (not a lost worker) is the job's failure: raised out of the task, the
    dispatcher counted it as an interrupted attempt and ran it again, the same way."""
    from graphstream.serve import runner
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    steps = job_steps("generate", {"generator": "rmat", "out": "g8.zarr", "scale": 6}, root)

    def broken(*args, **kwargs):
        raise NotADirectoryError(20, "Not a directory", str(root / "x" / ".g8.zarr.lock"))

    monkeypatch.setattr(runner, "_run_step", broken)
    outcome = run_job(spec_for(root, job_dir, steps, 1))
    assert outcome["state"] == "failed" and outcome["error"].startswith("NotADirectoryError: ")
    assert str(root) not in outcome["error"]


def test_a_job_the_dispatcher_cannot_follow_fails_alone(tmp_path):
    """One job's trouble (its last attempt's clean-up raising ENAMETOOLONG) stopped the dispatcher's
    thread: no job ran for anyone, and a restart adopted the job and stopped again. It fails that job."""
    from graphstream.serve.dispatcher import Dispatcher, _Run
    from graphstream.serve.jobs import JobStore

    store = JobStore(tmp_path / "jobs.db")
    out = str(tmp_path / ("b" * 260))
    job, _ = store.submit("alice", "generate", {}, [{"kind": "generate", "argv": [], "cluster": False,
                                                     "outputs": [out]}], idempotency_key=None, max_attempts=1)
    job = store.claim_next()
    dispatcher = Dispatcher(store, None, root=tmp_path, jobs_dir=tmp_path / "jobs", max_running=1, scheduler=None)

    class Raising(_Done):
        def result(self):
            raise OSError(36, "File name too long")

    dispatcher._runs[job.id] = _Run(job, Raising(None))
    dispatcher._tick()   # the last attempt's clean-up: the lock of a name too long for one
    after = store.get(job.id)
    assert after.state == "failed" and "File name too long" in after.error
    assert dispatcher._runs == {}


def test_the_datasets_listing_shows_no_path_of_the_server(root):
    """GET /api/datasets showed a store's source as the server's absolute path (the results and reports
    were already relative)."""
    from graphstream.cli import main
    from graphstream.serve.datasets import list_datasets
    (root / "raw").mkdir()
    (root / "raw" / "edges.txt").write_text("0 1\n1 2\n")
    assert main(["ingest", str(root / "raw" / "edges.txt"), str(root / "e.zarr")]) == 0
    listed = {d["path"]: d for d in list_datasets(root)}
    assert listed["e.zarr"]["source"] == "raw/edges.txt"
    assert str(root) not in json.dumps(list(listed.values()))


def test_the_datasets_listing_takes_a_node_data_folder(root):
    """A `graphstream dataset` folder (now a kind of its own, node_data) broke GET /api/datasets with a 500
    (KeyError 'node_data'), with or without node_data.json; its graph.zarr is listed too, as before."""
    from graphstream.serve.datasets import list_datasets
    from graphstream.store.nodedata import write_manifest

    folder = root / "cora-like"
    folder.mkdir()
    small_store(folder / "graph.zarr")
    n = json.loads((folder / "graph.zarr" / "zarr.json").read_text())["attributes"]["num_nodes"]
    np.save(folder / "features.npy", np.zeros((n, 4), dtype=np.float32))
    for manifest in (False, True):
        if manifest:
            write_manifest(folder)
        listed = {d["path"]: d for d in list_datasets(root)}
        assert listed["cora-like"]["kind"] == "node_data" and "error" not in listed["cora-like"], listed
        assert listed["cora-like"]["checksums"] is manifest and listed["cora-like"]["graph"] == "cora-like/graph.zarr"
        assert listed["cora-like/graph.zarr"]["kind"] == "graph"
    message = refused(root, "generate", {"generator": "rmat", "out": "cora-like/g.zarr", "scale": 6}, 400)
    assert "lies inside the node data folder 'cora-like'" in message, message


def test_a_queued_job_cancelled_says_so(tmp_path):
    """A queued job's cancel left cancel_requested false and no error, unlike a running one's."""
    from graphstream.serve.jobs import JobStore
    store = JobStore(tmp_path / "jobs.db")
    job, _ = store.submit("alice", "generate", {}, [], idempotency_key=None, max_attempts=1)
    done = store.request_cancel(job.id)
    assert (done.state, done.cancel_requested, done.error) == ("cancelled", True, "cancelled before it started")


def test_finished_jobs_logs_are_removed_after_their_keeping_time(tmp_path):
    """A long-lived service's folder grew by every job's log for ever. Past --keep-logs-days the folder of a
    finished job goes (its record and result stay, and the log API says 410); running and recent jobs keep
    theirs."""
    from fastapi.testclient import TestClient

    from graphstream.serve.app import ServiceConfig, create_app
    from graphstream.serve.dispatcher import Dispatcher
    from graphstream.serve.jobs import JobStore

    store = JobStore(tmp_path / "jobs.db")
    token = store.create_token("alice")
    ids = []
    for _ in range(3):
        job, _ = store.submit("alice", "generate", {}, [], idempotency_key=None, max_attempts=1)
        store.claim_next()
        ids.append(job.id)
    old, recent, running = ids
    store.finish(old, "succeeded", result={"k": 1})
    store.finish(recent, "failed", error="bad")
    store._db().execute("UPDATE jobs SET finished_at = ? WHERE id = ?", (time.time() - 40 * 86400, old))
    dispatcher = Dispatcher(store, None, root=tmp_path, jobs_dir=tmp_path / "jobs", max_running=1, scheduler=None,
                            keep_logs_seconds=30 * 86400)
    for job_id in ids:
        (tmp_path / "jobs" / job_id).mkdir(parents=True)
        (tmp_path / "jobs" / job_id / "log").write_text("lines\n")
    assert dispatcher.prune_logs() == [old]
    assert not (tmp_path / "jobs" / old).exists()
    assert (tmp_path / "jobs" / recent / "log").exists() and (tmp_path / "jobs" / running / "log").exists()
    assert store.get(old).result == {"k": 1}
    api = TestClient(create_app(ServiceConfig(root=tmp_path), store, dispatcher))
    auth = {"Authorization": f"Bearer {token}"}
    gone = api.get(f"/api/jobs/{old}/log", headers=auth)
    assert gone.status_code == 410 and "--keep-logs-days" in gone.json()["detail"]
    assert api.get(f"/api/jobs/{recent}/log", headers=auth).text == "lines\n"
    assert api.get(f"/api/jobs/{old}", headers=auth).json()["state"] == "succeeded"


def test_a_job_database_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    """A full disk or a read-only jobs.sqlite: `serve` and `serve token create` were 21-line tracebacks
    ("sqlite3.OperationalError: database or disk is full"), no path."""
    import sqlite3

    from graphstream.cli import main
    from graphstream.errors import GraphStreamError
    from graphstream.serve.jobs import JobStore

    db = tmp_path / "jobs.sqlite"
    JobStore(db)
    real = sqlite3.connect

    def full(*args, **kwargs):
        conn = real(*args, **kwargs)

        class Full:   # every statement fails as on a full disk
            def __getattr__(self, name):
                if name in ("execute", "executescript"):
                    def fail(*a, **k):
                        raise sqlite3.OperationalError("database or disk is full")
                    return fail
                return getattr(conn, name)
        return Full()
    monkeypatch.setattr(sqlite3, "connect", full)
    with pytest.raises(GraphStreamError, match=f"{db}: the job database cannot be written .*disk is full"):
        JobStore(db)
    assert main(["serve", "token", "create", "bob", "--db", str(db)]) == 2


def test_a_read_only_job_database_is_refused_at_start(tmp_path, monkeypatch):
    """A read-only jobs.sqlite (its schema there already, so opening it wrote nothing) started the server;
    its first job was a 500 with a traceback."""
    import sqlite3

    from graphstream.errors import GraphStreamError
    from graphstream.serve.jobs import JobStore

    db = tmp_path / "jobs.sqlite"
    JobStore(db)
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda path, **kw: real(f"file:{path}?mode=ro", uri=True, **kw))
    with pytest.raises(GraphStreamError, match="the job database cannot be written .*readonly"):
        JobStore(db)
