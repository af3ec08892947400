"""Load-generator memory: RSS and etcd connections of one Locust process with many rate-driven users.

    python -m benchmarks.memory [--users 1000,5000,20000] [--conns 8] [--rate 0.05] [--json FILE]
    python -m benchmarks.memory --soak MINUTES [--users 20000] [--conns 8] [--rate 0.05]

For each user count, one headless Locust process runs EtcdPutUser at ``--etcd-user-rate RATE`` (requests per second
per user: 20,000 users at 0.05 make 1,000 req/s) against a local 1-member etcd, spawning all users in about 10 s.
Once they are all up, the process's RSS (``/proc/PID/status``) and its TCP connections to etcd's client port
(``/proc/PID/net/tcp*`` matched with the socket inodes of ``/proc/PID/fd``) are sampled over one request period
(1/RATE, when every user sends exactly once), while ``benchmarks/cpu_probe.py`` inside the process counts the
requests. Target: 20,000 users under 1 GB RSS, over exactly
``--conns`` connections (users share them). ``--soak`` runs the largest user count for MINUTES and prints RSS every
10 s, to check that memory stays flat.
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import json
import math
import sys
from pathlib import Path

from benchmarks._common import (
    PROBE,
    BenchmarkError,
    Child,
    Compactor,
    child,
    child_environment,
    client_port,
    connections_to,
    fail_line,
    finish,
    local_etcd,
    locust_etcd_flags,
    log_dir,
    machine,
    machine_lines,
    positive_ints,
    process_rss_kb,
    stop_signals_interrupt,
    watch,
)

PROGRAM = "benchmarks.memory"
RSS_TARGET_MB = 1024.0
TARGET_USERS = 20_000
SPAWN_SECONDS = 10.0  # the spawn rate is chosen to bring every user up in about this long
SETTLE_SECONDS = 2.0  # after the last user is up, before sampling
SOAK_INTERVAL = 10.0
# Locust's own bound on a run (-t), beyond spawning and the window: the harness normally stops it first
RUN_SLACK_SECONDS = 60.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=positive_ints, default=[1000, 5000, 20000], help="default 1000,5000,20000")
    parser.add_argument("--conns", type=int, default=8, help="--etcd-conns of the Locust process (default 8)")
    parser.add_argument("--rate", type=float, default=0.05, help="--etcd-user-rate: requests/s per user (0.05)")
    parser.add_argument(
        "--sample-seconds",
        type=float,
        help="sampling window per count (default: one request period, 1/RATE, which every user fills exactly once)",
    )
    parser.add_argument("--soak", type=float, metavar="MINUTES", help="one long run of the largest user count")
    parser.add_argument("--json", metavar="FILE", help="write settings, machine and every sample here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if args.conns < 1 or args.rate <= 0 or (args.soak is not None and args.soak <= 0):
        parser.error("--conns, --rate and --soak must be greater than zero")
    if args.sample_seconds is None:
        # each user sends once per period: a shorter window can miss every request of users spawned close together
        args.sample_seconds = 1.0 / args.rate
    elif args.sample_seconds <= 0:
        parser.error("--sample-seconds must be greater than zero")
    return args


class MemoryRun:
    """One Locust process with ``users`` rate-driven put users, its probe anchored at the end of spawning."""

    def __init__(self, args, cluster, compact: Compactor, logs: Path, users: int, window: float, tick: float = 0):
        self.users = users
        self.window = window
        self.port = client_port(cluster)
        self.out = logs / f"memory-{users}.json"
        spawn_rate = max(1, math.ceil(users / SPAWN_SECONDS))
        # spawning may take a few times longer than planned on a busy machine
        self.run_time = math.ceil(SPAWN_SECONDS * 4 + SETTLE_SECONDS + window + RUN_SLACK_SECONDS)
        self.command = [
            sys.executable, "-m", "locust",
            "-f", f"locustfile.py,{PROBE}",
            "--headless", "--only-summary",
            "-u", str(users), "-r", str(spawn_rate),
            "-t", f"{self.run_time}s",
            "--etcd-endpoints", cluster.endpoints[0],
            "--etcd-conns", str(args.conns),
            "--etcd-user-rate", str(args.rate),
            *locust_etcd_flags(),
            "EtcdPutUser",
        ]  # fmt: skip
        self.environment = child_environment(
            {
                "ETCD_BENCH_PROBE_OUT": str(self.out),
                "ETCD_BENCH_PROBE_ANCHOR": "spawned",
                "ETCD_BENCH_PROBE_WARMUP": str(SETTLE_SECONDS),
                "ETCD_BENCH_PROBE_SECONDS": str(window),
                "ETCD_BENCH_PROBE_TICK": str(tick),
            }
        )
        self.logs = logs
        compact()

    def run(self, on_sample) -> dict:
        """Start Locust, call ``on_sample(process)`` at every poll while the window is open, and return the probe's
        result; Locust is stopped (SIGTERM) once the window is over."""
        with child(f"locust {self.users} users", self.command, self.logs, self.environment) as process:
            state = watch(process, self.out, self.run_time + RUN_SLACK_SECONDS, on_sample, until_done=True)
            if state.get("state") != "done":
                raise process.failure(f"exited with code {process.process.returncode} before its window ended")
            process.terminate()
        return state


class Sampler:
    """RSS and etcd connections of the Locust process, sampled while the probe's window is open."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.rss_kb: list[int] = []
        self.hwm_kb = 0
        self.connections: list[int] = []

    def __call__(self, process: Child) -> None:
        rss, hwm = process_rss_kb(process.pid)
        self.rss_kb.append(rss)
        self.hwm_kb = max(self.hwm_kb, hwm)
        self.connections.append(connections_to(process.pid, self.port))


