"""Put latency against the number of prefix watchers, with and without slow consumers (etcd issues 19064, 18109).

    python -m benchmarks.watch_fanout [--watchers 0,100,1000,10000] [--consume-delays 0,0.002]
                                      [--slow-fraction 1] [--rate 50] [--seconds 10] [--watcher-processes 1]
                                      [--json FILE] [--keep-logs]

One local 1-member etcd on 127.0.0.1. For each number of watchers and each consumer delay, a headless Locust run of
``EtcdWatcherUser`` opens the watchers on the prefix (streams of at most ``WATCHERS_PER_STREAM``, one a user, in
``--watcher-processes`` processes) and keeps them open; once etcd's own gauge counts them all, a second Locust run,
rate-driven ``EtcdPutUser`` at ``--rate`` puts/s, writes under the prefix for ``--seconds``. The writer and the
watchers are separate processes, so the put latency is etcd's answer, not a process busy with events.

Printed per row: the puts' exact P50/P99/P99.9 (service time, from the writer's ``_latency.csv``), the events etcd
sent (its ``etcd_debugging_mvcc_events_total``) and the events the watchers counted, etcd's slow watchers at most
(``etcd_debugging_mvcc_slow_watcher_total``: watchers whose events etcd could not send and keeps for later), the
watchers the client saw behind and the ones etcd cancelled, and the CPU of the watcher processes and of etcd over
the writer's run, in % of one core: a watcher side near 100 % per process was client-bound and read no faster.
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import csv
import math
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from benchmarks._common import (
    BenchmarkError,
    Child,
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
)
from etcd_users.files import SERVICE, SUFFIXES

PROGRAM = "benchmarks.watch_fanout"
PREFIX = "/locust-etcd-fanout/"
WATCHERS_PER_STREAM = 100
WRITER_USERS = 10
WATCHERS_UP_SECONDS = 120.0  # for etcd to count every watcher open
WATCHER_RUN_SECONDS = 3600  # the watcher run's own bound (-t): the harness stops it first
POLL_SECONDS = 0.5
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_METRICS = {
    "watchers": "etcd_debugging_mvcc_watcher_total",
    "slow_watchers": "etcd_debugging_mvcc_slow_watcher_total",
    "events": "etcd_debugging_mvcc_events_total",
    "pending_events": "etcd_debugging_mvcc_pending_events_total",
    "cpu_seconds": "process_cpu_seconds_total",
}
_TALLY_LINE = re.compile(
    r"watchers: (?P<watchers>\d+) watchers, (?P<events>\d+) events .*?behind: P50 (?P<lag_p50>\d+) "
    r"P99 (?P<lag_p99>\d+) max (?P<lag_max>\d+) revisions, (?P<behind>\d+) watchers behind "
    r".*cancelled: (?P<cancelled>.*)$"
)


def counts(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more integers from 0 up, such as 0,100,1000")
    return values


def delays(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of seconds") from None
    if not values or not all(0.0 <= value < 10.0 for value in values):  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds per event from 0 to under 10, such as 0,0.002")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=counts, default=[0, 100, 1000, 10000], help="prefix watchers per row")
    parser.add_argument(
        "--consume-delays", type=delays, default=[0.0, 0.002], help="seconds a slow stream spends per event (0,0.002)"
    )
    parser.add_argument("--slow-fraction", type=float, default=1.0, help="share of the streams that are slow (1)")
    parser.add_argument("--rate", type=float, default=50.0, help="puts/s of the writer in total (default 50)")
    parser.add_argument("--seconds", type=float, default=10.0, help="the writer's run (default 10)")
    parser.add_argument("--watcher-processes", type=int, default=1, help="processes of the watcher run (default 1)")
    parser.add_argument("--json", metavar="FILE", help="write settings, machine and every row here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if not 0.0 <= args.slow_fraction <= 1.0:
        parser.error("--slow-fraction: give a share of the streams from 0 to 1, such as 0.1")
    if not (args.rate > 0 and math.isfinite(args.rate)) or not (1.0 <= args.seconds < 86400):
        parser.error("--rate must be above 0 and --seconds at least 1")
    if args.watcher_processes < 1:
        parser.error("--watcher-processes: give 1 or more")
    return args


def scrape(url: str) -> dict[str, float]:
    """The figures of ``_METRICS`` from a member's /metrics (sums over their labels)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as response:
            text = response.read().decode()
    except (urllib.error.URLError, OSError) as error:
        raise BenchmarkError(f"cannot read etcd's metrics at {url}: {error}") from None
    wanted = {name: key for key, name in _METRICS.items()}
    found = dict.fromkeys(_METRICS, 0.0)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        key = wanted.get(name.split("{", 1)[0])
        if key is not None:
            found[key] += float(value)
    return found


