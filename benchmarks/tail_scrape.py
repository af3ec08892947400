"""What the tail's per-second scrape costs: put requests a second with ``--etcd-tail 0`` (off) and with the tail on
(every member's /metrics read each second, the client's own signals watched), in alternating runs against one local
member, with the client's CPU per put (its PREFIX_client_cpu.csv) and the member's per thousand puts beside them (on a
busy machine the rate moves more between runs than the tail moves it: the CPU per put says more); then the client's
CPU for one member's scrape (fetch and parse), measured in process.

    .venv/bin/python -m benchmarks.tail_scrape --pairs 4 --seconds 10
"""

from __future__ import annotations

import locust  # noqa: F401  (gevent's monkey patching must come first)

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import REPO, Compactor, local_etcd, locust_etcd_flags
from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.features.tail.member_signals import read_page
from etcd_users.features.tail.scrape import PageFetcher


def one_run(endpoint: str, metrics_url: str, tail: int, seconds: int, users: int, out: Path, rate: float) -> dict:
    prefix = out / f"tail{tail}-{time.monotonic_ns()}"
    etcd_cpu = metric_sum(fetch_metrics(metrics_url), "process_cpu_seconds_total")
    command = [sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary"]
    command += ["-u", str(users), "-r", str(users), "-t", f"{seconds}s", "--csv", str(prefix)]
    command += ["--etcd-endpoints", endpoint, "--etcd-tail", str(tail), *locust_etcd_flags(), "EtcdPutUser"]
    command += ["--etcd-user-rate", str(rate)] if rate else []
    subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=seconds + 120, check=False)
    etcd_cpu = metric_sum(fetch_metrics(metrics_url), "process_cpu_seconds_total") - etcd_cpu
    summary = json.loads(Path(f"{prefix}_summary.json").read_text())
    aggregated = next(row for row in summary["requests"] if row["name"] == "Aggregated")
    with open(f"{prefix}_client_cpu.csv") as rows:
        client_cpu_s = sum(float(row["CpuPct"]) / 100.0 for row in csv.DictReader(rows))
    return {"qps": aggregated["qps"], "puts": aggregated["count"], "etcd_cpu_s": etcd_cpu, "client_cpu_s": client_cpu_s}


def scrape_cpu_ms(metrics_url: str, scrapes: int = 50) -> float:
    """The client's CPU for one member's scrape: the page fetched and its lines read."""
    fetcher = PageFetcher(5.0)
    started = time.thread_time()
    for _ in range(scrapes):
        read_page(fetcher.fetch(metrics_url), time.time())
    return (time.thread_time() - started) * 1000.0 / scrapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4, help="runs of each kind, alternating")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument(
        "--user-rate",
        type=float,
        default=0.0,
        help="requests a second of each user (--etcd-user-rate): at a fixed rate the CPU per put compares alone",
    )
    arguments = parser.parse_args()
    runs: dict[int, list[dict]] = {0: [], 10: []}
    with local_etcd() as cluster, tempfile.TemporaryDirectory(prefix="tail-scrape-") as out:
        compact = Compactor(cluster)
        endpoint, metrics_url = cluster.endpoints[0], cluster.metrics_urls[0]
        for pair in range(arguments.pairs):
            for tail in (0, 10) if pair % 2 == 0 else (10, 0):  # ABBA: a drift of the machine favours neither
                compact()
                runs[tail].append(
                    one_run(
                        endpoint, metrics_url, tail, arguments.seconds, arguments.users, Path(out), arguments.user_rate
                    )
                )
        page_ms = scrape_cpu_ms(metrics_url)
        page_bytes = len(PageFetcher(5.0).fetch(metrics_url))
    off, on = (statistics.median(run["qps"] for run in runs[tail]) for tail in (0, 10))
    # each pair ran back to back: their ratio cancels most of a shared machine's drift between pairs
    paired_qps = [100.0 * (b["qps"] - a["qps"]) / a["qps"] for a, b in zip(runs[0], runs[10], strict=True)]
    per_put = {tail: [run["client_cpu_s"] / run["puts"] * 1e6 for run in kind] for tail, kind in runs.items()}
    paired_cpu = [100.0 * (b - a) / a for a, b in zip(per_put[0], per_put[10], strict=True)]
    client_us = {tail: round(statistics.median(values), 1) for tail, values in per_put.items()}
    etcd_per_k = {
        tail: round(1000.0 * sum(run["etcd_cpu_s"] for run in kind) / sum(run["puts"] for run in kind) * 1000.0, 3)
        for tail, kind in runs.items()
    }
    print(
        json.dumps(
            {
                "puts/s, tail off (median)": round(off, 1),
                "puts/s, tail on (median)": round(on, 1),
                "puts/s change % per pair": [round(value, 1) for value in paired_qps],
                "puts/s change %, median of pairs": round(statistics.median(paired_qps), 2),
                "runs": {"off": [run["qps"] for run in runs[0]], "on": [run["qps"] for run in runs[10]]},
                "client CPU µs per put (median)": {"off": client_us[0], "on": client_us[10]},
                "client CPU per put change %, median of pairs": round(statistics.median(paired_cpu), 2),
                "etcd CPU ms per 1,000 puts": {"off": etcd_per_k[0], "on": etcd_per_k[10]},
                "client CPU ms per member scrape": round(page_ms, 3),
                "page bytes": page_bytes,
                "client CPU % of a core for 5 members at 1 scrape/s": round(page_ms * 5 / 10.0, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
