"""The field report's concurrency ladder with etcd's Go tool and this tool side by side, on the same cluster.

    python -m benchmarks.ladder [--rungs 1,200,2000,5000,10000,20000] [--seconds 10] [--go-benchmark PATH]
                                [--processes CORES] [--json FILE] [--keep-logs]

Starts three etcd members on 127.0.0.1 (free ports, the quota of ``suites/tls-put-concurrency-ladder.yaml``) and, for
each rung of N clients: etcd's Go ``benchmark put`` with N clients on N connections, then one headless Locust run of
``EtcdPutUser`` with N users on N connections spread over ``--processes`` processes; 128 B keys, 4 KB values, one key,
as the suite sets them. Between runs the cluster is compacted and defragmented, so that the db does not fill. Prints
per rung: requests/s, P99, errors by etcd's label and client CPU per request of each tool. A process holds at most
the hard limit of open files: a rung with more connections than fit runs in more processes (either tool).
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import contextlib
import csv
import json
import math
import os
import resource
import shutil
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from benchmarks._common import (
    REPO,
    BenchmarkError,
    Child,
    Compactor,
    child,
    child_environment,
    fail_line,
    finish,
    locust_etcd_flags,
    log_dir,
    machine,
    machine_lines,
    positive_ints,
    stop_signals_interrupt,
)
from benchmarks.efficiency import parse_go_report
from etcd_users.files import SUFFIXES
from etcd_users.local import ClusterError, LocalCluster
from etcd_users.local.ports import free_ports
from etcd_users.open_files import OTHER_FILES
from etcd_users.suite.loader import load_suite

PROGRAM = "benchmarks.ladder"
SUITE = REPO / "suites" / "tls-put-concurrency-ladder.yaml"
MEMBERS = 3
FIRST_RATE_GUESS = 300.0  # req/s of the first rung's Go run, sized before anything was measured
SPAWN_USERS_PER_SECOND = 2000  # extra run time a Locust rung gets for starting its users (they start at once)
SLACK_SECONDS = 120.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rungs", type=positive_ints, default=[1, 200, 2000, 5000, 10000, 20000], help="clients per rung"
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per tool and rung (default 10)")
    parser.add_argument("--go-benchmark", metavar="PATH", help="etcd's Go benchmark (benchmarks/build_go_benchmark.sh)")
    parser.add_argument(
        "--processes",
        type=int,
        default=os.cpu_count() or 1,
        help="Locust processes for this tool's side (default: the machine's cores); more where connections need it",
    )
    parser.add_argument("--json", metavar="FILE", help="write the machine, the settings and every rung here")
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if not math.isfinite(args.seconds) or args.seconds <= 0:
        parser.error(f"--seconds: {args.seconds} must be a number greater than zero")
    if args.processes < 1:
        parser.error(f"--processes: {args.processes} must be 1 or more")
    if args.go_benchmark and not shutil.which(args.go_benchmark):
        parser.error(f"--go-benchmark: {args.go_benchmark!r} is not an executable; build it with "
                     "benchmarks/build_go_benchmark.sh")  # fmt: skip
    return args


def room_per_process() -> int:
    """Connections one process can open here: its hard limit of open files less what it holds besides."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return sys.maxsize if hard == resource.RLIM_INFINITY else max(1, hard - OTHER_FILES)


def locust_split(clients: int, processes: int, room: int) -> tuple[int, int]:
    """(processes, connections per endpoint per process) for ``clients`` users on about as many connections: at
    most one process per user, and as many more processes as the connections need."""
    processes = max(1, min(processes, clients))
    while math.ceil(clients / MEMBERS / processes) * MEMBERS > room:
        processes += 1
    return processes, math.ceil(clients / MEMBERS / processes)