def measure_counts(args, cluster, compact: Compactor, logs: Path) -> list[dict]:
    rows = []
    for users in args.users:
        memory_run = MemoryRun(args, cluster, compact, logs, users, args.sample_seconds)
        sampler = Sampler(memory_run.port)
        result = memory_run.run(sampler)
        if not sampler.rss_kb:
            raise BenchmarkError(f"no sample taken of the Locust process with {users} users")
        rss_mb = max(sampler.rss_kb) / 1024.0
        base_kb = result.get("rss_kb_at_test_start") or 0
        row = {
            "users": users,
            "rss_mb": rss_mb,
            "rss_kb_per_user": max(sampler.rss_kb) / users,
            "added_kb_per_user": (max(sampler.rss_kb) - base_kb) / users if base_kb else None,
            "rss_mb_before_users": base_kb / 1024.0 if base_kb else None,
            "peak_rss_mb": sampler.hwm_kb / 1024.0,
            "etcd_connections": max(sampler.connections),
            "etcd_connections_min": min(sampler.connections),
            "requests_per_second": result["requests"] / result["seconds"],
            "target_requests_per_second": users * args.rate,
            "failures": result["failures"],
            "spawn_seconds": result.get("spawn_seconds"),
            "p99_ms": result["latency_ms"]["p99"],
            "p99_intended_ms": (result.get("intended_latency_ms") or {}).get("p99"),
            "samples": len(sampler.rss_kb),
            "probe": result,
        }
        row["rss_verdict"] = "PASS" if rss_mb < RSS_TARGET_MB else "MISS"
        connections_ok = row["etcd_connections"] == args.conns == row["etcd_connections_min"]
        row["connections_verdict"] = "PASS" if connections_ok else "MISS"
        rows.append(row)
        sys.stderr.write(
            f"{PROGRAM}: {users} users: {rss_mb:,.0f} MB RSS, {row['etcd_connections']} connections to etcd, "
            f"{row['requests_per_second']:,.0f} req/s\n"
        )
        sys.stderr.flush()
    return rows


