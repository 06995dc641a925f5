"""Range checks of training parameters, shared by :class:`trainer.train.TrainConfig` and
:class:`trainer.dynamic.DynamicConfig`.

Both configs check themselves on construction, so a library caller gets the
same :class:`ParameterError` as the command line. Messages name the flag, the
value and what is allowed: ``--lr nan: expected a finite number > 0``.
"""
from __future__ import annotations

import math
import numbers

from graphstream.errors import ParameterError

# The largest learning rate taken: Adam's first step is lr / (1 - beta1) = 10 x lr, applied to float32
# parameters, whose largest value is 3.4e38; above this the step itself overflowed (a traceback, exit 1).
MAX_LR = 1e37


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def integer(name: str, value, low: int = 1, high: int | None = None) -> None:
    """``value`` is an integer >= ``low`` (and < ``high``); bool refused: ``True`` is not a size."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low
            or (high is not None and value >= high)):
        allowed = f">= {low}" if high is None else f"in [{low}, {high})"
        raise ParameterError(f"{_flag(name)} {value}: expected a whole number {allowed}")


def number(name: str, value, *, low: float, high: float | None = None, low_open: bool = False,
           high_open: bool = True) -> None:
    """``value`` is a finite real number in the interval from ``low`` to ``high`` (open or closed ends)."""
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
          and (value > low if low_open else value >= low)
          and (high is None or (value < high if high_open else value <= high)))
    if not ok:
        lo = f"> {low}" if low_open else f">= {low}"
        if high is None:
            allowed = f"a finite number {lo}"
        else:
            allowed = f"a number in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise ParameterError(f"{_flag(name)} {value}: expected {allowed}")


__all__ = ["MAX_LR", "integer", "number"]
