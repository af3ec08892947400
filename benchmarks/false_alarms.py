"""How often ``python -m analysis compare`` calls noise a regression, and whether it sees a real one.

``python -m benchmarks.false_alarms [--runs 8] [--seconds 10] [--users 16] [--known-change] [--keep DIR]``

Starts a throwaway 1-member etcd on 127.0.0.1, makes N short runs of the same settings (A/A), compares every pair
both ways round and prints the false-alarm rate: rows called worse / rows compared. With ``--known-change`` it then
makes one run with 64 KiB values instead of 1 KiB (which moves P99 by well over 2x) and compares the first A/A run
with it, printing the verdicts and the exit status (3 expected). Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from etcd_users.local import LocalCluster

REPO = Path(__file__).resolve().parent.parent


def locust_run(endpoint: str, prefix: Path, seconds: int, users: int, value_size: int, rate: float) -> None:
    pacing = ("--etcd-user-rate", str(rate)) if rate else ()
    command = [
        *(sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary"),
        *("-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--csv", str(prefix)),
        *("--etcd-endpoints", endpoint, "--etcd-prefix", f"/false-alarms/{prefix.name}/", "--etcd-cleanup"),
        *("--etcd-val-size", str(value_size), "--etcd-skip-preflight", *pacing, "EtcdPutUser"),
    ]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=seconds + 120)
    if done.returncode not in (0, 1):
        raise SystemExit(f"false_alarms: locust failed ({done.returncode}): {done.stderr.strip()[-300:]}")


def compare(baseline: Path, candidate: Path, out: Path) -> tuple[int, dict]:
    command = [sys.executable, "-m", "analysis", "compare", str(baseline), str(candidate), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 3):
        raise SystemExit(f"false_alarms: compare failed ({done.returncode}): {done.stderr.strip()}")
    return done.returncode, json.loads((out / "compare.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.false_alarms", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests/s per user (--etcd-user-rate); 0: as fast as they can, which a single process may not keep up",
    )
    parser.add_argument("--known-change", action="store_true", help="also compare against 64 KiB values")
    parser.add_argument("--keep", type=Path, help="keep the runs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    directory = args.keep or Path(tempfile.mkdtemp(prefix="false-alarms-"))
    directory.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(1)
    cluster.start(timeout=30)
    try:
        endpoint = cluster.endpoints[0]
        runs = []
        for index in range(args.runs):
            prefix = directory / f"aa{index}"
            locust_run(endpoint, prefix, args.seconds, args.users, 1024, args.rate)
            runs.append(prefix)
            print(f"run {index + 1}/{args.runs}: {prefix}", flush=True)
        if args.known_change:
            changed = directory / "big_values"
            locust_run(endpoint, changed, args.seconds, args.users, 65536, args.rate)
    finally:
        cluster.stop()

    compared = worse = 0
    by_metric: dict[str, list[int]] = {}
    for baseline, candidate in itertools.permutations(runs, 2):
        _, document = compare(baseline, candidate, directory / f"compare_{baseline.name}_{candidate.name}")
        for row in document["rows"]:
            counts = by_metric.setdefault(row["metric"], [0, 0])
            counts[0] += row["verdict"] == "worse"
            counts[1] += 1
            compared += 1
            worse += row["verdict"] == "worse"
    pairs = args.runs * (args.runs - 1)
    print(f"A/A: {args.runs} runs of {args.seconds} s, {pairs} ordered pairs, {compared} rows compared")
    for metric, (found, total) in by_metric.items():
        print(f"  {metric:7s} worse {found}/{total}")
    print(f"false-alarm rate: {worse}/{compared} = {100 * worse / max(compared, 1):.1f} %")
    if args.known_change:
        code, document = compare(runs[0], changed, directory / "compare_known_change")
        print(f"known change (1 KiB -> 64 KiB values): exit status {code}")
        for row in document["rows"]:
            print(
                f"  {row['name']} {row['metric']:7s} {row['baseline']} -> {row['candidate']} "
                f"({row['difference']:+.1f}{row['unit']}) {row['verdict']}"
                if row["difference"] is not None
                else f"  {row['name']} {row['metric']:7s} {row['verdict']}"
            )
    print(f"runs and comparisons in {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
