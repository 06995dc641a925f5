"""graphstream serve through HTTP: a real uvicorn process on 127.0.0.1 (with its 1-worker dask cluster),
driven with httpx. Auth and visibility, path confinement, idempotency, cancel, metrics, and the restart
test: SIGKILL the server mid-job, start it again, the job finishes and its output verifies."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

TERMINAL = ("succeeded", "failed", "cancelled")


def graphstream(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphstream", *args], capture_output=True, text=True,
                          check=check, timeout=120)


def create_token(root: Path, name: str, admin: bool = False) -> str:
    out = graphstream("serve", "token", "create", name, *(["--admin"] if admin else []), "--root", str(root))
    lines = out.stdout.strip().splitlines()
    assert len(lines[-1].split()) == 1, out.stdout   # the token alone on the last line
    return lines[-1]


class Server:
    """``graphstream serve --root ROOT --workers 1 --port 0`` in a child process; its URL from stderr."""

    def __init__(self, root: Path, *extra: str):
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "graphstream", "serve", "--root", str(root), "--workers", "1", "--port", "0",
             *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        ready = threading.Event()
        self.url = None

        def read():
            for line in self.proc.stderr:
                self.stderr.append(line)
                if "listening on http://" in line and self.url is None:
                    self.url = line.split("listening on ")[1].split()[0]
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(120) or self.url is None:
            self.stop()
            raise AssertionError("server did not start:\n" + "".join(self.stderr))

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def submit(client: httpx.Client, kind: str, args: dict, **extra) -> dict:
    r = client.post("/api/jobs", json={"kind": kind, "args": args, **extra})
    assert r.status_code == 201, r.text
    return r.json()


def wait(client: httpx.Client, job_id: str, until=TERMINAL, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/api/jobs/{job_id}").json()
        if until(job) if callable(until) else job["state"] in until:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s: {job}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-root")
    tokens = {"alice": create_token(root, "alice"), "bob": create_token(root, "bob"),
              "admin": create_token(root, "admin", admin=True)}
    server = Server(root)
    try:
        yield server, tokens
    finally:
        server.stop()


def test_health_and_auth(service):
    server, tokens = service
    with server.client(None) as anon:
        assert anon.get("/healthz").json()["status"] == "ok"
        r = anon.get("/api/jobs")
        assert r.status_code == 401 and r.json()["detail"].startswith("missing bearer token")
        assert anon.post("/api/jobs", json={"kind": "info", "args": {}}).status_code == 401
        assert anon.get("/api/datasets").status_code == 401
    with server.client("not-a-token") as wrong:
        assert wrong.get("/api/jobs").status_code == 401


def test_generate_then_partition(service):
    """The main path: a graph, its partitions; results, logs and the report agree with the files."""
    server, tokens = service
    with server.client(tokens["alice"]) as alice:
        gen = submit(alice, "generate", {"generator": "rmat", "out": "g.zarr", "scale": 10, "edge_factor": 8})
        assert gen["state"] == "queued" and gen["owner"] == "alice"
        assert gen["progress"] == 0.0   # service.md's 0..1 (it was null until a first progress bar)
        gen = wait(alice, gen["id"])
        assert gen["state"] == "succeeded", gen
        assert gen["result"]["num_edges"] == 8 * 2**10 and gen["progress"] == 1.0
        log = alice.get(f"/api/jobs/{gen['id']}/log")
        assert log.status_code == 200 and "attempt 1" in log.text and "exit status 0" in log.text
        part = submit(alice, "partition", {"store": "g.zarr", "k": 4, "algo": "hash", "out": "p4"})
        part = wait(alice, part["id"])
        assert part["state"] == "succeeded", part
        manifest = json.loads((server.root / "p4" / "manifest.json").read_text())
        assert part["result"]["replication_factor"] == pytest.approx(manifest["metrics"]["replication_factor"])
        assert [p["num_inner"] for p in manifest["parts"]] == part["result"]["part_inner"]

        datasets = {d["path"]: d for d in alice.get("/api/datasets").json()["datasets"]}
        assert datasets["g.zarr"]["kind"] == "graph" and datasets["g.zarr"]["num_edges"] == 8192
        assert datasets["p4"]["kind"] == "partitions" and datasets["p4"]["num_parts"] == 4
        report = alice.get("/api/datasets/p4/report").json()
        assert report["part_inner"] == [p["num_inner"] for p in manifest["parts"]]
        assert report["part_halo"] == [p["num_halo"] for p in manifest["parts"]]
        assert report["replication_factor"] == pytest.approx(manifest["metrics"]["replication_factor"])
        png = alice.get(report["plots"]["sizes"]["png"])
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        # a job's result names its paths as they were given, relative to the root
        assert part["result"]["out"] == "p4" and gen["result"]["path"] == "g.zarr"

        # an export step: --to is a format's name, not a path
        export = wait(alice, submit(alice, "export", {"parts": "p4", "to": "pyg", "out": "p4-pyg"})["id"])
        assert export["state"] == "succeeded", export
        assert (server.root / "p4-pyg").is_dir()

        # a dataset whose name needs quoting in a URL: its plots' addresses are quoted
        odd = wait(alice, submit(alice, "partition", {"store": "g.zarr", "k": 2, "algo": "hash",
                                                      "out": "odd?name#1"})["id"])
        assert odd["state"] == "succeeded", odd
        plots = alice.get("/api/datasets/odd%3Fname%231/report").json()["plots"]
        assert plots["sizes"]["svg"] == "/api/datasets/odd%3Fname%231/plots/sizes.svg"
        assert alice.get(plots["sizes"]["svg"]).status_code == 200
        assert alice.get("/api/datasets/g.zarr/report").status_code == 404   # a graph store has no report
        assert alice.get("/api/datasets/../x/report").status_code in (400, 404)

        metrics = server.client(None).get("/metrics").text
        assert 'graphstream_jobs{state="succeeded"}' in metrics
        assert 'graphstream_job_duration_seconds_count{state="succeeded"}' in metrics


def test_visibility(service):
    server, tokens = service
    with server.client(tokens["alice"]) as alice, server.client(tokens["bob"]) as bob, \
            server.client(tokens["admin"]) as admin:
        (server.root / "broken.zarr").mkdir(exist_ok=True)   # there, so accepted; not a store, so the job fails
        job = submit(alice, "info", {"store": "broken.zarr"})
        mine = submit(bob, "info", {"store": "broken.zarr"})
        for path in (f"/api/jobs/{job['id']}", f"/api/jobs/{job['id']}/log"):
            r = bob.get(path)
            assert r.status_code == 404 and r.json()["detail"] == f"no job {job['id']}"
        assert bob.post(f"/api/jobs/{job['id']}/cancel").status_code == 404
        assert job["id"] not in {j["id"] for j in bob.get("/api/jobs").json()["jobs"]}
        everyone = {j["id"] for j in admin.get("/api/jobs").json()["jobs"]}
        assert {job["id"], mine["id"]} <= everyone
        assert admin.get(f"/api/jobs/{job['id']}").status_code == 200
        failed = wait(alice, job["id"])
        # a command's own error is the job's error: the CLI's one line, paths relative to the root
        assert failed["state"] == "failed" and failed["error"].startswith("graphstream info: error: ")
        assert str(server.root) not in failed["error"]


def test_paths_and_args_refused(service, tmp_path):
    server, tokens = service
    outside = tmp_path / "outside"
    outside.mkdir()
    (server.root / "escape").symlink_to(outside)
    with server.client(tokens["alice"]) as alice:
        def refused(kind, args, status):
            r = alice.post("/api/jobs", json={"kind": kind, "args": args})
            assert r.status_code == status, r.text
            return r.json()["detail"]

        assert "'..'" in refused("info", {"store": "../x"}, 400)
        assert "absolute" in refused("info", {"store": "/etc"}, 400)
        assert "symlink" in refused("generate", {"generator": "rmat", "out": "escape/g.zarr", "scale": 4}, 400)
        assert "service's own folder" in refused("info", {"store": ".graphstream/jobs.sqlite"}, 400)
        assert "lies inside" in refused("partition", {"store": "g.zarr", "k": 2, "out": "g.zarr/p"}, 400)
        assert "(the default)" in refused("dataset", {"name": "cora", "out_dir": "cora"}, 400)
        assert "'..'" in refused("pipeline", {"steps": [{"kind": "info", "args": {"store": "g.zarr"}},
                                                        {"kind": "info", "args": {"store": "a/../../b"}}]}, 400)
        assert refused("partition", {"store": "g.zarr", "k": "many"}, 422) == \
            "graphstream partition: error: argument -k/--parts: invalid int value: 'many'"
        assert "unknown args ['colour']" in refused("partition", {"store": "g.zarr", "colour": 1}, 422)
        assert "set by the service" in refused("partition", {"store": "g.zarr", "k": 2, "workers": 4}, 422)
        assert "expected one of" in refused("train", {}, 422)
        r = alice.post("/api/jobs", content=b'{"kind": "info", "args": {"x": "' + b"a" * 300_000 + b'"}}',
                       headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        # streamed without a length (chunked): refused as it comes, not left to the JSON parser (a 400)
        r = alice.post("/api/jobs", content=(b"a" * 65536 for _ in range(8)),
                       headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["detail"] == "request body over 262144 bytes"
        chunked = alice.post("/api/jobs", content=iter([b'{"kind": "info", ', b'"args": {"store": "g.zarr"}}']),
                             headers={"Content-Type": "application/json"})
        assert chunked.status_code == 201, chunked.text   # a small chunked body still gets through whole
        # arguments the CLI would refuse at once are refused at submission, with its message
        assert refused("partition", {"store": "g.zarr", "k": 0, "out": "x"}, 422) == \
            "graphstream partition: error: k must be in [1, 1024], got 0"
        assert "not found" in refused("info", {"store": "missing.zarr"}, 400)
        assert "is the graph store 'g.zarr'" in refused("partition", {"store": "g.zarr", "k": 2, "work_dir": "g.zarr"},
                                                        400)
    assert not list(outside.iterdir())


def test_idempotency_key(service):
    server, tokens = service
    args = {"store": "g.zarr"}
    with server.client(tokens["alice"]) as alice, server.client(tokens["bob"]) as bob:
        first = submit(alice, "info", args, idempotency_key="nightly-1")
        again = alice.post("/api/jobs", json={"kind": "info", "args": args, "idempotency_key": "nightly-1"})
        assert again.status_code == 200 and again.json()["id"] == first["id"]
        other = alice.post("/api/jobs", json={"kind": "info", "args": {"store": "p4"}, "idempotency_key": "nightly-1"})
        assert other.status_code == 409
        assert submit(bob, "info", args, idempotency_key="nightly-1")["id"] != first["id"]   # keys are per caller
        assert wait(alice, first["id"])["state"] == "succeeded"


def test_cancel_long_job(service):
    """Cancel a running generate: the job is cancelled and nothing of its output is left."""
    server, tokens = service
    with server.client(tokens["alice"]) as alice:
        # big enough to be still running when the cancel lands (the generator writes ~20M edges/s here)
        job = submit(alice, "generate", {"generator": "rmat", "out": "big.zarr", "scale": 24, "edge_factor": 16})
        wait(alice, job["id"], until=lambda j: j["state"] != "queued" and (j["stage"] or "").startswith("generate:"))
        r = alice.post(f"/api/jobs/{job['id']}/cancel")
        assert r.status_code == 200
        job = wait(alice, job["id"], timeout=60)
        assert job["state"] == "cancelled", job
        assert "exit status 143" in alice.get(f"/api/jobs/{job['id']}/log").text
    # The output was never swapped into place. (A temporary sibling .big.zarr.tmp-* may remain when a
    # dask task of the command writes after the command unwound; the next run on big.zarr clears it.)
    assert not (server.root / "big.zarr").exists()


def test_restart_after_sigkill(tmp_path):
    """SIGKILL the server while a job runs; the next server queues it again and it completes whole."""
    root = tmp_path / "root"
    root.mkdir()
    token = create_token(root, "alice")
    server = Server(root)
    try:
        with server.client(token) as alice:
            # ~7 s of generating at ~20M edges/s: still running when the server is killed
            job = submit(alice, "generate", {"generator": "rmat", "out": "g.zarr", "scale": 24, "edge_factor": 8})
            wait(alice, job["id"], until=lambda j: (j["stage"] or "").startswith("generate:"))
        server.kill()
    finally:
        server.stop()
    assert not (root / "g.zarr").exists()   # it was cut short
    server = Server(root)
    try:
        with server.client(token) as alice:
            done = wait(alice, job["id"], timeout=120)
            log = alice.get(f"/api/jobs/{job['id']}/log").text
    finally:
        server.stop()
    assert done["state"] == "succeeded", (done, log)
    assert done["attempts"] == 2 and "queued again" in log and "attempt 2" in log
    assert done["result"]["num_edges"] == 8 * 2**24
    verify = graphstream("verify", str(root / "g.zarr"), "--json")
    assert json.loads(verify.stdout)["ok"] is True


def test_a_second_server_on_one_root_is_refused(tmp_path):
    """Two servers on one root each dispatched from the one queue (3 jobs at once under --max-running 1)
    and one's log pruning removed the other's logs; the second is now refused, naming the first."""
    root = tmp_path / "root"
    root.mkdir()
    server = Server(root)
    try:
        second = graphstream("serve", "--root", str(root), "--workers", "1", "--port", "0", check=False)
        assert second.returncode == 2, second.stderr
        assert f"--root {root}: another graphstream serve runs there (pid {server.proc.pid} on" in second.stderr
    finally:
        server.stop()
    deadline = time.monotonic() + 10
    while not any("terminated" in line for line in server.stderr) and time.monotonic() < deadline:
        time.sleep(0.05)
    said = "".join(server.stderr)   # a server writes no output: its stop said "partial output removed"
    assert "graphstream serve: terminated (SIGTERM)\n" in said, said
    Server(root).stop()   # the lock goes with the process
    other = tmp_path / "other"   # the same job database from another root, by --db
    other.mkdir()
    server = Server(root)
    try:
        second = graphstream("serve", "--root", str(other), "--db", str(root / ".graphstream" / "jobs.sqlite"),
                             "--workers", "1", "--port", "0", check=False)
        assert second.returncode == 2 and "jobs.sqlite: another graphstream serve runs there" in second.stderr
    finally:
        server.stop()


def test_a_step_gets_its_share_of_the_machine(monkeypatch):
    """A job's step process gets this machine's cores / --max-running as NUMBA_NUM_THREADS (at least one),
    not the worker's own task-thread count, and never the service's scheduler variable."""
    from graphstream import _resources
    from graphstream.serve.runner import step_env

    monkeypatch.setattr(_resources, "machine_cores", lambda: 8)
    monkeypatch.setenv("NUMBA_NUM_THREADS", "1")          # what a dask worker of one thread has
    monkeypatch.setenv("GRAPHSTREAM_SCHEDULER", "tcp://elsewhere:8786")
    env = step_env({"max_running": 2})
    assert env["NUMBA_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "4"
    assert "GRAPHSTREAM_SCHEDULER" not in env and env["GRAPHSTREAM_PROGRESS"] == "1"
    assert step_env({"max_running": 16})["NUMBA_NUM_THREADS"] == "1"
    assert step_env({})["NUMBA_NUM_THREADS"] == "8"       # a run adopted from a spec without the field


def test_token_commands_take_db_alone(tmp_path):
    """`token list | revoke` with --db and no --root (as serve takes them); a store that is not there is
    named, not made empty."""
    db = tmp_path / "state" / "jobs.sqlite"
    graphstream("serve", "token", "create", "alice", "--db", str(db))
    listed = json.loads(graphstream("serve", "token", "list", "--db", str(db), "--json").stdout)
    assert [t["name"] for t in listed["tokens"]] == ["alice"]
    graphstream("serve", "token", "revoke", "alice", "--db", str(db))
    missing = graphstream("serve", "token", "list", "--db", str(tmp_path / "nope.sqlite"), check=False)
    assert missing.returncode == 2 and "no job store here" in missing.stderr
    assert not (tmp_path / "nope.sqlite").exists()
    (tmp_path / "data").mkdir()
    assert graphstream("serve", "token", "list", "--root", str(tmp_path / "data"), check=False).returncode == 2
    assert not (tmp_path / "data" / ".graphstream").exists()
