"""The dask.distributed engine (graphstream/cluster.py) on a real multi-process cluster."""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from graphstream.cluster import (
    ClusterConfig,
    ClusterError,
    check_visible,
    open_client,
    run_task,
    run_tasks,
    save_shard,
    split_range,
    worker_env,
    worker_peak_rss,
    workers_on_this_machine,
)
from graphstream.commands.flags import add_cluster
from graphstream.errors import InputFormatError, ParameterError

DASK = str(Path(sys.executable).with_name("dask"))


def _pid_and_sum(a: int, b: int, c: int = 0) -> tuple[int, int]:
    return a + b + c, os.getpid()


def _sized(a: int, *, size: int, unit: str, resources: str) -> tuple[int, str, str]:
    return a * size, unit, resources


def _started_at(i: int, seconds: float) -> tuple[int, float]:
    start = time.monotonic()
    time.sleep(seconds)
    return i, start


def _bad_input(i: int) -> None:
    raise InputFormatError(f"edges.txt: line {i}: not an integer")


def test_config_from_flags_and_environment(monkeypatch):
    parser = argparse.ArgumentParser()
    add_cluster(parser)
    monkeypatch.delenv("GRAPHSTREAM_SCHEDULER", raising=False)
    assert ClusterConfig.from_args(parser.parse_args([])).in_process
    assert ClusterConfig.from_args(parser.parse_args(["--workers", "3", "--threads-per-worker", "2"])) == \
        ClusterConfig(workers=3, threads_per_worker=2)
    monkeypatch.setenv("GRAPHSTREAM_SCHEDULER", "tcp://10.0.0.1:8786")
    assert ClusterConfig.from_args(parser.parse_args([])).scheduler == "tcp://10.0.0.1:8786"
    # an explicit --workers wins over the environment
    assert ClusterConfig.from_args(parser.parse_args(["--workers", "1"])).workers == 1
    with pytest.raises(SystemExit):   # argparse: the two are mutually exclusive
        parser.parse_args(["--workers", "1", "--scheduler", "tcp://x:1"])
    for bad in ({"workers": 0}, {"threads_per_worker": 0}, {"workers": 1, "scheduler": "tcp://x:1"}):
        with pytest.raises(ParameterError):
            ClusterConfig(**bad)


def test_flags_a_local_cluster_does_not_take_are_refused(monkeypatch):
    """--workers 1000000 grew the client for a minute without starting a worker; --threads-per-worker 2 alone
    was set aside without a word (0 alone was refused)."""
    from graphstream.cluster import max_local_workers
    parser = argparse.ArgumentParser()
    add_cluster(parser)
    monkeypatch.delenv("GRAPHSTREAM_SCHEDULER", raising=False)
    with pytest.raises(ParameterError, match="--threads-per-worker applies with --workers N"):
        ClusterConfig.from_args(parser.parse_args(["--threads-per-worker", "2"]))
    # with a running cluster (the flag, or the variable) it was set aside without a word too
    with pytest.raises(ParameterError, match="the workers of the cluster at tcp://h:8786 have the threads"):
        ClusterConfig.from_args(parser.parse_args(["--scheduler", "tcp://h:8786", "--threads-per-worker", "2"]))
    monkeypatch.setenv("GRAPHSTREAM_SCHEDULER", "tcp://h:8786")
    with pytest.raises(ParameterError, match="the workers of the cluster at tcp://h:8786 have the threads"):
        ClusterConfig.from_args(parser.parse_args(["--threads-per-worker", "2"]))
    monkeypatch.delenv("GRAPHSTREAM_SCHEDULER")
    with pytest.raises(ParameterError, match="--workers 1000000: a local cluster's workers are processes"):
        ClusterConfig(workers=1_000_000)
    assert ClusterConfig(workers=max_local_workers()).workers >= 64


