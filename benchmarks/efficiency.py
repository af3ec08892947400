"""Load-generator efficiency: our Locust users against the Python floor (a bare grpc.aio loop), in one run.

    python -m benchmarks.efficiency [--seconds 15] [--warmup 3] [--ops put,range/linearizable,range/serializable]
                                    [--conns 1,8,64] [--users 64] [--json FILE] [--go-benchmark PATH]
                                    [--baseline-repo DIR]

Starts a 1-member etcd on 127.0.0.1 and, for each op and connection count, one after the other: (a) one headless
Locust process running the ready user class, measured from inside by ``benchmarks/cpu_probe.py`` after the warm-up;
(b) ``benchmarks.bare_aio`` with the same concurrency, measured the same way; (c) with ``--go-benchmark``, etcd's Go
``benchmark`` tool; (d) with ``--baseline-repo DIR``, the same Locust run from another checkout of the tool (a
change's before). Prints requests/s, client CPU per request and P50/P99 of each, and the ratios (a)/(b) against the
targets, and (a)/(d). A load tester that burns more CPU per request than it must measures its own limits, not etcd's.
"""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import math
import re
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

from hdrh.histogram import HdrHistogram

from benchmarks._common import (
    DEFAULTS,
    PROBE,
    REPO,
    BenchmarkError,
    Compactor,
    ConnectionSampler,
    child,
    child_environment,
    client_port,
    local_etcd,
    locust_etcd_flags,
    machine,
    machine_lines,
    positive_ints,
    read_result,
    run_and_report,
    watch,
)

PROGRAM = "benchmarks.efficiency"
USER_CLASSES = {
    "put": "EtcdPutUser",
    "range/linearizable": "LinearizableRangeUser",
    "range/serializable": "SerializableRangeUser",
}
BASELINE = "locust baseline"  # the Locust run of --baseline-repo's checkout
SHORT_NAMES = {"bare aio": "bare", "go benchmark": "go", BASELINE: "baseline"}
RPS_TARGET = 0.95  # Locust's requests/s at least this share of the bare loop's
CPU_TARGET = 1.10  # Locust's CPU per request at most this multiple of the bare loop's
LATENCY_TARGET = 1.10  # with --rate: Locust's P50 and P99 at most this multiple of the bare loop's
# start-up (imports, connecting) and shut-down of one measured process, beyond warm-up and window
PROCESS_SLACK_SECONDS = 90.0


def _ops(text: str) -> list[str]:
    ops = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [op for op in ops if op not in USER_CLASSES]
    if not ops or unknown:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or text!r}: ops are {', '.join(USER_CLASSES)}")
    return ops


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {PROGRAM}", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measurement window of each run (default 15)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before the window opens (default 3)")
    parser.add_argument("--ops", type=_ops, default=list(USER_CLASSES), help="comma-separated (default: all three)")
    parser.add_argument("--conns", type=positive_ints, default=[1, 8, 64], help="connection counts (default 1,8,64)")
    parser.add_argument("--users", type=int, default=64, help="concurrent users / loops (default 64)")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests per second of all the users together, each user at its share on a schedule (default 0: back "
        "to back); the table then compares P50 and P99 too",
    )
    parser.add_argument(
        "--engine",
        choices=("loop", "greenlet"),
        default="loop",
        help="the Locust users' --etcd-engine (default loop: the ready workloads on the transport's loop)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each client per op and conns, alternating; the table shows their medians (default 1)",
    )
    parser.add_argument("--json", metavar="FILE", help="write settings, machine, every run and the ratios here")
    parser.add_argument("--go-benchmark", metavar="PATH", help="etcd's Go benchmark binary, run with the same load")
    parser.add_argument(
        "--baseline-repo",
        metavar="DIR",
        type=Path,
        help="another checkout of the tool (e.g. a git worktree of main): its Locust run too, alternating, and the "
        "ratio of this checkout's to it",
    )
    parser.add_argument("--keep-logs", action="store_true", help="keep the runs' logs (kept anyway on failure)")
    args = parser.parse_args(argv)
    if args.baseline_repo is not None and not (args.baseline_repo / PROBE).is_file():
        parser.error(f"--baseline-repo: {str(args.baseline_repo)!r} is not a checkout of the tool (no {PROBE})")
    if args.seconds <= 0 or args.warmup < 0 or args.users < 1 or args.repeat < 1 or args.rate < 0:
        parser.error("--seconds, --users and --repeat must be greater than zero, --warmup and --rate zero or more")
    if args.go_benchmark and not shutil.which(args.go_benchmark):
        parser.error(f"--go-benchmark: {args.go_benchmark!r} is not an executable")
    return args


