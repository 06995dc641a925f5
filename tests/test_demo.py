"""`make demo` prints a readable line per step and a closing table, and keeps the JSON in files
(issue 18 item 7). Run here on a small generated graph without the real datasets (fast)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_summaries_and_keeps_json(tmp_path):
    env = {**os.environ, "WORK": str(tmp_path / "work"), "DATASETS": str(tmp_path / "none"), "SCALE": "10",
           "PY": sys.executable, "GRAPHSTREAM_PROGRESS": "0"}
    proc = subprocess.run(["bash", str(ROOT / "tools" / "demo.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert len(out) < 4000 and "{" not in out, out            # no JSON dumped on the terminal
    assert "1,024 nodes, 16,384 edges" in out                  # the generate line, readable
    assert "replication factor" in out and "OK (partitions" in out
    assert "What was produced:" in out and "rmat-parts" in out
    saved = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "work" / "json").glob("*.json")}
    assert {"1-generate", "2-info", "3-partition", "3-verify"} <= saved.keys()
    assert saved["1-generate"]["num_edges"] == 16384 and saved["3-verify"]["ok"] is True