def test_a_running_cluster_without_workers_is_waited_for_then_refused(monkeypatch, capsys):
    """With no worker yet, the paths were "checked" on none and the command hung without a word."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None) as cluster:
        monkeypatch.setenv("GRAPHSTREAM_WORKER_WAIT", "1")
        start = time.monotonic()
        with pytest.raises(ClusterError, match="no dask worker joined the cluster at .* within 1 s"), \
                open_client(ClusterConfig(scheduler=cluster.scheduler_address)):
            pass
        assert time.monotonic() - start < 30
    monkeypatch.setenv("GRAPHSTREAM_WORKER_WAIT", "0")   # dask's timeout of 0 is none: it waited for ever
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None) as cluster, \
            pytest.raises(ClusterError, match="within 0 s"), \
            open_client(ClusterConfig(scheduler=cluster.scheduler_address)):
        pass
    monkeypatch.setenv("GRAPHSTREAM_WORKER_WAIT", "soon")
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None) as cluster, \
            pytest.raises(ParameterError, match="GRAPHSTREAM_WORKER_WAIT='soon'"), \
            open_client(ClusterConfig(scheduler=cluster.scheduler_address)):
        pass


def test_an_output_workers_cannot_see_is_not_sent_to_work_dir(dask_client, tmp_path):
    """The temporary sibling of an output lies beside it: the advice was "give --work-dir", a flag
    generate, ingest, export and snapshots do not have, and which would not move it."""
    with pytest.raises(ClusterError, match=r"\.out\.zarr\.tmp-abc; write the output to a folder every worker sees"):
        check_visible(dask_client, tmp_path / ".out.zarr.tmp-abc")
    with pytest.raises(ClusterError, match="graphstream-parts-1-x; give --work-dir a folder every worker sees"):
        check_visible(dask_client, tmp_path / "graphstream-parts-1-x")


def test_in_process_has_no_client():
    with open_client(ClusterConfig()) as client:
        assert client is None


def test_tasks_run_on_worker_processes_in_order(dask_client):
    results = run_tasks(dask_client, "sum", _pid_and_sum, [(i, 1) for i in range(8)], c=10)
    assert [r[0] for r in results] == [i + 11 for i in range(8)]
    assert os.getpid() not in {r[1] for r in results}
    assert run_task(dask_client, "one", _pid_and_sum, 2, 3)[0] == 5
    assert all(rss > 0 for rss in worker_peak_rss(dask_client).values())


def test_task_keywords_named_like_run_tasks_own_reach_the_task(dask_client):
    """``unit``, ``size`` and ``resources`` are run_tasks's own: given as task_kwargs they go to the task."""
    got = run_tasks(dask_client, "sized", _sized, [(1,), (2,)], unit="edge", size=lambda t: t[0],
                    task_kwargs={"size": 10, "unit": "part", "resources": "r"})
    assert got == [(10, "part", "r"), (20, "part", "r")]
    assert run_task(dask_client, "one", _sized, 3, task_kwargs={"size": 2, "unit": "u", "resources": ""})[0] == 6


def test_tasks_with_costs_start_largest_first_as_threads_free_up(dask_client):
    """The two largest start at once (2 worker threads), each other one only when a thread is free,
    in decreasing cost; the results come back in the order of the tasks."""
    costs = [1, 5, 2, 4, 3]
    got = run_tasks(dask_client, "lpt", _started_at, [(i, 0.05 * c) for i, c in enumerate(costs)], cost=costs)
    assert [i for i, _ in got] == list(range(5))
    starts = sorted(range(5), key=lambda i: got[i][1])
    assert set(starts[:2]) == {1, 3}
    assert starts[2:] == [4, 2, 0]
    # task 4 waits for task 3 (0.2 s), not for the scheduler's queue
    assert got[4][1] - got[3][1] >= 0.19


def test_a_task_error_is_raised_as_itself(dask_client):
    with pytest.raises(InputFormatError, match="line 3"):
        run_tasks(dask_client, "bad", _bad_input, [(3,)])