def session_cpu_seconds(session: int) -> float:
    """User and system CPU of every process in ``session`` (a Child's, with its --processes workers)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone in between
            continue
        fields = stat.rpartition(")")[2].split()  # after the command name, which may hold spaces
        if int(fields[3]) == session:
            total += int(fields[11]) + int(fields[12])
    return total / _CLK_TCK


def locust_command(users: int, spawn_rate: float, run_time: str, endpoint: str, *rest: str) -> list[str]:
    return [
        sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary",
        "-u", str(users), "-r", repr(spawn_rate), "-t", run_time,
        "--etcd-endpoints", endpoint, "--etcd-prefix", PREFIX, *locust_etcd_flags(), *rest,
    ]  # fmt: skip


def wait_for_watchers(process: Child, url: str, wanted: float) -> None:
    deadline = time.monotonic() + WATCHERS_UP_SECONDS
    while scrape(url)["watchers"] < wanted:
        if not process.running():
            raise process.failure(f"exited with code {process.process.returncode} before its watchers were open")
        if time.monotonic() > deadline:
            raise BenchmarkError(
                f"{process.name}: etcd counted {scrape(url)['watchers']:.0f} of {wanted:.0f} watchers after "
                f"{WATCHERS_UP_SECONDS:.0f}s (log: {process.stderr_path})"
            )
        time.sleep(POLL_SECONDS)


def tally_line(process: Child) -> dict | None:
    """The watcher run's closing ``watchers: …`` line, parsed."""
    try:
        return parse_tally(process.stderr_path.read_text(errors="replace").splitlines())
    except OSError:
        return None


def parse_tally(lines: list[str]) -> dict | None:
    """The last ``watchers: …`` line (``WatchTally.line``) of ``lines``: its counts, and etcd's cancel reasons."""
    for line in reversed(lines):
        found = _TALLY_LINE.search(line)
        if found:
            fields = found.groupdict()
            cancelled = fields.pop("cancelled").strip()
            return {**{key: int(value) for key, value in fields.items()}, "cancelled": cancelled}
    return None


def put_latency(csv_prefix: Path) -> dict:
    path = Path(f"{csv_prefix}{SUFFIXES['latency']}")
    try:
        with open(path, newline="") as file:
            for row in csv.DictReader(file):
                if row["Name"] == "put" and row["Series"] == SERVICE:
                    return {
                        "puts": int(row["Count"]),
                        "failures": int(row["Failures"]),
                        **{key: float(row[key]) for key in ("P50", "P99", "P99.9", "Max")},
                        "first": float(row["First"]),
                        "last": float(row["Last"]),
                    }
    except (OSError, KeyError, ValueError):
        pass
    raise BenchmarkError(f"the writer left no put row in {path}")


def measure(args, cluster, compact: Compactor, logs: Path, watchers: int, delay: float) -> dict:
    endpoint, url = cluster.endpoints[0], cluster.metrics_urls[0]
    label = f"{watchers}-watchers-{delay:g}s"
    compact()
    before_watchers = scrape(url)["watchers"]
    users = math.ceil(watchers / WATCHERS_PER_STREAM)
    watcher_command = locust_command(
        max(1, users), max(1, users / 5), f"{WATCHER_RUN_SECONDS}s", endpoint,
        "--etcd-watch-streams", "1", "--etcd-watchers-per-stream", str(math.ceil(watchers / max(1, users))),
        "--etcd-watch-consume-delay", repr(delay), "--etcd-watch-slow-fraction", repr(args.slow_fraction),
        *(["--processes", str(args.watcher_processes)] if args.watcher_processes > 1 else []),
        "EtcdWatcherUser",
    )  # fmt: skip
    writer_prefix = logs / f"writer-{label}"
    writer_command = locust_command(
        WRITER_USERS, WRITER_USERS, f"{args.seconds:g}s", endpoint, "--csv", str(writer_prefix),
        "--etcd-user-rate", repr(args.rate / WRITER_USERS), "EtcdPutUser",
    )  # fmt: skip
    environment = child_environment()
    row: dict = {"watchers": watchers, "consume_delay": delay}
    watcher_context = child(f"watchers {label}", watcher_command, logs, environment) if watchers else _nothing()
    with watcher_context as watcher_run:
        if watcher_run is not None:
            wait_for_watchers(watcher_run, url, before_watchers + watchers)
        start = scrape(url)
        samples = [_sample(start, watcher_run)]  # (time, watchers' CPU s, etcd's CPU s): the window's CPU
        most = dict.fromkeys(("slow_watchers", "pending_events"), 0.0)
        with child(f"writer {label}", writer_command, logs, environment) as writer:
            deadline = time.monotonic() + args.seconds + 120
            while writer.running():
                sample = scrape(url)
                samples.append(_sample(sample, watcher_run))
                for key in most:
                    most[key] = max(most[key], sample[key])
                if time.monotonic() > deadline:
                    raise BenchmarkError(f"{writer.name} did not finish (log: {writer.stderr_path})")
                time.sleep(POLL_SECONDS)
            if writer.process.returncode not in (0, 1):  # 1: some requests failed, counted in the row
                raise writer.failure(f"exited with code {writer.process.returncode}")
        end = scrape(url)
        samples.append(_sample(end, watcher_run))
        if watcher_run is not None:
            watcher_run.terminate(grace=30)
            row["client"] = tally_line(watcher_run)
    row.update(put_latency(writer_prefix))
    watcher_cpu, etcd_cpu = window_cpu(samples, row.pop("first"), row.pop("last"))
    row.update(
        {
            "etcd_events": end["events"] - start["events"],
            "etcd_slow_watchers_max": most["slow_watchers"],
            "etcd_pending_events_max": most["pending_events"],
            "etcd_cpu_pct": etcd_cpu,
            "watcher_cpu_pct": watcher_cpu,
        }
    )
    client = row.get("client") or {}
    sys.stderr.write(
        f"{PROGRAM}: {label}: put P99 {row['P99']:.2f} ms, {row['etcd_events']:,.0f} events sent, "
        f"{client.get('events', 0):,} counted, watchers' CPU {row['watcher_cpu_pct']:.0f}%\n"
    )
    sys.stderr.flush()
    return row


