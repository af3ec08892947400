"""Failover of the load generator: what a run keeps when a member of a local 3-member etcd freezes (SIGSTOP).

    python -m benchmarks.failover [--users 32] [--timeout 5] [--before 6] [--frozen 10] [--repeat 1] [--repo DIR]

Two scenarios, each against a fresh 3-member etcd on 127.0.0.1, puts of the tool's default sizes:

- follower: ``--etcd-target round-robin``; one follower frozen for ``--frozen`` seconds. Printed: successful
  puts per second before the freeze, during it, and the share of the two healthy members' throughput kept (during
  the freeze / two thirds of before: the rotation gave them two thirds of the requests before).
- leader: ``--etcd-target leader``; the leader frozen. Printed: the write gap, from the freeze to the first second
  with successful puts again, and the longest run of seconds without any.

Per-second successes come from the run's ``PREFIX_latency_history.csv`` (1 s resolution). A frozen member accepts
connections and answers nothing: calls to it wait for ``--etcd-timeout`` unless the client stops choosing it.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from etcd_users.files import SERVICE, SUFFIXES
from etcd_users.local import LocalCluster

REPO = Path(__file__).resolve().parent.parent


def successes_per_second(prefix: Path) -> dict[int, int]:
    seconds: dict[int, int] = {}
    with open(f"{prefix}{SUFFIXES['latency_history']}", newline="") as history:
        for row in csv.DictReader(history):
            if row["Series"] == SERVICE:
                second = int(row["Timestamp"])
                seconds[second] = seconds.get(second, 0) + int(row["Requests"]) - int(row["Failures"])
    return seconds


def run_scenario(target: str, args: argparse.Namespace, out: Path) -> dict:
    cluster = LocalCluster(3, name=f"failover-{target}")
    cluster.start(timeout=30)
    try:
        prefix = out / target
        command = [
            *(sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary"),
            *("-u", str(args.users), "-r", str(args.users), "-t", f"{args.before + args.frozen + 8}s"),
            *("--csv", str(prefix), "--etcd-endpoints", ",".join(cluster.endpoints), "--etcd-target", target),
            *("--etcd-timeout", str(args.timeout), "--etcd-skip-preflight", "EtcdPutUser"),
        ]
        frozen = None
        with open(out / f"{target}.log", "w") as log:
            locust = subprocess.Popen(
                command, cwd=args.repo, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            try:
                time.sleep(3 + args.before)  # start-up, then the window before the freeze
                leader = cluster.leader_index()
                frozen = leader if target == "leader" else next(i for i in range(3) if i != leader)
                frozen_at = time.time()
                cluster.pause_member(frozen)
                time.sleep(args.frozen)
                cluster.resume_member(frozen)
                locust.wait(timeout=args.before + args.frozen + 60)
            finally:
                if locust.poll() is None:
                    os.killpg(locust.pid, signal.SIGKILL)
                if frozen is not None:
                    cluster.resume_member(frozen)
    finally:
        cluster.stop()
    seconds = successes_per_second(prefix)
    start = int(frozen_at)
    before = [seconds.get(s, 0) for s in range(start - args.before, start)]
    during = [seconds.get(s, 0) for s in range(start + 1, start + args.frozen)]
    after_freeze = [s for s in sorted(seconds) if s > start and seconds[s] > 0]
    longest, run = 0, 0
    for second in range(start, start + args.frozen + 1):
        run = run + 1 if seconds.get(second, 0) == 0 else 0
        longest = max(longest, run)
    before_rate = sum(before) / len(before)
    during_rate = sum(during) / len(during)
    return {
        "before_per_s": before_rate,
        "during_per_s": during_rate,
        "healthy_share_kept": during_rate / (before_rate * 2 / 3) if before_rate else float("nan"),
        "gap_s": (after_freeze[0] - frozen_at) if after_freeze else float("inf"),
        "longest_zero_run_s": longest,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.failover", description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=5.0, help="--etcd-timeout of the runs (default 5)")
    parser.add_argument("--before", type=int, default=6, help="seconds measured before the freeze (default 6)")
    parser.add_argument("--frozen", type=int, default=10, help="seconds the member stays frozen (default 10)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each scenario (default 1)")
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="the checkout whose locustfile.py runs (default: this one), to compare"
    )
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="failover-"))
    print(f"{args.users} users, --etcd-timeout {args.timeout:g}, frozen {args.frozen} s; logs in {out}")
    for round_ in range(1, args.repeat + 1):
        follower = run_scenario("round-robin", args, out)
        print(
            f"[{round_}] follower frozen, round-robin: {follower['before_per_s']:.0f} puts/s before, "
            f"{follower['during_per_s']:.0f} during: {100 * follower['healthy_share_kept']:.0f} % of the healthy "
            "members' share kept"
        )
        leader = run_scenario("leader", args, out)
        print(
            f"[{round_}] leader frozen, --etcd-target leader: writes again {leader['gap_s']:.1f} s after the freeze "
            f"(longest second-run without a write: {leader['longest_zero_run_s']} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