def test_a_path_a_worker_cannot_see_is_named(dask_client, tmp_path):
    check_visible(dask_client, tmp_path)
    with pytest.raises(ClusterError, match="cannot see .*nowhere"):
        check_visible(dask_client, tmp_path / "nowhere")
    # every missing path at once (it named the first; the next run named the second)
    with pytest.raises(ClusterError) as caught:
        check_visible(dask_client, tmp_path / "a", tmp_path, tmp_path / "b")
    message = str(caught.value)
    assert f"{tmp_path / 'a'}; {tmp_path / 'b'}: every path" in message, message
    workers = len(dask_client.scheduler_info()["workers"])
    assert (f"(and {workers - 1} other worker(s))" in message) == (workers > 1), message


def test_local_workers_keep_glibc_s_dynamic_mmap_threshold(dask_client):
    """dask's nanny sets MALLOC_TRIM_THRESHOLD_, which makes every stage ~2x slower: open_client unsets it."""
    found = dask_client.run(worker_env, "MALLOC_TRIM_THRESHOLD_")
    assert len(found) == 2 and set(found.values()) == {None}
    assert set(dask_client.run(worker_env, "GRAPHSTREAM_PROGRESS").values()) == {"0"}   # the worker's own env


def test_local_workers_run_openmp_s_passive_wait_policy_unless_one_is_set(dask_client):
    """A worker's numba threads spin between its tasks otherwise (graphstream._resources.quiet_openmp); a policy
    set in this process's environment reaches the workers as it is."""
    found = set(dask_client.run(worker_env, "OMP_WAIT_POLICY").values())
    assert found == {os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def _stream_interval(dask_worker) -> float:
    return dask_worker.batched_stream.interval


def _scheduler_stream_intervals(dask_scheduler) -> list[float]:
    return [c.interval for c in (*dask_scheduler.stream_comms.values(), *dask_scheduler.client_comms.values())]


def test_a_started_cluster_streams_its_messages_within_a_millisecond():
    """dask's batching intervals (10 ms from the client, 5 ms and 2 ms from the scheduler and workers) held
    every wave of tasks back; a cluster of the command's own runs at 1 ms, a worker restarted after a
    fault too (graphstream._dask_plugins)."""
    from graphstream._dask_plugins import STREAM_INTERVAL_S
    with open_client(ClusterConfig(workers=2)) as client:
        assert client.scheduler_comm.interval == STREAM_INTERVAL_S
        assert set(client.run_on_scheduler(_scheduler_stream_intervals)) == {STREAM_INTERVAL_S}
        assert set(client.run(_stream_interval).values()) == {STREAM_INTERVAL_S}
        first = sorted(client.scheduler_info()["workers"])[0]
        client.restart_workers([first])
        assert set(client.run(_stream_interval).values()) == {STREAM_INTERVAL_S}
        assert set(client.run_on_scheduler(_scheduler_stream_intervals)) == {STREAM_INTERVAL_S}


def test_workers_on_this_machine_are_told_from_remote_ones(dask_client):
    assert workers_on_this_machine(dask_client)   # the local cluster: state files need no flush to disk

    class Remote:
        def scheduler_info(self):
            return {"workers": {"tcp://127.0.0.1:4000": {}, "tcp://203.0.113.7:4000": {}}}
    assert not workers_on_this_machine(Remote())


def test_shards_are_whole_or_absent(tmp_path):
    path = save_shard(tmp_path / "part-0.npy", np.arange(10))
    assert np.array_equal(np.load(path), np.arange(10))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-0.npy"]


def test_split_range_aligns_inner_bounds():
    assert split_range(10, 3) == [(0, 4), (4, 8), (8, 10)]
    assert split_range(100, 3, align=16) == [(0, 48), (48, 96), (96, 100)]
    assert split_range(0, 4) == []
    assert split_range(5, 10) == [(i, i + 1) for i in range(5)]


def scheduler_address(file: Path, timeout: float = 60) -> str:
    """The address in a dask scheduler file once it is written whole: it exists, empty, for a moment first
    (reading it then failed a run with a JSONDecodeError)."""
    end = time.monotonic() + timeout
    while True:
        try:
            return json.loads(file.read_text())["address"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            if time.monotonic() > end:
                raise TimeoutError(f"{file}: no scheduler address after {timeout} s") from None
            time.sleep(0.05)


def test_a_lost_scheduler_is_one_error_not_a_hang(tmp_path):
    sched_file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                  "--scheduler-file", str(sched_file)], stderr=subprocess.DEVNULL)
    worker = None
    try:
        address = scheduler_address(sched_file)
        worker = subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--no-dashboard",
                                   "--local-directory", str(tmp_path / "w")], stderr=subprocess.DEVNULL)
        with open_client(ClusterConfig(scheduler=address)) as client:
            client.wait_for_workers(1, timeout=60)
            killer = threading.Timer(2.0, scheduler.send_signal, (signal.SIGKILL,))
            killer.start()
            start = time.time()
            with pytest.raises(ClusterError, match="lost the dask scheduler"):
                # time.sleep: a function the scheduler and a bare `dask worker` can import (not this module's)
                run_tasks(client, "slow", time.sleep, [(1.5,)] * 20)
            assert time.time() - start < 20
    finally:
        for p in (worker, scheduler):
            if p is not None:
                p.kill()
                p.wait()


