"""``python -m bench [--smoke] [--out DIR] [--only KEY ...]``: run, then write the report.

The full run takes about 20 minutes on 2 cores, half of it the fleet figure (``--only
fleet``: three setups of a 60 s warm-up and a 120 s window each); ``--smoke`` runs every
figure at toy sizes in about a minute (the test suite runs it so it cannot rot).
``--only campaign`` is the crash campaign (15 min of kills; ``LANE_CAMPAIGN_SEED``,
``LANE_CAMPAIGN_KILLS`` and ``LANE_CAMPAIGN_SECONDS`` choose another seed and size).
``--only waste`` drives the real CLIs (``LANE_CONTRACT_*`` name them) calm and under faults.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from bench import report
from bench.figures import (
    board_size,
    campaign,
    console,
    death,
    dispatch,
    fleet,
    idle,
    journal_cost,
    large_repo,
    pods,
    recovery,
    streaming,
    supervision,
    throughput,
    turns,
    verify_cost,
    waste,
)
from bench.lane import REPO_ROOT
from bench.result import Figure
from bench.scale import FULL, SMOKE

FIGURES = {
    "dispatch": dispatch.measure,
    "throughput": throughput.measure,
    "journal": journal_cost.measure,
    "recovery": recovery.measure,
    "streaming": streaming.measure,
    "idle": idle.measure,
    "console": console.measure,
    "supervision": supervision.measure,
    "pods": pods.measure,
    "board_size": board_size.measure,
    "death": death.measure,
    "fleet": fleet.measure,
    "campaign": campaign.measure,
    "large_repo": large_repo.measure,
    "turns": turns.measure,
    "verify_cost": verify_cost.measure,
    "waste": waste.measure,
}
FINDINGS = Path(__file__).with_name("FINDINGS.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="toy sizes, seconds not minutes")
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_ROOT,
        help="where BENCHMARKS.md and bench/plots/ go (default: the repository)",
    )
    parser.add_argument("--only", nargs="+", choices=sorted(FIGURES), default=sorted(FIGURES))
    args = parser.parse_args(argv)
    scale = SMOKE if args.smoke else FULL
    started = time.monotonic()
    figures: list[Figure] = []
    workdir = Path(tempfile.mkdtemp(prefix="lane-runner-bench-"))
    try:
        for key in [key for key in FIGURES if key in args.only]:
            print(f"bench: {key} ...", flush=True)
            figure = FIGURES[key](scale, workdir / key)
            for check in figure.checks:
                print(f"  {check.target}: {check.measured} ({report.MARK[check.met]})", flush=True)
            figures.append(figure)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    plots = report.plot(figures, args.out / "bench" / "plots")
    findings = FINDINGS.read_text() if FINDINGS.is_file() else ""
    text = report.markdown(figures, scale, plots, args.out, findings, time.monotonic() - started)
    (args.out / "BENCHMARKS.md").write_text(text)
    print(f"bench: wrote {args.out / 'BENCHMARKS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
