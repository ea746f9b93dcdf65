"""The command line: `python -m dbt_ivm.benchmark [--sf 0.1|1] [--workloads w1,w2,w3,w3p,w4,w5,w6]
[--sizes 0.01,0.1,1,10] [--kinds insert,delete,update,mixed] [--reps 3] [--out DIR]`
(`--help` lists the rest). Exits 1 when a correctness check failed."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dbt_ivm.benchmark.config import parse_args
from dbt_ivm.benchmark.runner import run_benchmark


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(sys.argv[1:] if argv is None else argv)
    result = run_benchmark(config)
    problems = result.errors() + [c for c in result.checks() if c == "fail"]
    print(f"Results in {config.out}: results.md, results.json, plot.png", flush=True)
    if problems:
        print(f"{len(problems)} failures (see the Failures section of results.md)", flush=True)
    return 1 if any(c == "fail" for c in result.checks()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
