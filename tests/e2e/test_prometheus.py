"""The live exporter (``--etcd-prometheus-port``) as Prometheus sees it: a real ``prometheus`` server scrapes a real
headless run (and the local etcd member's own /metrics) every second, and what its HTTP API answers is held against
the run's files: Locust's ``_stats.csv``, the exact ``_latency_history.csv`` and ``_latency.hlog``. Every PromQL
expression of the Grafana dashboard must return data. The bucket maths and the window are
``tests/unit/test_exporter.py``.
"""

import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from checks import assert_no_traceback, read_hlog, refusal_line
from prometheus_client.parser import text_string_to_metric_families
from support import DEPLOY, HEADLESS, free_port, headless_args, kill_group, read_csv_rows, run_locust, start_locust

from etcd_users import hdr
from etcd_users.features.exporter.exporter import BUCKETS_S, MASTER_LAG_S, QUANTILES, WEB_UI_ROUTE

pytestmark = pytest.mark.e2e

DASHBOARD = DEPLOY / "grafana" / "locust-etcd.json"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
# Grafana's $__rate_interval is at least 4 scrape intervals; the tests' Prometheus scrapes every second
RATE_INTERVAL = "5s"
WINDOW_S = 5  # --etcd-prometheus-window of the scraped run
# A step-plus-spike shape of about 18 s: 100, 200, 300 QPS, a 400 QPS spike (10 requests/s per user)
SHAPE = (
    *("--etcd-user-rate", "10", "--shape-baseline-qps", "100", "--shape-baseline-time", "6"),
    *("--shape-step-qps", "100", "--shape-step-time", "5", "--shape-max-qps", "300"),
    *("--shape-spike-qps", "400", "--shape-spike-time", "2"),
)
SLA = "put:p99<2s,errors<5%"
# the direct opener: loopback servers must never be reached through an http_proxy from the environment
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url: str, timeout: float = 5.0) -> str:
    with _OPENER.open(url, timeout=timeout) as response:
        return response.read().decode()


class Prometheus:
    """A running ``prometheus`` and its HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        answer = json.loads(get(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def samples(self, selector: str) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
        """Every raw sample of the last 10 minutes of each series of ``selector``, by its labels (without job and
        instance): the scrapes' own timestamps, stale markers left out."""
        series = {}
        for result in self.query(f"{selector}[10m]"):
            labels = tuple(sorted((k, v) for k, v in result["metric"].items() if k not in ("job", "instance")))
            series[labels] = [(float(t), float(v)) for t, v in result["values"]]
        return series

    def targets(self) -> list[dict]:
        return json.loads(get(f"{self.url}/api/v1/targets"))["data"]["activeTargets"]


@contextmanager
def prometheus_server(workdir: Path, jobs: dict[str, list[str]]) -> Iterator[Prometheus]:
    """deploy/prometheus/prometheus.yml with these targets per job, scraping every second, on a free loopback port."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(
            "prometheus is not on PATH: install the Prometheus server (Debian: apt-get install -y prometheus, as "
            ".ci/run does)",
            pytrace=False,
        )
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"]["scrape_interval"] = "1s"
    names = {job["job_name"] for job in config["scrape_configs"]}
    assert set(jobs) <= names, names
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": jobs.get(job["job_name"], [])}]
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    with open(workdir / "prometheus.log", "w") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        prometheus = Prometheus(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while True:
            try:
                get(f"{prometheus.url}/-/ready", timeout=1)
                break
            except OSError:
                assert process.poll() is None, (workdir / "prometheus.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "prometheus not ready within 30 s"
                time.sleep(0.2)
        yield prometheus
    finally:
        kill_group(process)


def dashboard_expressions() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    every = [*panels, *(inner for panel in panels for inner in panel.get("panels", []))]
    return [target["expr"] for panel in every for target in panel.get("targets", [])]


def service_history(prefix: Path) -> dict[int, dict[str, str]]:
    """``_latency_history.csv``'s rows of put's service time, by second."""
    rows = read_csv_rows(f"{prefix}_latency_history.csv")
    return {int(row["Timestamp"]): row for row in rows if row["Name"] == "put" and row["Series"] == "service"}


def window_percentile_us(seconds: dict[int, object], end: int, percentile: float) -> int | None:
    """The percentile of the hlog's put histograms of the seconds ``[end - WINDOW_S, end)`` merged."""
    merged = hdr.merge(histogram for second, histogram in seconds.items() if end - WINDOW_S <= second < end)
    return None if merged is None else hdr.percentiles_us(merged, (percentile,))[0]