def format_counts(rows: list[dict], conns: int) -> list[str]:
    header = (
        "users",
        "spawn s",
        "RSS MB",
        "KB/user",
        "added KB/user",
        "etcd conns",
        "req/s",
        "target req/s",
        "P99 ms",
        "RSS < 1 GB",
        f"conns={conns}",
    )
    table = [header]
    for row in rows:
        table.append(
            (
                f"{row['users']:,}",
                "-" if row["spawn_seconds"] is None else f"{row['spawn_seconds']:.1f}",
                f"{row['rss_mb']:,.0f}",
                f"{row['rss_kb_per_user']:.1f}",
                "-" if row["added_kb_per_user"] is None else f"{row['added_kb_per_user']:.1f}",
                str(row["etcd_connections"]),
                f"{row['requests_per_second']:,.0f}",
                f"{row['target_requests_per_second']:,.0f}",
                "-" if row["p99_intended_ms"] is None else f"{row['p99_intended_ms']:.2f}",
                row["rss_verdict"],
                row["connections_verdict"],
            )
        )
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    lines = ["  ".join(cell.rjust(widths[i]) for i, cell in enumerate(line)) for line in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def soak(args, cluster, compact: Compactor, logs: Path) -> dict:
    users = max(args.users)
    window = args.soak * 60.0
    memory_run = MemoryRun(args, cluster, compact, logs, users, window, tick=SOAK_INTERVAL)
    samples: list[dict] = []
    ticks_path = Path(f"{memory_run.out}.ticks")
    sys.stdout.write(f"soak: {users:,} users at {args.rate:g} req/s each, {args.conns} conns, {args.soak:g} min\n")
    sys.stdout.write(f"{'elapsed':>8}  {'RSS MB':>8}  {'change MB':>9}  {'etcd conns':>10}  {'req/s':>8}\n")
    sys.stdout.flush()

    def on_sample(process: Child) -> None:
        # one line when the window opens, then one per tick of the probe (its request counts)
        ticks = [json.loads(line) for line in _lines(ticks_path)]
        if samples and len(ticks) < len(samples):
            return
        rss, _ = process_rss_kb(process.pid)
        rate = None
        if ticks:
            previous = ticks[-2] if len(ticks) >= 2 else {"requests": 0, "time": 0.0}
            rate = (ticks[-1]["requests"] - previous["requests"]) / (ticks[-1]["time"] - previous["time"])
        sample = {
            "elapsed_seconds": ticks[-1]["time"] if ticks else 0.0,
            "rss_mb": rss / 1024.0,
            "etcd_connections": connections_to(process.pid, memory_run.port),
            "requests_per_second": rate,
        }
        samples.append(sample)
        change = sample["rss_mb"] - samples[0]["rss_mb"]
        minutes, seconds = divmod(round(sample["elapsed_seconds"]), 60)
        sys.stdout.write(
            f"{f'{minutes}:{seconds:02d}':>8}  {sample['rss_mb']:8,.0f}  {change:+9,.1f}  "
            f"{sample['etcd_connections']:10d}  {'-' if rate is None else f'{rate:,.0f}':>8}\n"
        )
        sys.stdout.flush()
        # etcd's history grows by the whole load every interval: compact it, or a long soak fills its quota
        compact()

    result = memory_run.run(on_sample)
    if not samples:
        raise BenchmarkError("no sample taken during the soak")
    rss = [sample["rss_mb"] for sample in samples]
    return {
        "users": users,
        "minutes": args.soak,
        "samples": samples,
        "probe": result,
        "rss_first_mb": rss[0],
        "rss_last_mb": rss[-1],
        "rss_max_mb": max(rss),
        "rss_mb_per_minute": (rss[-1] - rss[0]) / max(samples[-1]["elapsed_seconds"] / 60.0, 1e-9),
    }


def _lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs = log_dir("locust-etcd-memory-")
    info = machine()
    result: dict = {
        "machine": info,
        "settings": {"users": args.users, "conns": args.conns, "rate": args.rate, "soak_minutes": args.soak},
        "targets": {"rss_mb_max": RSS_TARGET_MB, "users": TARGET_USERS, "connections": args.conns},
    }
    header = [
        "locust-etcd load-generator memory: one Locust process, rate-driven EtcdPutUser",
        *machine_lines(info),
        f"load: {args.rate:g} req/s per user, --etcd-conns {args.conns}, users spawned in ~{SPAWN_SECONDS:g}s, "
        + (
            f"then {args.soak:g} min at constant load"
            if args.soak is not None
            else f"sampled {SETTLE_SECONDS:g}s later for {args.sample_seconds:g}s"
        ),
        "",
    ]
    try:
        with stop_signals_interrupt(), local_etcd() as cluster:
            compact = Compactor(cluster)
            if args.soak is not None:
                sys.stdout.write("\n".join(header) + "\n")
                sys.stdout.flush()
                result["soak"] = soak(args, cluster, compact, logs)
                soaked = result["soak"]
                sys.stdout.write(
                    f"RSS first {soaked['rss_first_mb']:,.0f} MB, last {soaked['rss_last_mb']:,.0f} MB, "
                    f"max {soaked['rss_max_mb']:,.0f} MB; {soaked['rss_mb_per_minute']:+.2f} MB per minute\n"
                )
            else:
                result["counts"] = measure_counts(args, cluster, compact, logs)
                lines = [
                    *header,
                    *format_counts(result["counts"], args.conns),
                    "",
                    f"targets: {TARGET_USERS:,} users under {RSS_TARGET_MB:,.0f} MB RSS, with TCP connections to etcd "
                    f"= --etcd-conns ({args.conns}), not one per user",
                    "KB/user: RSS / users; added KB/user: (RSS - RSS at test start, before any user) / users; "
                    "P99: from each request's intended send time",
                ]
                sys.stdout.write("\n".join(lines) + "\n")
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROGRAM}: interrupted; logs in {logs}\n")
        return 130
    except BenchmarkError as error:
        sys.stderr.write(fail_line(PROGRAM, error) + "\n")
        return 1
    return finish(PROGRAM, args, result, logs)


if __name__ == "__main__":
    sys.exit(main())
