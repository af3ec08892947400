"""How often ``python -m analysis compare`` calls noise a regression, and how often it finds a real one.

``python -m benchmarks.false_alarms [--runs 6] [--seconds 8] [--modes closed,rate] [--sides 1,3,5]``
``[--change-size 16384] [--users 8] [--rate 50] [--keep DIR]``

Starts a throwaway 1-member etcd on 127.0.0.1 and, per load mode (``closed``: users back to back; ``rate``: each
user at ``--rate`` requests/s), makes ``--runs`` pairs of interleaved runs, A B A B …: A with 1 KiB values, B with
``--change-size`` values (a known change, meant to be near the tolerance). Then, for each number of runs a side:

- **A/A**: comparisons of A runs against other A runs (disjoint groups, formed as interleaved runs are: of two runs
  adjacent in time, one on each side); a comparison with any row ``worse`` is a false alarm. One run a side is
  compared twice: as is (the runs' own drift: never worse, only inconclusive) and with a calibration (``--noise``)
  made from the other A runs, as a user would make it beforehand;
- **known change**: A runs against the B runs made beside them; a comparison with any row ``worse`` found it.

Each line prints comparisons, worse, inconclusive and the rates; the known change's size is the median P50 and P99
of the B runs against the A runs'. Comparisons share runs, so they are not independent: with a few runs the rates
are rough. Prints figures; not a test. Keep it short on a shared machine: the default makes 2 x 2 x 6 runs of 8 s.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from etcd_users.analysis.compare import BASELINE, CANDIDATE, INCONCLUSIVE, calibrate, compare, load_side, name_figures
from etcd_users.analysis.compare_noise import calibration_of
from etcd_users.analysis.load import load_run
from etcd_users.analysis.seconds import run_seconds
from etcd_users.analysis.tolerance import parse_tolerances
from etcd_users.local import LocalCluster

REPO = Path(__file__).resolve().parent.parent
BASE_SIZE = 1024
MODES = ("closed", "rate")


def locust_run(endpoint: str, prefix: Path, args: argparse.Namespace, mode: str, value_size: int) -> None:
    pacing = ("--etcd-user-rate", str(args.rate)) if mode == "rate" else ()
    command = [
        *(sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary"),
        *("-u", str(args.users), "-r", str(args.users), "-t", f"{args.seconds}s", "--csv", str(prefix)),
        *("--etcd-endpoints", endpoint, "--etcd-prefix", f"/false-alarms/{prefix.name}/", "--etcd-cleanup"),
        *("--etcd-val-size", str(value_size), "--etcd-skip-preflight", *pacing, "EtcdPutUser"),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=args.seconds + 120)
    if done.returncode not in (0, 1):
        raise SystemExit(f"false_alarms: locust failed ({done.returncode}): {done.stderr.strip()[-300:]}")


@dataclass
class Tally:
    compared: int = 0
    worse: int = 0
    inconclusive: int = 0

    def add(self, baseline: list[Path], candidate: list[Path], calibration=None) -> None:
        comparison = compare(
            load_side(",".join(map(str, baseline)), BASELINE),
            load_side(",".join(map(str, candidate)), CANDIDATE),
            parse_tolerances(None),
            calibration=calibration,
        )
        self.compared += 1
        self.worse += bool(comparison.worse)
        self.inconclusive += any(row.verdict == INCONCLUSIVE for row in comparison.rows)

    def text(self) -> str:
        if not self.compared:
            return "not enough runs"
        rate = 100 * self.worse / self.compared
        return (
            f"{self.compared:3d} compared, {self.worse:3d} worse ({rate:5.1f} %), {self.inconclusive:3d} inconclusive"
        )


def calibration_from(runs: list[Path]):
    document = calibrate(load_side(",".join(map(str, runs)), "runs"))
    return calibration_of(document, Path("calibration"))


def aa_groups(runs: list[Path], size: int):
    """Ordered pairs of disjoint groups of ``size`` A runs, formed as interleaved runs are: runs 2i and 2i+1 (adjacent
    in time) always on different sides, over windows of 2*size consecutive runs. Groups of early runs against late
    ones would measure the machine's drift over the whole benchmark, which interleaving is there to cancel."""
    if size == 1:
        yield from itertools.permutations([[run] for run in runs], 2)
        return
    for start in range(0, len(runs) - 2 * size + 1, 2):
        pairs = [(runs[start + 2 * index], runs[start + 2 * index + 1]) for index in range(size)]
        for choice in itertools.product((0, 1), repeat=size - 1):  # the first pair's order fixed: each split once
            first = [pairs[0][0], *(pair[pick] for pair, pick in zip(pairs[1:], choice, strict=True))]
            second = [pairs[0][1], *(pair[1 - pick] for pair, pick in zip(pairs[1:], choice, strict=True))]
            yield first, second
            yield second, first