@pytest.mark.slow
def test_prometheus_scrapes_a_shaped_run_and_agrees_with_its_files(etcd1, tmp_out, tmp_path):
    port = free_port()
    member = urllib.parse.urlsplit(etcd1.metrics_urls[0]).netloc
    prefix = tmp_out / "run"
    args = (
        *("-f", "locustfile.py,shapes/step_spike.py", "--headless", "--only-summary", "--csv", str(prefix)),
        *("--etcd-endpoints", etcd1.endpoints[0], "--etcd-cleanup", "--etcd-sla", SLA, *SHAPE),
        *("--etcd-prometheus-port", str(port), "--etcd-prometheus-window", str(WINDOW_S), "--web-host", "127.0.0.1"),
        "EtcdPutUser",
    )
    with prometheus_server(tmp_path / "prometheus", {"locust-etcd": [f"127.0.0.1:{port}"], "etcd": [member]}) as prom:
        result = run_locust(*args, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        assert_no_traceback(result.stderr)
        assert f"Prometheus metrics at http://127.0.0.1:{port}/metrics" in result.stderr

        # -- the request count at the last scrape, against Locust's _stats.csv --
        [(_, requests)] = prom.samples("locust_etcd_requests_total").items()
        last_scrape, scraped = requests[-1]
        [total] = [int(row["Request Count"]) for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] == "put"]
        history = service_history(prefix)
        # what the users did after the last scrape: the requests of the seconds from the one it fell in on
        after_last_scrape = sum(int(row["Requests"]) for second, row in history.items() if second >= int(last_scrape))
        assert 0 <= total - scraped <= after_last_scrape, (total, scraped, after_last_scrape)
        [summary] = [row for row in read_csv_rows(f"{prefix}_latency.csv") if row["Name"] == "Aggregated"]
        first_request, last_request = float(summary["First"]), float(summary["Last"])
        # scraped while the run went on, to its second half (a busy machine may delay or skip a scrape, not for
        # half a run), a count grown with the run and not stuck at its start; exact, by the check above
        assert last_scrape > (first_request + last_request) / 2, (first_request, last_scrape, last_request)
        assert scraped > 0, requests

        # -- the exact quantiles of the window, against the history's seconds and the hlog's histograms --
        hlog = {
            int(start): histogram
            for start, tag, histogram in read_hlog(f"{prefix}_latency.hlog")
            if tag == "etcd:put:service"
        }
        quantiles = prom.samples('locust_etcd_latency_seconds{name="put"}')
        assert {dict(labels)["quantile"] for labels in quantiles} == {str(quantile) for quantile in QUANTILES}
        checked = 0
        for labels, series in quantiles.items():
            quantile = float(dict(labels)["quantile"])
            column = {0.5: "P50", 0.99: "P99", 0.999: "P99.9"}.get(quantile)
            for at, value in series:
                micros = round(value * 1e6)
                # The window is the WINDOW_S complete seconds before the one the scrape is answered in, a second
                # complete once every result of it is applied (the loop engine's come in batches). The scrape's
                # timestamp is taken just before (Prometheus may align it by a few ms): the window ends in the second
                # of the timestamp, the one before it (its last results not yet applied) or, on a busy machine, one
                # of the two after it. Exactly one of those.
                ends = range(int(at) - 1, int(at) + 3)
                candidates = {window_percentile_us(hlog, end, quantile * 100) for end in ends}
                assert micros in candidates, (at, quantile, micros, candidates)
                if column is not None:
                    # A quantile of merged seconds lies between the smallest and largest of theirs (over the same
                    # candidate windows; 1 µs for the CSV's 3 decimals of ms).
                    values = [
                        float(row[column]) * 1000
                        for second, row in history.items()
                        if ends[0] - WINDOW_S <= second < ends[-1] and row[column]
                    ]
                    assert min(values) - 1 <= micros <= max(values) + 1, (at, column, micros, values)
                checked += 1
        # every quantile at each scrape of the run; how many scrapes fit in it is the machine's business (a busy one
        # may skip some), more than one is a bound only a stuck exporter fails
        assert checked > 2 * len(QUANTILES), checked

        # -- the shape, the gates and the run, while it ran --
        planned = [value for series in prom.samples("locust_etcd_shape_planned_qps").values() for _, value in series]
        assert set(planned) <= {100.0, 200.0, 300.0, 400.0} and {100.0, 300.0} <= set(planned), planned
        levels = {dict(labels)["level"] for labels in prom.samples("locust_etcd_shape_level_info")}
        shape = json.loads(Path(f"{prefix}_shape.json").read_text())
        assert levels and levels <= {level["name"] for level in shape["levels"]}, levels
        gates = prom.samples("locust_etcd_sla_gate_passing")
        assert {dict(labels)["gate"] for labels in gates} == {"put p99 < 2s", "Aggregated errors < 5%"}
        assert all(value == 1.0 for series in gates.values() for _, value in series)
        [info] = prom.samples("locust_etcd_run_info")
        assert {"class": "EtcdPutUser", "target": "round-robin", "endpoints_count": "1"}.items() <= dict(info).items()

        # -- every expression of the Grafana dashboard has data at a moment of the run --
        planned_times = [at for series in prom.samples("locust_etcd_shape_planned_qps").values() for at, _ in series]
        middle = sorted(planned_times)[len(planned_times) // 2]
        empty = []
        for expr in dashboard_expressions():
            answer = prom.query(expr.replace("$__rate_interval", RATE_INTERVAL), at=middle)
            if not answer or all(math.isnan(float(row["value"][1])) for row in answer):
                empty.append(expr)
        assert not empty, empty
        [achieved] = prom.query(f"sum(rate(locust_etcd_requests_total[{RATE_INTERVAL}]))", at=middle)
        # the achieved rate is the run's own: between its slowest and fastest second around the window (a rate is an
        # average of the seconds it covers; Prometheus' extrapolation to the window's edges may take up to a fifth
        # off), whatever rate this machine achieved against the plan
        window = [
            int(row["Requests"])
            for second, row in history.items()
            if int(middle) - int(RATE_INTERVAL[:-1]) - 2 <= second <= int(middle) + 1
        ]
        assert 0.75 * min(window) <= float(achieved["value"][1]) <= 1.05 * max(window), (achieved, window)


@pytest.mark.slow
def test_a_master_with_two_workers_is_one_target_that_counts_every_request(etcd1, tmp_out, tmp_path):
    """The master serves the merged figures, also at /etcd/metrics of its web UI; the workers serve nothing."""
    port, web_port, master_port = free_port(), free_port(), free_port()
    prefix = tmp_out / "run"
    master = (
        *("-f", "locustfile.py", "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(master_port)),
        *("--expect-workers", "2", "--autostart", "--autoquit", "6", "-t", "8s", "-u", "8", "-r", "8"),
        *("--web-host", "127.0.0.1", "--web-port", str(web_port), "--csv", str(prefix)),
        *("--etcd-endpoints", etcd1.endpoints[0], "--etcd-cleanup", "--etcd-prometheus-port", str(port)),
        "EtcdPutUser",
    )
    worker = ("-f", "locustfile.py", "--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port))
    with (
        prometheus_server(tmp_path / "prometheus", {"locust-etcd": [f"127.0.0.1:{port}"]}) as prom,
        start_locust(*master, log_dir=tmp_out) as process,
        start_locust(*worker, log_dir=tmp_out) as first,
        start_locust(*worker, log_dir=tmp_out) as second,
    ):
        web_page = None
        deadline = time.monotonic() + 40
        while web_page is None and time.monotonic() < deadline and process.poll() is None:
            try:
                text = get(f"http://127.0.0.1:{web_port}{WEB_UI_ROUTE}")
                if re.search(r'^locust_etcd_requests_total\{name="put"\} [1-9]', text, re.M):
                    web_page = text
            except OSError:
                pass
            time.sleep(0.5)
        finished = process.finish(timeout=60)
        for each in (first, second):
            each.finish(timeout=30)
        assert finished.returncode == 0, finished.stderr[-3000:]
        assert "2 workers connected" in finished.stderr
        assert web_page is not None, "the web UI never served the metrics with requests in them"
        families = {family.name: family for family in text_string_to_metric_families(web_page)}
        assert {"locust_etcd_requests", "locust_etcd_request_duration_seconds", "locust_etcd_users"} <= set(families)

        targets = [target for target in prom.targets() if target["labels"]["job"] == "locust-etcd"]
        assert [target["scrapeUrl"] for target in targets] == [f"http://127.0.0.1:{port}/metrics"]
        [(_, requests)] = prom.samples("locust_etcd_requests_total").items()
        [total] = [int(row["Request Count"]) for row in read_csv_rows(f"{prefix}_stats.csv") if row["Name"] == "put"]
        # after the test stopped, the master kept serving for --autoquit: its last scrapes hold both workers' all
        assert requests[-1][1] == total, (requests[-3:], total)
        users = [value for series in prom.samples("locust_etcd_users").values() for _, value in series]
        assert max(users) == 8
        # the master's window (10 s) ends MASTER_LAG_S back, where both workers' reports are in: each quantile
        # lies between the smallest and largest of the merged seconds' own (two seconds of slack for the timing)
        history = service_history(prefix)
        quantiles = prom.samples('locust_etcd_latency_seconds{name="put"}')
        checked = 0
        for labels, series in quantiles.items():
            column = {"0.5": "P50", "0.99": "P99"}.get(dict(labels)["quantile"])
            for at, value in series if column else ():
                first, end = int(at) - MASTER_LAG_S - 10 - 1, int(at) - MASTER_LAG_S + 2
                values = [
                    float(row[column]) for second, row in history.items() if first <= second < end and row[column]
                ]
                assert min(values) - 0.001 <= value * 1000 <= max(values) + 0.001, (at, column, value, values)
                checked += 1
        assert checked >= 2  # each of the two quantiles at a scrape at least: how many fit is the machine's business


def test_metrics_page_parses_as_prometheus_text(etcd1, tmp_out):
    """A short run's /metrics, fetched directly and read with prometheus_client's own parser."""
    port = free_port()
    args = headless_args(etcd1, tmp_out / "run", "--etcd-cleanup", "EtcdPutUser", users=2, seconds=4)
    args += ["--etcd-prometheus-port", str(port), "--web-host", "127.0.0.1", "--etcd-sla", "put:p99<5s"]
    with start_locust(*args, log_dir=tmp_out) as process:
        page = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                text = get(f"http://127.0.0.1:{port}/metrics")
                if "locust_etcd_latency_seconds{" in text:
                    page = text
                    break
            except OSError:
                pass
            time.sleep(0.3)
        finished = process.finish(timeout=60)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert page is not None, finished.stderr[-3000:]
    families = {family.name: family for family in text_string_to_metric_families(page)}
    assert families["locust_etcd_requests"].type == "counter"
    assert families["locust_etcd_failures"].type == "counter"
    assert families["locust_etcd_request_duration_seconds"].type == "histogram"
    assert families["locust_etcd_latency_seconds"].type == "gauge"
    assert families["locust_etcd_sla_gate_passing"].samples[0].labels == {"gate": "put p99 < 5s"}
    buckets = [s for s in families["locust_etcd_request_duration_seconds"].samples if s.name.endswith("_bucket")]
    assert [float(s.labels["le"]) for s in buckets] == [*BUCKETS_S, math.inf]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] > 0
    [count] = [s.value for s in families["locust_etcd_request_duration_seconds"].samples if s.name.endswith("_count")]
    assert count == counts[-1]
    quantiles = {float(s.labels["quantile"]): s.value for s in families["locust_etcd_latency_seconds"].samples}
    assert list(quantiles) == list(QUANTILES) and list(quantiles.values()) == sorted(quantiles.values())
    assert 0 < quantiles[0.5] < 60  # seconds: a bound only a figure in the wrong unit fails, on any machine
    [users] = families["locust_etcd_users"].samples
    assert users.value == 2
    [info] = families["locust_etcd_run_info"].samples
    assert info.labels["class"] == "EtcdPutUser" and info.labels["endpoints_count"] == "1"


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("--etcd-prometheus-port", "70000"), ("--etcd-prometheus-port: 70000 is not a TCP port",)),
        (("--etcd-prometheus-port", "nine"), ("--etcd-prometheus-port: 'nine' is not a whole number",)),
        (("--etcd-prometheus-window", "0"), ("--etcd-prometheus-window: 0 seconds is outside 1 to 3600",)),
        (("--etcd-prometheus-window", "1.5"), ("--etcd-prometheus-window: '1.5' is not a whole number",)),
    ],
)
def test_bad_values_of_the_exporters_options_are_one_line(etcd1, tmp_out, args, fragments):
    result = run_locust(*HEADLESS, "-t", "1s", "--etcd-endpoints", etcd1.endpoints[0], *args, "EtcdPutUser")
    line = refusal_line(result)
    for fragment in fragments:
        assert fragment in line, line


def test_a_taken_port_or_the_web_uis_own_is_refused_in_one_line(etcd1, tmp_out):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_locust(
            *HEADLESS, "-t", "1s", "--etcd-endpoints", etcd1.endpoints[0], "--web-host", "127.0.0.1",
            "--etcd-prometheus-port", str(port), "EtcdPutUser",
        )  # fmt: skip
    assert f"--etcd-prometheus-port: cannot listen on 127.0.0.1:{port}" in refusal_line(result)
    web_port = free_port()
    result = run_locust(
        "-f", "locustfile.py", "--web-host", "127.0.0.1", "--web-port", str(web_port), "--etcd-endpoints",
        etcd1.endpoints[0], "--etcd-prometheus-port", str(web_port), "EtcdPutUser",
    )  # fmt: skip
    assert f"--etcd-prometheus-port: {web_port} is also --web-port" in refusal_line(result)
