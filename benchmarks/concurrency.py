"""CPU per request at high concurrency: one Locust process with few users against many, at the same total rate.

    python -m benchmarks.concurrency [--users 10000] [--base-users 64] [--rate 3000] [--conns 64]
                                     [--seconds 10] [--repeat 2] [--baseline-repo DIR] [--profile-dir DIR]
                                     [--json FILE]

One headless Locust process runs rate-driven EtcdPutUser against a local 1-member etcd, with ``--base-users`` users and
then with ``--users`` users, alternating ``--repeat`` times. Each user gets ``--etcd-user-rate RATE / USERS``, so both
offer the same total rate and the comparison is per request at equal throughput. The users are spawned in about
``SPAWN_SECONDS``; ``benchmarks/cpu_probe.py`` opens its window ``SETTLE_SECONDS`` after the last one is up and takes
the process's CPU (all threads) and request count over ``--seconds``. Printed: CPU µs per request of each, the ratio
many/few (target ≤ 1.3) from the medians. ``--baseline-repo DIR`` runs the same from another checkout right after each
of this one's (its locustfile and package; the run's working directory is DIR), with its own ratio: a change measured
before and after in one run. ``--profile-dir DIR`` also records a py-spy flame graph of each many-users window there
(py-spy from ``pip install py-spy``; attaching to a process needs root or ptrace rights).
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import math
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._common import (
    PROBE,
    REPO,
    BenchmarkError,
    Compactor,
    child,
    child_environment,
    fail_line,
    finish,
    local_etcd,
    locust_etcd_flags,
    log_dir,
    machine,
    machine_lines,
    stop_signals_interrupt,
    watch,
)

PROGRAM = "benchmarks.concurrency"
RATIO_TARGET = 1.2
SPAWN_SECONDS = 5.0  # the spawn rate is chosen to bring every user up in about this long
SETTLE_SECONDS = 3.0  # after the last user is up, before the window opens
RUN_SLACK_SECONDS = 60.0  # Locust's own bound (-t) beyond spawning and the window: the harness stops it first


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=10_000, help="the many users (default 10000)")
    parser.add_argument("--base-users", type=int, default=64, help="the few users to compare with (default 64)")
    parser.add_argument("--rate", type=float, default=3000.0, help="total requests/s offered by either (3000)")
    parser.add_argument("--conns", type=int, default=64, help="--etcd-conns of the Locust process (default 64)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window of each run (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, alternating (default 2)")
    parser.add_argument("--baseline-repo", metavar="DIR", help="also run another checkout, alternating, to compare")
    parser.add_argument("--profile-dir", metavar="DIR", help="record a py-spy flame graph of each many-users window")
    parser.add_argument("--json", metavar="FILE", help="write settings, machine and every run here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if min(args.users, args.base_users, args.conns, args.repeat) < 1 or not args.rate > 0 or not args.seconds > 0:
        parser.error("--users, --base-users, --rate, --conns, --seconds and --repeat must be greater than zero")
    if args.profile_dir and _py_spy() is None:
        parser.error("--profile-dir needs py-spy: pip install py-spy")
    if args.baseline_repo and not (Path(args.baseline_repo) / "locustfile.py").is_file():
        parser.error(f"--baseline-repo {args.baseline_repo}: no locustfile.py there; give a checkout of locust-etcd")
    return args


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"  # a virtualenv's, when it is not activated
    return str(beside) if beside.exists() else shutil.which("py-spy")


def run_once(args, cluster, compact: Compactor, logs: Path, users: int, label: str, repo: Path = REPO) -> dict:
    out = logs / f"{label}.json"
    spawn_rate = max(1, math.ceil(users / SPAWN_SECONDS))
    run_time = math.ceil(SPAWN_SECONDS * 4 + SETTLE_SECONDS + args.seconds + RUN_SLACK_SECONDS)
    command = [
        sys.executable, "-m", "locust",
        "-f", f"locustfile.py,{PROBE}",
        "--headless", "--only-summary",
        "-u", str(users), "-r", str(spawn_rate),
        "-t", f"{run_time}s",
        "--etcd-endpoints", cluster.endpoints[0],
        "--etcd-conns", str(args.conns),
        "--etcd-user-rate", repr(args.rate / users),
        *locust_etcd_flags(),
        "EtcdPutUser",
    ]  # fmt: skip
    environment = child_environment(
        {
            "ETCD_BENCH_PROBE_OUT": str(out),
            "ETCD_BENCH_PROBE_ANCHOR": "spawned",
            "ETCD_BENCH_PROBE_WARMUP": str(SETTLE_SECONDS),
            "ETCD_BENCH_PROBE_SECONDS": str(args.seconds),
        }
    )
    compact()
    profiler: list[subprocess.Popen] = []

    def on_sample(process) -> None:
        if args.profile_dir and users == args.users and not profiler:
            svg = Path(args.profile_dir) / f"{label}.svg"
            profiler.append(
                subprocess.Popen(
                    [
                        _py_spy(),
                        "record",
                        "-o",
                        str(svg),
                        "--pid",
                        str(process.pid),
                        "-d",
                        str(int(args.seconds)),
                        "-r",
                        "50",
                        "--threads",
                        "--nonblocking",
                    ],  # fmt: skip
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    try:
        with child(f"locust {users} users ({label})", command, logs, environment, cwd=repo) as process:
            state = watch(process, out, run_time + RUN_SLACK_SECONDS, on_sample, until_done=True)
            if state.get("state") != "done":
                raise process.failure(f"exited with code {process.process.returncode} before its window ended")
            process.terminate()
    finally:
        for spy in profiler:
            spy.wait(timeout=args.seconds + 30)
    if not state["requests"]:
        raise BenchmarkError(f"locust {users} users: no request completed in the window")
    row = {
        "checkout": "baseline" if repo != REPO else "this",
        "users": users,
        "requests_per_second": state["requests"] / state["seconds"],
        "cpu_us_per_request": state["cpu_seconds"] / state["requests"] * 1e6,
        "failures": state["failures"],
        "p99_intended_ms": (state.get("intended_latency_ms") or {}).get("p99"),
        "probe": state,
    }
    sys.stderr.write(
        f"{PROGRAM}: {label}: {row['requests_per_second']:,.0f} req/s, {row['cpu_us_per_request']:.0f} µs CPU/request\n"
    )
    sys.stderr.flush()
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs = log_dir("locust-etcd-concurrency-")
    if args.profile_dir:
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
    info = machine()
    result: dict = {"machine": info, "settings": vars(args), "target_ratio": RATIO_TARGET, "runs": []}
    try:
        with stop_signals_interrupt(), local_etcd() as cluster:
            compact = Compactor(cluster)
            checkouts = [("this", REPO)]
            if args.baseline_repo:
                checkouts.append(("baseline", Path(args.baseline_repo).resolve()))
            for round_ in range(args.repeat):
                for users in (args.base_users, args.users):
                    for name, repo in checkouts:
                        label = f"{name}-{users}-users-{round_ + 1}"
                        result["runs"].append(run_once(args, cluster, compact, logs, users, label, repo))
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROGRAM}: interrupted; logs in {logs}\n")
        return 130
    except BenchmarkError as error:
        sys.stderr.write(fail_line(PROGRAM, error) + "\n")
        return 1
    lines = [
        "locust-etcd CPU per request at high concurrency: one Locust process, rate-driven EtcdPutUser",
        *machine_lines(info),
        f"load: {args.rate:g} req/s in total, --etcd-conns {args.conns}, {args.seconds:g}s windows, "
        f"{args.repeat} runs of each, alternating",
        "",
        f"{'checkout':>8}  {'users':>8}  {'req/s':>8}  {'CPU µs/req':>10}  {'P99 ms':>8}",
    ]
    for row in result["runs"]:
        p99 = "-" if row["p99_intended_ms"] is None else f"{row['p99_intended_ms']:.2f}"
        lines.append(
            f"{row['checkout']:>8}  {row['users']:>8,}  {row['requests_per_second']:>8,.0f}  "
            f"{row['cpu_us_per_request']:>10.0f}  {p99:>8}"
        )
    lines.append("")
    result["summary"] = {}
    for name in dict.fromkeys(row["checkout"] for row in result["runs"]):
        few, many = (
            statistics.median(
                row["cpu_us_per_request"] for row in result["runs"] if row["checkout"] == name and row["users"] == n
            )
            for n in (args.base_users, args.users)
        )
        ratio = many / few
        result["summary"][name] = {"few_cpu_us": few, "many_cpu_us": many, "ratio": ratio}
        verdict = "PASS" if ratio <= RATIO_TARGET else "MISS"
        lines.append(
            f"{name}: median CPU µs/request {args.base_users:,} users {few:.0f}, {args.users:,} users {many:.0f}; "
            f"ratio {ratio:.2f} (target ≤ {RATIO_TARGET}) {verdict}"
        )
    lines.append("P99: from each request's intended send time")
    sys.stdout.write("\n".join(lines) + "\n")
    return finish(PROGRAM, args, result, logs)


if __name__ == "__main__":
    sys.exit(main())
