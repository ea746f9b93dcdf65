"""Progress lines: one per step, with the time since the benchmark started, so a long run
never looks hung."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO


@dataclass
class Progress:
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    started: float = field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def line(self, message: str) -> None:
        print(f"[{_clock(self.elapsed())}] {message}", file=self.stream, flush=True)

    @contextmanager
    def step(self, message: str) -> Iterator[None]:
        """Print the step when it starts and its duration when it ends."""
        self.line(f"{message} ...")
        began = time.perf_counter()
        yield
        self.line(f"  done in {time.perf_counter() - began:.1f} s")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"
