"""Peak memory and wall time, measured the same way by every command and benchmark."""
from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, field


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (ru_maxrss)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


@dataclass
class Stopwatch:
    """Wall-clock seconds since creation; ``lap(name)`` records named phases."""
    start: float = field(default_factory=time.perf_counter)
    laps: dict[str, float] = field(default_factory=dict)
    _last: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._last = self.start

    def lap(self, name: str) -> float:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._last)
        self._last = now
        return self.laps[name]

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start