def _sample(metrics: dict[str, float], watcher_run: Child | None) -> tuple[float, float, float]:
    watchers = session_cpu_seconds(watcher_run.pid) if watcher_run is not None else 0.0
    return time.time(), watchers, metrics["cpu_seconds"]


def window_cpu(samples: list[tuple[float, float, float]], first: float, last: float) -> tuple[float, float]:
    """The watchers' and etcd's CPU in % of one core between the samples that bound the puts' first and last (the
    writer's start-up left out)."""
    inside = [sample for sample in samples if first <= sample[0] <= last] or samples
    (start, watchers_0, etcd_0), (end, watchers_1, etcd_1) = inside[0], inside[-1]
    if end <= start:
        return 0.0, 0.0
    return 100.0 * (watchers_1 - watchers_0) / (end - start), 100.0 * (etcd_1 - etcd_0) / (end - start)


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc_info) -> None:
        return None


def table(rows: list[dict]) -> list[str]:
    head = (
        "| watchers | consume delay | puts | put P50 ms | put P99 ms | put P99.9 ms | events sent (etcd) "
        "| events counted | etcd slow watchers (max) | watchers behind | cancelled | watchers' CPU % | etcd CPU % |"
    )
    lines = [head, "|" + "---:|" * 13]
    for row in rows:
        client = row.get("client") or {}
        delay = f"{row['consume_delay'] * 1000:g} ms" if row["consume_delay"] else "0"
        lines.append(
            f"| {row['watchers']:,} | {delay} | {row['puts']:,} | {row['P50']:.2f} | {row['P99']:.2f} "
            f"| {row['P99.9']:.2f} | {row['etcd_events']:,.0f} | {client.get('events', 0):,} "
            f"| {row['etcd_slow_watchers_max']:,.0f} | {client.get('behind', 0):,} | {client.get('cancelled', '')} "
            f"| {row['watcher_cpu_pct']:.0f} | {row['etcd_cpu_pct']:.0f} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs = log_dir("locust-etcd-watch-fanout-")
    info = machine()
    result: dict = {"machine": info, "settings": vars(args), "rows": []}
    try:
        with stop_signals_interrupt(), local_etcd() as cluster:
            compact = Compactor(cluster)
            for delay in args.consume_delays:
                for watchers in args.watchers:
                    if watchers == 0 and delay and 0.0 in args.consume_delays:
                        continue  # no watchers: no consumer to be slow, the row of delay 0 says it
                    result["rows"].append(measure(args, cluster, compact, logs, watchers, delay))
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROGRAM}: interrupted; logs in {logs}\n")
        return 130
    except BenchmarkError as error:
        sys.stderr.write(fail_line(PROGRAM, error) + "\n")
        return 1
    lines = [
        "locust-etcd put latency against prefix watchers: a writer and the watchers in separate Locust runs",
        *machine_lines(info),
        f"writer: {WRITER_USERS} users, {args.rate:g} puts/s in total, {args.seconds:g}s; watchers: streams of "
        f"{WATCHERS_PER_STREAM} on the prefix in {args.watcher_processes} process(es), slow streams "
        f"{args.slow_fraction:g} of them at the consume delay",
        "",
        *table(result["rows"]),
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return finish(PROGRAM, args, result, logs)


if __name__ == "__main__":
    sys.exit(main())