def median_change(a_runs: list[Path], b_runs: list[Path], metric: str) -> float:
    """The change of the median over the runs of their whole-run figure, B against A, in %."""

    def figure(prefix: Path) -> float:
        return name_figures(run_seconds(load_run(str(prefix))).names["put"])[metric]

    return 100 * (statistics.median(map(figure, b_runs)) / statistics.median(map(figure, a_runs)) - 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.false_alarms", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="A runs (and as many B runs) per mode")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--rate", type=float, default=50.0, help="requests/s per user in the rate mode")
    parser.add_argument("--modes", default=",".join(MODES), help="closed, rate or both")
    parser.add_argument("--sides", default="1,3,5", help="runs a side to compare")
    parser.add_argument("--change-size", type=int, default=16384, help="the known change's value size (bytes)")
    parser.add_argument("--keep", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--again", action="store_true", help="compare the runs kept in --keep again, make none")
    args = parser.parse_args(argv)
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    if not modes or any(mode not in MODES for mode in modes):
        parser.error(f"--modes: give closed, rate or closed,rate, not {args.modes!r}")
    sides = sorted({int(size) for size in args.sides.split(",")})
    directory = args.keep or Path(tempfile.mkdtemp(prefix="false-alarms-"))
    directory.mkdir(parents=True, exist_ok=True)
    if args.again:
        if args.keep is None:
            parser.error("--again compares the runs of --keep DIR: give --keep")
        made = {mode: kept(directory, mode, args.runs) for mode in modes}
    else:
        made = make_runs(directory, modes, args)
    report(made, sides, modes, args)
    print(f"\nruns in {directory}")
    return 0


def kept(directory: Path, mode: str, runs: int) -> tuple[list[Path], list[Path]]:
    pairs = [(directory / f"{mode}-a{index}", directory / f"{mode}-b{index}") for index in range(runs)]
    missing = [str(prefix) for pair in pairs for prefix in pair if not Path(f"{prefix}_stats.csv").is_file()]
    if missing:
        raise SystemExit(f"false_alarms: --again: no run at {missing[0]} (made with other --runs or --modes?)")
    return [a for a, _ in pairs], [b for _, b in pairs]


def make_runs(directory: Path, modes: list[str], args: argparse.Namespace) -> dict[str, tuple[list[Path], list[Path]]]:
    made: dict[str, tuple[list[Path], list[Path]]] = {}
    cluster = LocalCluster(1)
    cluster.start(timeout=30)
    try:
        endpoint = cluster.endpoints[0]
        for mode in modes:
            a_runs, b_runs = [], []
            for index in range(args.runs):  # interleaved: the machine's drift falls on both alike
                for runs, name, size in ((a_runs, "a", BASE_SIZE), (b_runs, "b", args.change_size)):
                    prefix = directory / f"{mode}-{name}{index}"
                    locust_run(endpoint, prefix, args, mode, size)
                    runs.append(prefix)
            made[mode] = (a_runs, b_runs)
            print(f"{mode}: {args.runs} A and {args.runs} B runs in {directory}", flush=True)
    finally:
        cluster.stop()
    return made


def report(made, sides: list[int], modes: list[str], args: argparse.Namespace) -> None:
    load = f"{args.users} users" + (f" at {args.rate:g}/s each" if "rate" in modes else "")
    print(
        f"\n{args.seconds} s runs, {load}; A {BASE_SIZE} B, B {args.change_size} B values; a comparison is worse when"
    )
    print("any of its rows is worse (the default tolerances)")
    for mode, (a_runs, b_runs) in made.items():
        moved = ", ".join(f"{key} by {median_change(a_runs, b_runs, key):+.1f} %" for key in ("p50", "p99"))
        print(f"\n{mode}: the known change moved {moved} (median of the B runs' figures against the A runs')")
        for size in sides:
            if size == 1:
                drift, calibrated, found = Tally(), Tally(), Tally()
                for (first,), (second,) in aa_groups(a_runs, 1):
                    drift.add([first], [second])
                    others = [run for run in a_runs if run not in (first, second)]
                    if len(others) >= 3:
                        calibrated.add([first], [second], calibration_from(others))
                for a_run, b_run in zip(a_runs, b_runs, strict=True):
                    others = [run for run in a_runs if run != a_run]
                    if len(others) >= 3:
                        found.add([a_run], [b_run], calibration_from(others))
                print(f"  1 a side, runs' drift      A/A: {drift.text()}")
                print(f"  1 a side, --noise (others) A/A: {calibrated.text()}")
                print(f"  1 a side, --noise (others) known change: {found.text()}")
                continue
            aa, found = Tally(), Tally()
            for group_a, group_b in aa_groups(a_runs, size):
                aa.add(group_a, group_b)
            for start in range(len(a_runs) - size + 1):
                found.add(a_runs[start : start + size], b_runs[start : start + size])
            print(f"  {size} a side (ranks)          A/A: {aa.text()}")
            print(f"  {size} a side (ranks)          known change: {found.text()}")


if __name__ == "__main__":
    sys.exit(main())
