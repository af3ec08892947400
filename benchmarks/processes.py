"""The same rate from one Locust process and from several (``--processes``): the client's CPU per request, and whether
the merged exact latencies hold every request.

    python -m benchmarks.processes [--processes 1,2] [--rate 2000] [--users 64] [--seconds 15] [--repeat 3]
                                   [--json FILE] [--keep-logs]

For each ``--processes`` count in turn, ``--repeat`` times alternating, one headless run of rate-driven ``EtcdPutUser``
(``-u USERS``, ``--etcd-user-rate RATE/USERS``) against a local 1-member etcd, measured from the run's own files: each
process's CPU per second (``PREFIX_client_cpu.csv``) and the requests per second (``PREFIX_latency_history.csv``) over
the whole seconds from ``--warmup`` after the start to one before the end. Printed per count: requests/s, CPU µs per
request (every process of the run, its master's included), P50 and P99 of the merged exact latencies, and whether the
exact table counts what Locust's counts; then the ratio of each count's CPU per request to one process's (target
≤ 1.1). On a machine with more cores than the etcd and the client need, a rate one process cannot send shows here as
the processes' requests/s growing with their count.
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import csv
import statistics
import sys
from pathlib import Path

from benchmarks._common import (
    BenchmarkError,
    Compactor,
    child,
    child_environment,
    local_etcd,
    locust_etcd_flags,
    machine,
    machine_lines,
    positive_ints,
    run_and_report,
)

PROGRAM = "benchmarks.processes"
RATIO_TARGET = 1.1
SLACK_SECONDS = 120.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=positive_ints, default=[1, 2], help="process counts (default 1,2)")
    parser.add_argument("--rate", type=float, default=2000.0, help="requests/s of the whole run (default 2000)")
    parser.add_argument("--users", type=int, default=64, help="users of the whole run (default 64)")
    parser.add_argument("--seconds", type=int, default=15, help="measured whole seconds of each run (default 15)")
    parser.add_argument("--warmup", type=int, default=4, help="seconds before the measured ones (default 4)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each count, alternating (default 3)")
    parser.add_argument("--json", metavar="FILE", help="write the machine, the settings and every run here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.users < 1 or args.seconds < 1 or args.warmup < 0 or args.repeat < 1:
        parser.error("--rate, --users, --seconds and --repeat must be greater than zero, --warmup zero or more")
    return args


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def measure(prefix: Path, warmup: int, seconds: int) -> dict:
    """CPU µs per request and requests/s over the measured seconds, from the run's files; the exact and Locust's
    counts of the whole run."""
    history = [row for row in _rows(Path(f"{prefix}_latency_history.csv")) if row["Series"] == "service"]
    if not history:
        raise BenchmarkError(f"{prefix}: the run completed no request")
    first = min(int(row["Timestamp"]) for row in history) + warmup
    window = range(first, first + seconds)
    requests = sum(int(row["Requests"]) for row in history if int(row["Timestamp"]) in window)
    cpu_rows = [row for row in _rows(Path(f"{prefix}_client_cpu.csv")) if int(row["Timestamp"]) in window]
    cpu_percent = sum(float(row["CpuPct"]) for row in cpu_rows)
    exact = {row["Name"]: row for row in _rows(Path(f"{prefix}_latency.csv")) if row["Series"] == "service"}
    locust_rows = {row["Name"]: row for row in _rows(Path(f"{prefix}_stats.csv"))}
    return {
        "requests_per_second": requests / seconds,
        "cpu_us_per_request": cpu_percent * 10_000.0 / requests if requests else None,
        "processes_seen": len({row["Process"] for row in cpu_rows}),
        "p50_ms": float(exact["put"]["P50"]),
        "p99_ms": float(exact["put"]["P99"]),
        "exact_count": int(exact["put"]["Count"]),
        "locust_count": int(locust_rows["put"]["Request Count"]),
    }


def run_once(args, cluster, compact: Compactor, logs: Path, processes: int, label: str) -> dict:
    prefix = logs / label
    command = [
        sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary",
        "-u", str(args.users), "-r", str(args.users), "-t", f"{args.warmup + args.seconds + 2}s",
        "--csv", str(prefix),
        "--etcd-endpoints", cluster.endpoints[0],
        "--etcd-user-rate", repr(args.rate / args.users),
        *(("--processes", str(processes)) if processes > 1 else ()),
        *locust_etcd_flags(),
        "EtcdPutUser",
    ]  # fmt: skip
    compact()
    with child(f"locust {processes} processes ({label})", command, logs, child_environment()) as process:
        code = process.wait(args.warmup + args.seconds + SLACK_SECONDS)
        if code not in (0, 1):
            raise process.failure(f"exited with code {code}")
    row = {"processes": processes, **measure(prefix, args.warmup, args.seconds)}
    sys.stderr.write(
        f"{PROGRAM}: {label}: {row['requests_per_second']:,.0f} req/s, {row['cpu_us_per_request']:.0f} µs CPU/request\n"
    )
    return row


def run(args: argparse.Namespace, logs: Path) -> dict:
    info = machine()
    runs: dict[int, list[dict]] = {count: [] for count in args.processes}
    with local_etcd() as cluster:
        compact = Compactor(cluster)
        for round_ in range(args.repeat):
            for count in args.processes:
                runs[count].append(run_once(args, cluster, compact, logs, count, f"p{count}-{round_}"))
    medians = {
        count: {
            field: statistics.median(row[field] for row in rows)
            for field in ("requests_per_second", "cpu_us_per_request", "p50_ms", "p99_ms")
        }
        for count, rows in runs.items()
    }
    return {
        "machine": info,
        "settings": {key: getattr(args, key) for key in ("processes", "rate", "users", "seconds", "warmup", "repeat")},
        "runs": {str(count): rows for count, rows in runs.items()},
        "medians": {str(count): figures for count, figures in medians.items()},
    }


def report(result: dict) -> str:
    settings = result["settings"]
    lines = [
        "locust-etcd: one Locust process against several, at the same rate",
        *machine_lines(result["machine"]),
        f"load: {settings['users']} users, {settings['rate']:,.0f} puts/s in all; {settings['seconds']} s measured "
        f"after {settings['warmup']} s; each figure the median of {settings['repeat']} runs, the counts alternating",
        "",
        f"{'processes':>9}  {'req/s':>8}  {'CPU µs/req':>10}  {'P50 ms':>7}  {'P99 ms':>7}  exact = Locust's count",
    ]
    base = result["medians"][str(settings["processes"][0])]["cpu_us_per_request"]
    for count in settings["processes"]:
        figures = result["medians"][str(count)]
        exact = all(row["exact_count"] == row["locust_count"] for row in result["runs"][str(count)])
        ratio = figures["cpu_us_per_request"] / base
        verdict = (
            ""
            if count == settings["processes"][0]
            else f"   CPU/req ×{ratio:.2f} " + ("PASS" if ratio <= RATIO_TARGET else "MISS")
        )
        lines.append(
            f"{count:>9}  {figures['requests_per_second']:>8,.0f}  {figures['cpu_us_per_request']:>10.1f}  "
            f"{figures['p50_ms']:>7.2f}  {figures['p99_ms']:>7.2f}  {'yes' if exact else 'NO':<21}{verdict}"
        )
    lines.append(f"target: CPU per request at most {RATIO_TARGET}× one process's; exact counts equal Locust's")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_and_report(PROGRAM, parse_args(argv), run, report)


if __name__ == "__main__":
    sys.exit(main())