def go_split(clients: int, room: int) -> list[int]:
    """Clients (= connections) of each Go process: one process unless its connections cannot fit in one."""
    count = math.ceil(clients / room)
    return [clients // count + (1 if index < clients % count else 0) for index in range(count)]


class Cluster:
    """Three members with the suite's etcd flags, compacted and defragmented between runs."""

    def __init__(self, etcd_args: tuple[str, ...]) -> None:
        self.local = LocalCluster(
            MEMBERS, extra_args=etcd_args, name="locust-etcd-ladder", auto_compaction_retention=None
        )

    def __enter__(self) -> "Cluster":
        try:
            self.local.start(timeout=60)
        except ClusterError as error:
            raise BenchmarkError(f"cannot start a local 3-member etcd: {error}") from None
        self.compact = Compactor(self.local)
        self.targets = [endpoint.split("://", 1)[1] for endpoint in self.local.endpoints]
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.local.stop()

    def clean(self) -> None:
        """Compaction frees the old revisions' pages; defragmentation gives them back, so the next rung starts on
        a small db."""
        self.compact()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for endpoint in self.local.endpoints:
            request = urllib.request.Request(
                f"{endpoint}/v3/maintenance/defragment", data=b"{}", headers={"Content-Type": "application/json"}
            )
            try:
                with opener.open(request, timeout=120) as response:
                    response.read()
            except OSError as error:
                raise BenchmarkError(f"cannot defragment {endpoint}: {error}") from None


def wait_sampling_tree_cpu(process: Child, timeout: float) -> tuple[int, float]:
    """``process.wait``, and the CPU seconds of the process and every process under it, sampled every half second.

    Locust's master does not always reap its workers: its exit handler drops a worker that ``waitpid(WNOHANG)`` finds
    still shutting down, so RUSAGE_CHILDREN misses that worker's CPU. The samples count each process up to its last
    sample (its final half second at most is missed); the caller takes the larger of the two figures."""
    deadline = time.monotonic() + timeout
    last: dict[int, float] = {}
    root = psutil.Process(process.pid)
    while process.running() and time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            for each in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = each.cpu_times()
                    last[each.pid] = times.user + times.system
        time.sleep(0.5)
    return process.wait(max(0.0, deadline - time.monotonic())), sum(last.values())


def run_go(args, cluster: Cluster, clients: int, rate_guess: float, settings: dict, logs: Path) -> dict:
    """etcd's Go tool with ``clients`` clients on as many connections; a request count sized from ``rate_guess``."""
    shares = go_split(clients, room_per_process())
    total = max(2 * clients, int(rate_guess * args.seconds))
    environment = child_environment()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    reports = []
    with contextlib.ExitStack() as running:  # every process killed on the way out, whatever happens
        started = []
        for index, share in enumerate(shares):
            command = [
                args.go_benchmark,
                f"--endpoints={','.join(cluster.targets)}",
                f"--conns={share}",
                f"--clients={share}",
                "put",
                f"--key-size={settings['key-size']}",
                f"--val-size={settings['val-size']}",
                f"--key-space-size={settings['key-space-size']}",
                f"--total={max(2 * share, total * share // clients)}",
            ]
            started.append(running.enter_context(child(f"go-{clients}-{index}", command, logs, environment)))
        for process in started:
            code = process.wait(args.seconds * 20 + SLACK_SECONDS)
            if code != 0:
                raise process.failure(f"exited with code {code}")
            report = parse_go_report(process.stdout_path.read_text(errors="replace"))
            if report is None:
                raise process.failure("printed no Summary")
            reports.append(report)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    requests = sum(report["requests"] for report in reports)
    seconds = max(report["seconds"] for report in reports)
    errors: dict[str, int] = {}
    for report in reports:
        for label, count in report["errors_by_label"].items():
            errors[label] = errors.get(label, 0) + count
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {
        "processes": len(shares),
        "requests": requests,
        "seconds": seconds,
        "requests_per_second": requests / seconds if seconds > 0 else 0.0,
        # one process: its P99; several: the highest of theirs (their histograms are not merged)
        "p99_ms": max((report["latency_ms"]["p99"] or 0.0) for report in reports),
        "errors": errors,
        "cpu_us_per_request": cpu / requests * 1e6 if requests else None,
    }


def run_locust(args, cluster: Cluster, clients: int, settings: dict, logs: Path) -> dict:
    """This tool: ``clients`` users started at once on about as many connections, over the processes they need."""
    processes, conns = locust_split(clients, args.processes, room_per_process())
    prefix = logs / f"locust-{clients}"
    run_time = math.ceil(args.seconds + clients / SPAWN_USERS_PER_SECOND)
    command = [
        sys.executable, "-m", "locust",
        "-f", "locustfile.py",
        "--headless", "--only-summary",
        "-u", str(clients), "-r", str(clients),
        "-t", f"{run_time}s",
        "--csv", str(prefix),
        "--etcd-endpoints", ",".join(cluster.local.endpoints),
        "--etcd-conns", str(conns),
        "--etcd-key-size", str(settings["key-size"]),
        "--etcd-val-size", str(settings["val-size"]),
        "--etcd-key-space-size", str(settings["key-space-size"]),
        *locust_etcd_flags(),
        "EtcdPutUser",
    ]  # fmt: skip
    if processes > 1:
        port = str(free_ports(1)[0])
        command += ["--processes", str(processes), "--master-bind-host", "127.0.0.1"]
        command += ["--master-bind-port", port, "--master-port", port]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with child(f"locust-{clients}", command, logs, child_environment()) as process:
        code, tree_cpu = wait_sampling_tree_cpu(process, run_time + SLACK_SECONDS + clients / 200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code not in (0, 1):  # 1: requests failed, which the table shows
        raise process.failure(f"exited with code {code}")
    try:
        with open(f"{prefix}{SUFFIXES['latency']}", newline="") as latency:
            rows = [row for row in csv.DictReader(latency) if row["Name"] == "put" and row["Series"] == "service"]
        with open(f"{prefix}{SUFFIXES['failures']}", newline="") as failures:
            errors = {row["Error"]: int(row["Occurrences"]) for row in csv.DictReader(failures)}
    except (OSError, KeyError, ValueError):
        raise process.failure("left no latency or failures file") from None
    # no put row: not one request completed in the run (its users were still starting): a rung of 0 req/s
    put = rows[0] if rows else {"Count": "0", "First": "0", "Last": "0", "P99": "nan"}
    requests = int(put["Count"])
    seconds = float(put["Last"]) - float(put["First"])  # first to last request: as the Go tool's Total
    cpu = max(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, tree_cpu)
    return {
        "processes": processes,
        "conns_per_endpoint_per_process": conns,
        "requests": requests,
        "seconds": seconds,
        "requests_per_second": requests / seconds if seconds > 0 else 0.0,
        "p99_ms": float(put["P99"]) if requests else None,
        "errors": errors,
        # the whole run, the start of every user and process included (as the Go tool's figure)
        "cpu_us_per_request": cpu / requests * 1e6 if requests else None,
    }


def _errors(errors: dict[str, int] | None) -> str:
    if errors is None:
        return "-"
    if not errors:
        return "none"
    return "; ".join(f"{count:,} {label}" for label, count in sorted(errors.items(), key=lambda item: -item[1]))


def _figure(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(rungs: list[dict]) -> list[str]:
    header = (
        "| clients | Go req/s | Go P99 ms | Go errors | this tool req/s | P99 ms | errors | processes "
        "| Go CPU µs/req | CPU µs/req |"
    )
    lines = [header, "|---:|---:|---:|---|---:|---:|---|---:|---:|---:|"]
    for rung in rungs:
        go, ours = rung.get("go"), rung["locust"]
        lines.append(
            f"| {rung['clients']:,} | {_figure(go and go['requests_per_second'])} | {_figure(go and go['p99_ms'], 1)} "
            f"| {_errors(go and go['errors'])} | {_figure(ours['requests_per_second'])} | {_figure(ours['p99_ms'], 1)} "
            f"| {_errors(ours['errors'])} | {ours['processes']} | {_figure(go and go['cpu_us_per_request'])} "
            f"| {_figure(ours['cpu_us_per_request'])} |"
        )
    return lines


def run(args: argparse.Namespace, logs: Path) -> dict:
    suite = load_suite(SUITE)
    settings = {name: suite.fixed[name] for name in ("key-size", "val-size", "key-space-size")}
    info = machine()
    rungs = []
    rate_guess = FIRST_RATE_GUESS
    print("\n".join(machine_lines(info)).replace("1 member", f"{MEMBERS} members"), flush=True)
    print(f"etcd flags: {' '.join(suite.etcd_args)}; {args.seconds:g} s per tool and rung", flush=True)
    with Cluster(suite.etcd_args) as cluster:
        for clients in args.rungs:
            rung: dict = {"clients": clients}
            if args.go_benchmark:
                cluster.clean()
                rung["go"] = run_go(args, cluster, clients, rate_guess, settings, logs)
                rate_guess = max(FIRST_RATE_GUESS, rung["go"]["requests_per_second"])
            cluster.clean()
            rung["locust"] = run_locust(args, cluster, clients, settings, logs)
            rungs.append(rung)
            print(table(rungs)[-1], flush=True)
    return {
        "machine": info,
        "settings": {**settings, "seconds": args.seconds, "processes": args.processes},
        "rungs": rungs,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logs = log_dir("locust-etcd-ladder-")
    try:
        with stop_signals_interrupt():
            result = run(args, logs)
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROGRAM}: interrupted; logs in {logs}\n")
        return 130
    except BenchmarkError as error:
        sys.stderr.write(fail_line(PROGRAM, error) + "\n")
        return 1
    sys.stdout.write("\n" + "\n".join(table(result["rungs"])) + "\n")
    return finish(PROGRAM, args, json.loads(json.dumps(result)), logs)


if __name__ == "__main__":
    sys.exit(main())