def test_an_unreachable_scheduler_is_one_error():
    with pytest.raises(ClusterError, match="cannot reach the dask scheduler at tcp://127.0.0.1:9"):
        with open_client(ClusterConfig(scheduler="tcp://127.0.0.1:9")):
            pass


def test_relative_paths_work_on_workers_started_elsewhere(tmp_path):
    """A worker started in another folder resolves paths against its own working folder: the command
    makes its path arguments absolute before they reach the tasks."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(sched_file)], stderr=subprocess.DEVNULL, cwd=elsewhere)]
    try:
        address = scheduler_address(sched_file)
        procs.append(subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--no-dashboard"],
                                      stderr=subprocess.DEVNULL, cwd=elsewhere))
        from distributed import Client
        with Client(address, timeout="30s") as c:   # the worker registered: the command sees its environment
            c.wait_for_workers(1, timeout=60)
        env = {k: v for k, v in os.environ.items() if k != "GRAPHSTREAM_PROGRESS"}   # lines on stderr
        done = subprocess.run([sys.executable, "-m", "graphstream", "generate", "rmat", "g.zarr", "--scale", "8",
                               "--scheduler", address, "--json"], cwd=here, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert "MALLOC_TRIM_THRESHOLD_" in done.stderr   # dask's default worker environment: said, not fatal
        assert (here / "g.zarr").is_dir() and not (elsewhere / "g.zarr").exists()
        done = subprocess.run([sys.executable, "-m", "graphstream", "verify", "g.zarr"], cwd=here, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()


USER_SCRIPT = '''
import json
import sys

import graphstream.partition.coarse_refine  # noqa: F401  (numba imported at the top: in every worker too)


def in_worker():
    import numba
    import numpy as np

    @numba.njit(parallel=True)
    def first(a):
        s = 0.0
        for i in numba.prange(a.shape[0]):
            s += a[i]
        return s

    first(np.ones(8))   # numba's threads start here

    @numba.njit(parallel=True)
    def later(a):       # compiled after they started: numba reads its configuration again
        s = 0.0
        for i in numba.prange(a.shape[0]):
            s += 2 * a[i]
        return s

    later(np.ones(8))
    return numba.get_num_threads()


if __name__ == "__main__":
    from graphstream.cluster import ClusterConfig, open_client
    with open_client(ClusterConfig(workers=1, threads_per_worker=1)) as client:
        print(json.dumps(sorted(client.run(in_worker).values())))
'''


def test_a_script_importing_graphstream_at_its_top_gives_its_workers_their_numba_threads(tmp_path):
    """A worker imports the script that started its cluster before its environment is set: without the
    workers' numba plugin, a single-threaded worker ran numba on every core (here 2 threads, on a machine
    of 2 cores or more; at R-MAT s22 a kernel compiled late then raised numba's "Cannot set
    NUMBA_NUM_THREADS"). The kernel compiled after numba's threads started must compile."""
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH"))
                                        if p)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [1]
