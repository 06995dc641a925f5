"""Load test of ``graphstream serve`` on loopback: is the API responsive while jobs run, and is no job lost?

Prints ONE JSON object on stdout. Bounded and local only: it starts its own
server on 127.0.0.1 (``--workers W --max-running M``) over a temporary root,
generates the large graph first (untimed: R-MAT scale ``--scale``, edge
factor 16), then, for ``--seconds``:

- ``--clients`` concurrent clients poll ``GET /api/jobs/{id}`` (the large
  job's status), each waiting ``--poll-interval`` seconds between replies;
- the large job (``partition`` of the scale-S graph with ``--out``) is
  submitted at the start, and ``--small-jobs`` small jobs (``generate rmat``
  of scale 6, each its own output) at an even pace over the window.

It then waits for every job to end (``--drain-timeout``) and counts the
errors (a reply that is not 2xx, or no reply) and the lost jobs (accepted
with a 201, then missing from the admin's job list or not finished).
Latencies are those of the pollers' requests, as the client measures them
(one keep-alive connection per client; a minimal HTTP client, so that the
load generator's own CPU stays small beside the server's: both are reported).

    flock /tmp/graphstream-bench.lock .venv/bin/python tools/bench_serve.py \\
        [--clients 50] [--seconds 20] [--small-jobs 100] [--scale 20] [--algo hash]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

TERMINAL = ("succeeded", "failed", "cancelled")


def _start_server(root: Path, workers: int, max_running: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "graphstream", "serve", "--root", str(root), "--host",
                             "127.0.0.1", "--port", "0", "--workers", str(workers), "--max-running",
                             str(max_running)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            if "listening on http://" in line and not url:
                url.append(line.split("listening on ")[1].split()[0])
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(180) or not url:
        proc.kill()
        raise SystemExit("bench_serve: the server did not start")
    return proc, url[0]


class _Connection:
    """A minimal HTTP/1.1 keep-alive client for the pollers: GET and read the reply whole. httpx costs
    several ms of CPU a request, which on a small machine makes the load generator, not the server,
    the bottleneck (and its event loop's queueing the measured latency)."""

    def __init__(self, url: str, token: str):
        self.host, port = url.removeprefix("http://").rstrip("/").split(":")
        self.port = int(port)
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}"
                          "\r\n\r\n".encode())
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        length = next(int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length:"))
        await self.reader.readexactly(length)
        return status

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = self.reader = None


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"p50": round(at(0.50) * 1e3, 2), "p99": round(at(0.99) * 1e3, 2), "max": round(ordered[-1] * 1e3, 2)}


async def _load(url: str, token: str, args) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=args.clients + 8, max_keepalive_connections=args.clients + 8)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:
        big = await client.post("/api/jobs", json={"kind": "partition", "args": {
            "store": "big.zarr", "k": args.k, "algo": args.algo, "out": "big-parts"}})
        big.raise_for_status()
        big_id = big.json()["id"]
        latencies: list[float] = []
        submit_latencies: list[float] = []
        errors: list[str] = []
        accepted: list[str] = []
        start = time.monotonic()
        stop_at = start + args.seconds

        async def poller() -> None:
            conn = _Connection(url, token)
            try:
                while time.monotonic() < stop_at:
                    t = time.perf_counter()
                    try:
                        status = await conn.get(f"/api/jobs/{big_id}")
                        if status != 200:
                            errors.append(f"status {status}")
                    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                        errors.append(f"{type(exc).__name__}: {exc}")
                        await conn.close()
                    latencies.append(time.perf_counter() - t)
                    await asyncio.sleep(args.poll_interval)
            finally:
                await conn.close()

        async def submitter() -> None:
            gap = args.seconds / max(1, args.small_jobs)
            for i in range(args.small_jobs):
                await asyncio.sleep(max(0.0, start + i * gap - time.monotonic()))
                t = time.perf_counter()
                try:
                    r = await client.post("/api/jobs", json={"kind": "generate", "args": {
                        "generator": "rmat", "out": f"small/s{i:03d}.zarr", "scale": 6, "edge_factor": 4}})
                    if r.status_code == 201:
                        accepted.append(r.json()["id"])
                    else:
                        errors.append(f"submit status {r.status_code}: {r.text[:200]}")
                except httpx.HTTPError as exc:
                    errors.append(f"submit {type(exc).__name__}: {exc}")
                submit_latencies.append(time.perf_counter() - t)

        await asyncio.gather(submitter(), *(poller() for _ in range(args.clients)))
        window = time.monotonic() - start
        return {"big_id": big_id, "accepted": [big_id, *accepted], "latencies": latencies,
                "submit_latencies": submit_latencies, "errors": errors, "window": window}


