"""Watch events handled per second of client CPU: one Locust process fanning each put out to many watchers.

    python -m benchmarks.watch_events [--users 20] [--streams 10] [--watchers 100] [--seconds 10] [--warmup 4]
                                      [--repeat 1] [--baseline-repo DIR] [--json FILE] [--keep-logs]

Starts a 1-member etcd on 127.0.0.1 and runs ``EtcdWatchUser`` in one headless Locust process: each user puts its
own key over and over and waits until all of its ``--streams`` × ``--watchers`` watchers have the event. The probe
(``benchmarks/cpu_probe.py``) measures the process from inside after the warm-up: its CPU time (getrusage, every
thread) and the puts completed; ``benchmarks.bare_watch`` runs the same load from plain grpc.aio on uvloop (no Locust,
no gevent: the floor of a Python client), measured the same way. Every put of the window delivers
``streams × watchers`` events (a missing one is a failed ``watch`` row, shown), so the events handled are puts ×
streams × watchers. With ``--baseline-repo DIR`` (a
git worktree of main: a change's before) the same run of that checkout too, alternating, and the ratio. The
figure that matters is events per CPU second: a client that spends its core on each event delays the next, and
its delivery latency then measures the client, not etcd.
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import math
import statistics
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
    read_result,
    stop_signals_interrupt,
    watch,
)

PROGRAM = "benchmarks.watch_events"
PROCESS_SLACK_SECONDS = 90.0  # start-up (imports, opening the watchers) and shut-down of one measured process
# this checkout's probe measures the baseline's run too (it counts the rows by name); its imports are the checkout's
PROBE_PATH = REPO / PROBE


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20, help="EtcdWatchUser users, each on its own key (default 20)")
    parser.add_argument("--streams", type=int, default=10, help="watch streams per user (default 10)")
    parser.add_argument("--watchers", type=int, default=100, help="watchers per stream (default 100)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window of each run (default 10)")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds before the window opens (default 4)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each checkout, alternating (default 1)")
    parser.add_argument(
        "--baseline-repo", metavar="DIR", type=Path, help="another checkout of the tool (e.g. a git worktree of main)"
    )
    parser.add_argument("--json", metavar="FILE", help="write the settings, the machine and every run here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if min(args.users, args.streams, args.watchers, args.repeat) < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--users, --streams, --watchers, --repeat and --seconds must be greater than zero")
    if args.baseline_repo is not None and not (args.baseline_repo / "locustfile.py").is_file():
        parser.error(f"--baseline-repo: {str(args.baseline_repo)!r} is not a checkout of the tool (no locustfile.py)")
    return args


def run_once(args, endpoint: str, repo: Path, name: str, logs: Path, compact: Compactor) -> dict:
    out = logs / f"{name}.json"
    window = args.warmup + args.seconds
    command = [
        sys.executable, "-m", "locust",
        "-f", f"locustfile.py,{PROBE_PATH}",
        "--headless", "--only-summary",
        "-u", str(args.users), "-r", str(args.users),
        "-t", f"{int(window + 1)}s",
        "--etcd-endpoints", endpoint,
        "--etcd-watch-streams", str(args.streams),
        "--etcd-watchers-per-stream", str(args.watchers),
        *locust_etcd_flags(),
        "EtcdWatchUser",
    ]  # fmt: skip
    environment = {
        **child_environment(),
        "ETCD_BENCH_PROBE_OUT": str(out),
        "ETCD_BENCH_PROBE_WARMUP": str(args.warmup),
        "ETCD_BENCH_PROBE_SECONDS": str(args.seconds),
        "ETCD_BENCH_PROBE_ANCHOR": "spawned",
    }
    compact()
    with child(name, command, logs, environment, cwd=repo) as process:
        watch(process, out, window + PROCESS_SLACK_SECONDS)
        code = process.wait(PROCESS_SLACK_SECONDS)
        if code not in (0, 1):
            raise process.failure(f"exited with code {code}")
    return _result(args, name, read_result(out, process))


def run_bare(args, endpoint: str, name: str, logs: Path, compact: Compactor) -> dict:
    out = logs / f"{name}.json"
    command = [
        sys.executable, "-m", "benchmarks.bare_watch", "--target", endpoint.split("://", 1)[1],
        "--users", str(args.users), "--streams", str(args.streams), "--watchers", str(args.watchers),
        "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--json", str(out),
    ]  # fmt: skip
    compact()
    with child(name, command, logs, child_environment()) as process:
        code = process.wait(args.warmup + args.seconds + PROCESS_SLACK_SECONDS)
        if code != 0:
            raise process.failure(f"exited with code {code}")
    return _result(args, name, read_result(out, process))


def _result(args, name: str, raw: dict) -> dict:
    puts = raw["by_name"].get("put", 0)
    if puts <= 0 or raw["seconds"] <= 0:
        raise BenchmarkError(f"{name} completed no put in its window")
    events = puts * args.streams * args.watchers
    return {
        "client": name,
        "puts_per_second": puts / raw["seconds"],
        "events_per_second": events / raw["seconds"],
        "cpu_cores": raw["cpu_seconds"] / raw["seconds"],
        "events_per_cpu_second": events / raw["cpu_seconds"],
        "p50_ms": raw["latency_ms"]["p50"],
        "p99_ms": raw["latency_ms"]["p99"],
        "failures": raw["failures"],
        "raw": raw,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs = log_dir("locust-etcd-watch-events-")
    clients = [("this", REPO)] + ([("baseline", args.baseline_repo.resolve())] if args.baseline_repo else [])
    runs: dict[str, list[dict]] = {name: [] for name, _ in clients} | {"bare": []}
    try:
        with stop_signals_interrupt(), local_etcd() as cluster:
            endpoint = cluster.endpoints[0]
            compact = Compactor(cluster)
            for round_number in range(args.repeat):
                for name, repo in clients:
                    result = run_once(args, endpoint, repo, f"{name}-{round_number + 1}", logs, compact)
                    runs[name].append(result)
                    print(_line(name, result), flush=True)
                result = run_bare(args, endpoint, f"bare-{round_number + 1}", logs, compact)
                runs["bare"].append(result)
                print(_line("bare", result), flush=True)
    except (BenchmarkError, OSError) as error:
        sys.stderr.write(fail_line(PROGRAM, error) + f" (logs: {logs})\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROGRAM}: interrupted (logs: {logs})\n")
        return 130
    info = machine()
    print()
    print(
        f"{args.users} users x {args.streams} streams x {args.watchers} watchers "
        f"({args.users * args.streams * args.watchers} watchers), {args.seconds:g}s windows, medians of {args.repeat}"
    )
    for line in machine_lines(info):
        print(line)
    medians = {name: _median(results) for name, results in runs.items()}
    print(f"{'client':<10} {'events/s':>10} {'CPU cores':>9} {'events/CPU s':>12} {'P50 ms':>8} {'P99 ms':>8}")
    for name, median in medians.items():
        print(
            f"{name:<10} {median['events_per_second']:>10,.0f} {median['cpu_cores']:>9.2f} "
            f"{median['events_per_cpu_second']:>12,.0f} {_ms(median['p50_ms']):>8} {_ms(median['p99_ms']):>8}"
        )
    result = {"settings": vars(args) | {"baseline_repo": str(args.baseline_repo)}, "machine": info, "runs": runs}
    if "baseline" in medians:
        ratio = medians["this"]["events_per_cpu_second"] / medians["baseline"]["events_per_cpu_second"]
        result["ratio"] = ratio
        print(f"events per CPU second, this / baseline: {ratio:.2f}x")
    floor = medians["this"]["events_per_cpu_second"] / medians["bare"]["events_per_cpu_second"]
    result["share_of_floor"] = floor
    print(f"events per CPU second, this / bare grpc.aio: {floor:.2f}")
    return finish(PROGRAM, args, result, logs)


def _median(results: list[dict]) -> dict:
    keys = ("events_per_second", "cpu_cores", "events_per_cpu_second", "p50_ms", "p99_ms")
    return {key: statistics.median(result[key] for result in results) for key in keys}


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"  # the bare loop times nothing


def _line(name: str, result: dict) -> str:
    return (
        f"{name}: {result['events_per_second']:,.0f} events/s on {result['cpu_cores']:.2f} cores: "
        f"{result['events_per_cpu_second']:,.0f} events per CPU second, P50 {_ms(result['p50_ms'])} ms, "
        f"P99 {_ms(result['p99_ms'])} ms, {result['failures']} failures"
    )


if __name__ == "__main__":
    sys.exit(main())