def _slug(*parts: object) -> str:
    return "-".join(str(part).replace("/", "-") for part in parts)


def _summary(client: str, op: str, conns: int, raw: dict, connections: int | None = None) -> dict:
    requests, seconds = raw["requests"], raw["seconds"]
    if requests <= 0 or seconds <= 0:
        raise BenchmarkError(f"{client} ({op}, {conns} conns) completed no request in its window")
    return {
        "op": op,
        "conns": conns,
        "client": client,
        "requests_per_second": requests / seconds,
        "cpu_us_per_request": raw["cpu_seconds"] / requests * 1e6 if raw.get("cpu_seconds") is not None else None,
        "p50_ms": raw["latency_ms"]["p50"],
        "p99_ms": raw["latency_ms"]["p99"],
        "errors": raw.get("failures", 0),
        "tcp_connections": connections,  # to etcd, sampled while the window was open
        "raw": raw,
    }


class Runs:
    """The measurements of one harness run, against one local etcd."""

    def __init__(self, args: argparse.Namespace, endpoint: str, compact: Compactor, logs: Path) -> None:
        self.args = args
        self.endpoint = endpoint  # http://127.0.0.1:PORT
        self.target = endpoint.split("://", 1)[1]
        self.port = int(self.target.rsplit(":", 1)[1])
        self.compact = compact
        self.logs = logs
        self.window = args.warmup + args.seconds
        self.environment = child_environment()

    def _bare_command(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.bare_aio",
            "--endpoint", self.target,
            "--prefix", DEFAULTS["--etcd-prefix"],
            "--key-size", str(DEFAULTS["--etcd-key-size"]),
            "--val-size", str(DEFAULTS["--etcd-val-size"]),
            "--key-space-size", str(DEFAULTS["--etcd-key-space-size"]),
            "--timeout", str(DEFAULTS["--etcd-timeout"]),
            *extra,
        ]  # fmt: skip

    def populate(self) -> None:
        """Write the read key space once, before any window: the Locust users then find it and only count it."""
        out = self.logs / "populate.json"
        command = self._bare_command("--populate", "--json", str(out))
        with child("key space writer", command, self.logs, self.environment) as writer:
            if writer.wait(PROCESS_SLACK_SECONDS + 60) != 0:
                raise writer.failure("failed")
        read_result(out, writer)

    def locust(self, op: str, conns: int, repo: Path = REPO, client: str = "locust") -> dict:
        """The Locust run of ``repo``'s checkout (its locustfile and its package: the working directory comes first
        on the import path)."""
        args = self.args
        out = self.logs / f"{_slug(client, op, conns)}.json"
        command = [
            sys.executable, "-m", "locust",
            "-f", f"locustfile.py,{PROBE}",
            "--headless", "--only-summary",
            "-u", str(args.users), "-r", str(args.users),
            "-t", f"{math.ceil(self.window)}s",
            "--etcd-endpoints", self.endpoint,
            "--etcd-conns", str(conns),
            # the default goes unsaid: a --baseline-repo from before the engine has no such option
            *(("--etcd-engine", args.engine) if args.engine != "loop" else ()),
            *(("--etcd-user-rate", repr(args.rate / args.users)) if args.rate > 0 else ()),
            *locust_etcd_flags(),
            USER_CLASSES[op],
        ]  # fmt: skip
        environment = {
            **self.environment,
            "ETCD_BENCH_PROBE_OUT": str(out),
            "ETCD_BENCH_PROBE_WARMUP": str(args.warmup),
            "ETCD_BENCH_PROBE_SECONDS": str(args.seconds),
        }
        self.compact()
        connections = ConnectionSampler(self.port)
        with child(f"{client} {op} conns={conns}", command, self.logs, environment, cwd=repo) as process:
            watch(process, out, self.window + PROCESS_SLACK_SECONDS, connections)
            code = process.wait(PROCESS_SLACK_SECONDS)
            if code not in (0, 1):  # 1: the run saw failed requests, which the table shows
                raise process.failure(f"exited with code {code}")
        return _summary(client, op, conns, read_result(out, process), connections.most)

    def bare(self, op: str, conns: int) -> dict:
        args = self.args
        out = self.logs / f"{_slug('bare', op, conns)}.json"
        command = self._bare_command(
            "--op", op,
            "--conns", str(conns),
            "--users", str(args.users),
            "--warmup", str(args.warmup),
            "--seconds", str(args.seconds),
            "--rate", repr(args.rate),
            "--json", str(out),
        )  # fmt: skip
        self.compact()
        connections = ConnectionSampler(self.port)
        with child(f"bare aio {op} conns={conns}", command, self.logs, self.environment) as process:
            watch(process, out, self.window + PROCESS_SLACK_SECONDS, connections)
            code = process.wait(PROCESS_SLACK_SECONDS)
            if code != 0:
                raise process.failure(f"exited with code {code}")
        return _summary("bare aio", op, conns, read_result(out, process), connections.most)

    def go(self, op: str, conns: int, reference_rps: float) -> dict:
        """etcd's Go tool with the same load; it runs a request count, sized here to last about --seconds."""
        args = self.args
        total = max(1000, int(reference_rps * args.seconds))
        command = [
            args.go_benchmark,
            f"--endpoints={self.target}",
            f"--conns={conns}",
            f"--clients={args.users}",
            *((f"--rate={round(args.rate)}",) if args.rate > 0 else ()),
        ]
        if op == "put":
            command += [
                "put",
                f"--key-size={DEFAULTS['--etcd-key-size']}",
                f"--val-size={DEFAULTS['--etcd-val-size']}",
                f"--key-space-size={DEFAULTS['--etcd-key-space-size']}",
            ]
        else:  # one key read over and over: the tool has no random single-key read
            key = DEFAULTS["--etcd-prefix"] + "0" * (DEFAULTS["--etcd-key-size"] - len(DEFAULTS["--etcd-prefix"]))
            command += ["range", key, f"--consistency={'s' if op == 'range/serializable' else 'l'}"]
        command.append(f"--total={total}")
        self.compact()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with child(f"go benchmark {op} conns={conns}", command, self.logs, self.environment) as process:
            code = process.wait(args.seconds * 10 + PROCESS_SLACK_SECONDS)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if code != 0:
            raise process.failure(f"exited with code {code}")
        raw = parse_go_report(process.stdout_path.read_text(errors="replace"))
        if raw is None:
            raise process.failure("printed no Summary")
        # the whole process, start-up included: the Go tool has no window of its own
        raw["cpu_seconds"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        raw["total_requested"] = total
        return _summary("go benchmark", op, conns, raw)


def parse_go_report(text: str) -> dict | None:
    """Requests/s, duration, errors (in all and by etcd's label) and the latency distribution from the Go tool's
    report (3.4–3.6 formats)."""
    rps = re.search(r"Requests/sec:\s*([\d.]+)", text)
    total = re.search(r"Total:\s*([\d.]+) secs", text)
    if rps is None or total is None:
        return None
    percentiles = {}
    for percent, value, unit in re.findall(r"^\s*([\d.]+)% in ([\d.]+) (secs|ms)", text, re.MULTILINE):
        percentiles[float(percent)] = float(value) * (1000.0 if unit == "secs" else 1.0)
    errors = 0
    by_label: dict[str, int] = {}
    if "Error distribution:" in text:
        section = text.split("Error distribution:", 1)[1]
        for count, message in re.findall(r"^\s*\[(\d+)\]\s*(.*)$", section, re.MULTILINE):
            # "rpc error: code = ResourceExhausted desc = etcdserver: too many requests": etcd's label is the desc
            label = message.split(" desc = ", 1)[-1].strip()
            by_label[label] = by_label.get(label, 0) + int(count)
            errors += int(count)
    seconds = float(total.group(1))
    return {
        "seconds": seconds,
        "requests": round(float(rps.group(1)) * seconds),
        "failures": errors,
        "errors_by_label": by_label,
        "latency_ms": {"p50": percentiles.get(50.0), "p99": percentiles.get(99.0), "all": percentiles},
    }


def histogram_record_cost_us(batches: int = 5, samples: int = 20_000) -> float:
    """What one HDR histogram record costs here: both measured clients pay it once per request. The fastest of a few
    batches, so that a busy moment of the machine does not count."""
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    record = histogram.record_value
    best = float("inf")
    for _ in range(batches):
        started = time.process_time()
        for index in range(samples):
            record(1000 + index % 5000)
        best = min(best, time.process_time() - started)
    return best / samples * 1e6


MEDIAN_FIELDS = ("requests_per_second", "cpu_us_per_request", "p50_ms", "p99_ms")


def median_run(measured: list[dict]) -> dict:
    """One client's runs of one op and conns as one row: the median of each figure; the runs kept under ``rounds``."""
    if len(measured) == 1:
        return measured[0]
    row = dict(measured[0])
    row.pop("raw", None)
    for field in MEDIAN_FIELDS:
        values = [run[field] for run in measured if run[field] is not None]
        row[field] = statistics.median(values) if values else None
    row["errors"] = sum(run["errors"] for run in measured)
    row["rounds"] = measured
    return row


def compare(runs: list[dict]) -> list[dict]:
    comparisons = []
    by_key = {(run["op"], run["conns"], run["client"]): run for run in runs}
    for (op, conns, client), run in by_key.items():
        if client != "locust":
            continue
        for reference, targets in (("bare aio", True), ("go benchmark", False), (BASELINE, False)):
            other = by_key.get((op, conns, reference))
            if other is None:
                continue
            rps_ratio = run["requests_per_second"] / other["requests_per_second"]
            cpu_ratio = run["cpu_us_per_request"] / other["cpu_us_per_request"]
            p50_ratio, p99_ratio = (_ratio(run[field], other[field]) for field in ("p50_ms", "p99_ms"))
            comparisons.append(
                {
                    "op": op,
                    "conns": conns,
                    "against": reference,
                    "rps_ratio": rps_ratio,
                    "cpu_ratio": cpu_ratio,
                    "rps_verdict": ("PASS" if rps_ratio >= RPS_TARGET else "MISS") if targets else None,
                    "cpu_verdict": ("PASS" if cpu_ratio <= CPU_TARGET else "MISS") if targets else None,
                    "p50_ratio": p50_ratio,
                    "p99_ratio": p99_ratio,
                }
            )
    return comparisons


def _ratio(value: float | None, other: float | None) -> float | None:
    return value / other if value is not None and other else None


def _latency_ratio(ratio: float | None, judged: bool) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}" + ((" PASS" if ratio <= LATENCY_TARGET else " MISS") if judged else "")


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def format_table(runs: list[dict], comparisons: list[dict], rate: float = 0.0) -> list[str]:
    header = ("op", "conns", "client", "req/s", "CPU µs/req", "P50 ms", "P99 ms", "errors", "TCP")
    rows = []
    for run in runs:
        rows.append(
            (
                run["op"],
                str(run["conns"]),
                run["client"],
                _number(run["requests_per_second"], 0),
                _number(run["cpu_us_per_request"], 1),
                _number(run["p50_ms"], 2),
                _number(run["p99_ms"], 2),
                str(run["errors"]),
                "-" if run["tcp_connections"] is None else str(run["tcp_connections"]),
            )
        )
        for comparison in comparisons:
            if (comparison["op"], comparison["conns"]) != (run["op"], run["conns"]):
                continue
            if run["client"] != comparison["against"]:
                continue
            verdicts = comparison["rps_verdict"] is not None
            rows.append(
                (
                    "",
                    "",
                    f"locust/{SHORT_NAMES[comparison['against']]}",
                    f"{comparison['rps_ratio']:.3f}" + (f" {comparison['rps_verdict']}" if verdicts else ""),
                    f"{comparison['cpu_ratio']:.3f}" + (f" {comparison['cpu_verdict']}" if verdicts else ""),
                    _latency_ratio(comparison["p50_ratio"], verdicts and rate > 0) if rate > 0 else "",
                    _latency_ratio(comparison["p99_ratio"], verdicts and rate > 0) if rate > 0 else "",
                    "",
                    "",
                )
            )
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]
    left = {0, 2}

    def line(row: tuple) -> str:
        cells = [cell.ljust(widths[i]) if i in left else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        return "  ".join(cells).rstrip()

    return [line(header), line(tuple("-" * width for width in widths)), *(line(row) for row in rows)]


def run(args: argparse.Namespace, logs: Path) -> dict:
    info = machine()
    record_cost = histogram_record_cost_us()
    runs: list[dict] = []
    with local_etcd() as cluster:
        endpoint = cluster.endpoints[0]
        runs_of = Runs(args, endpoint, Compactor(cluster), logs)
        if any(op != "put" for op in args.ops):
            runs_of.populate()
        for op in args.ops:
            for conns in args.conns:
                rounds: dict[str, list[dict]] = {}
                for _ in range(args.repeat):
                    locust_run = runs_of.locust(op, conns)
                    _progress(locust_run)
                    if args.baseline_repo is not None:
                        baseline_run = runs_of.locust(op, conns, args.baseline_repo.resolve(), BASELINE)
                        _progress(baseline_run)
                        rounds.setdefault(BASELINE, []).append(baseline_run)
                    bare_run = runs_of.bare(op, conns)
                    _progress(bare_run)
                    rounds.setdefault("locust", []).append(locust_run)
                    rounds.setdefault("bare aio", []).append(bare_run)
                    if args.go_benchmark:
                        go_run = runs_of.go(op, conns, bare_run["requests_per_second"])
                        _progress(go_run)
                        rounds.setdefault("go benchmark", []).append(go_run)
                runs += [median_run(measured) for measured in rounds.values()]
        port = client_port(cluster)
    return {
        "machine": info,
        "settings": {
            "seconds": args.seconds,
            "warmup": args.warmup,
            "ops": args.ops,
            "conns": args.conns,
            "users": args.users,
            "rate": args.rate,
            "engine": args.engine,
            "repeat": args.repeat,
            "key_size": DEFAULTS["--etcd-key-size"],
            "val_size": DEFAULTS["--etcd-val-size"],
            "key_space_size": DEFAULTS["--etcd-key-space-size"],
            "etcd_client_port": port,
            "go_benchmark": args.go_benchmark,
            "baseline_repo": str(args.baseline_repo) if args.baseline_repo is not None else None,
        },
        "targets": {"rps_ratio_min": RPS_TARGET, "cpu_ratio_max": CPU_TARGET, "latency_ratio_max": LATENCY_TARGET},
        "histogram_record_us": record_cost,
        "runs": runs,
        "comparisons": compare(runs),
    }


def _progress(run: dict) -> None:
    sys.stderr.write(
        f"{PROGRAM}: {run['op']} conns={run['conns']} {run['client']}: {run['requests_per_second']:,.0f} req/s, "
        f"{_number(run['cpu_us_per_request'], 1)} µs CPU/req\n"
    )
    sys.stderr.flush()


def report(result: dict) -> str:
    settings = result["settings"]
    lines = [
        "locust-etcd load-generator efficiency: our Locust users against a bare grpc.aio + uvloop loop",
        *machine_lines(result["machine"]),
        f"load: {settings['users']} users, {settings['key_size']} B keys, {settings['val_size']} B values, "
        f"key space {settings['key_space_size']}; {settings['warmup']:g}s warm-up, {settings['seconds']:g}s window "
        f"per run; one Locust process, --etcd-engine {settings.get('engine', 'loop')}"
        + (f"; {settings['rate']:,.0f} requests/s in all, on a schedule" if settings.get("rate") else "; closed loop")
        + (
            f"; each figure the median of {settings['repeat']} runs, the clients alternating"
            if settings["repeat"] > 1
            else ""
        ),
        "",
        *format_table(result["runs"], result["comparisons"], settings.get("rate", 0.0)),
        "",
        f"targets: locust/bare requests/s >= {RPS_TARGET}, CPU per request <= {CPU_TARGET} (same op, same conns)"
        + (f", P50 and P99 <= {LATENCY_TARGET} (the same rate)" if settings.get("rate") else ""),
        "CPU: user + system time of the whole client process (every thread) over the window, per request completed in "
        "it; TCP: its connections to etcd",
        f"both clients record each response in an HDR histogram: ~{result['histogram_record_us']:.1f} µs CPU per "
        "request here, inside both CPU figures",
    ]
    if settings["go_benchmark"]:
        lines.append("go benchmark: CPU is the whole process (start-up included); range reads one key over and over")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_and_report(PROGRAM, parse_args(argv), run, report)


if __name__ == "__main__":
    sys.exit(main())