def _drain(url: str, token: str, ids: list[str], timeout: float) -> tuple[dict[str, dict], float]:
    """Every accepted job as the admin's list shows it once all have ended (or at the timeout)."""
    start = time.monotonic()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        while True:
            jobs = {j["id"]: j for j in client.get("/api/jobs", params={"limit": 1000}).json()["jobs"]}
            if all(jobs.get(i, {}).get("state") in TERMINAL for i in ids) or time.monotonic() - start > timeout:
                return jobs, time.monotonic() - start
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--poll-interval", type=float, default=0.1, help="each client's pause between polls (s)")
    parser.add_argument("--small-jobs", type=int, default=100)
    parser.add_argument("--scale", type=int, default=20, help="R-MAT scale of the large job's graph")
    parser.add_argument("--algo", default="hash", help="partitioner of the large job")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--max-running", type=int, default=2)
    parser.add_argument("--drain-timeout", type=float, default=1800.0)
    parser.add_argument("--workdir", default=None, help="root folder (default: a temporary one, removed)")
    args = parser.parse_args()

    from graphstream.serve.jobs import JobStore

    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-serve-"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "small").mkdir(exist_ok=True)
    env = dict(os.environ, GRAPHSTREAM_PROGRESS="0")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphstream", "generate", "rmat", str(root / "big.zarr"), "--scale",
                    str(args.scale), "--overwrite"], check=True, env=env, stdout=subprocess.DEVNULL)
    generate_seconds = time.perf_counter() - t
    store = JobStore(root / ".graphstream" / "jobs.sqlite")
    token = store.create_token(f"bench-{os.getpid()}", admin=True)
    proc, url = _start_server(root, args.workers, args.max_running)
    server = psutil.Process(proc.pid)
    try:
        cpu = sum(server.cpu_times()[:2])
        own = time.process_time()
        load = asyncio.run(_load(url, token, args))
        client_cpu = time.process_time() - own
        # the web server's own CPU in the window (its dask workers and the jobs' commands are other
        # processes): with the replies' latencies, it tells a slow server from a starved one
        server_cpu = sum(server.cpu_times()[:2]) - cpu
        jobs, drain_seconds = _drain(url, token, load["accepted"], args.drain_timeout)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    states = [jobs.get(i, {}).get("state") for i in load["accepted"]]
    big = jobs.get(load["big_id"], {})
    result = {
        "clients": args.clients, "seconds": round(load["window"], 2), "poll_interval_seconds": args.poll_interval,
        "requests": len(load["latencies"]),
        "requests_per_second": round(len(load["latencies"]) / load["window"], 1),
        "latency_ms": _quantiles(load["latencies"]),
        "submit_latency_ms": _quantiles(load["submit_latencies"]),
        "server_cpu_seconds": round(server_cpu, 2),
        "client_cpu_seconds": round(client_cpu, 2),   # this load generator's own (same machine)
        "server_cpu_ms_per_request": round(server_cpu / max(1, len(load["latencies"])) * 1e3, 2),
        "errors": len(load["errors"]), "error_samples": load["errors"][:5],
        "jobs_accepted": len(load["accepted"]),
        "jobs_succeeded": states.count("succeeded"), "jobs_failed": states.count("failed"),
        "lost_jobs": sum(s not in TERMINAL for s in states),
        "drain_seconds": round(drain_seconds, 1),
        "large_job": {"graph": f"rmat scale {args.scale}, edge factor 16", "algo": args.algo, "k": args.k,
                      "state": big.get("state"), "duration_seconds": big.get("duration_seconds"),
                      "replication_factor": (big.get("result") or {}).get("replication_factor"),
                      "error": big.get("error")},
        "generate_seconds": round(generate_seconds, 1),
        "server": {"workers": args.workers, "max_running": args.max_running},
        "machine": {"cpus": os.cpu_count(), "load_average_1min_at_end": round(os.getloadavg()[0], 2)},
    }
    print(json.dumps(result))
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
