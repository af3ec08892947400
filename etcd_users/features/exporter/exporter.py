"""The live Prometheus exporter (``--etcd-prometheus-port``): the run's figures as the master merges them.

The master (or the single process of a local run; never a worker) serves ``/metrics`` on its own port, and on the
web UI's port at ``/etcd/metrics`` when the web UI runs. Every figure covers all workers: it is read from what the
master already merges, never measured on the request path.

- ``locust_etcd_requests_total{name}`` and ``locust_etcd_failures_total{name,error}``: Locust's own counts (failures
  by etcd's label, as in ``PREFIX_failures.csv``); they start again at each test start, which ``rate()`` takes as a
  counter reset.
- ``locust_etcd_request_duration_seconds{name}``: a histogram of the successful requests since the test started,
  counted from the run's exact HDR histograms into ``BUCKETS_S`` (20 per decade from 50 µs to 10 s), so that
  ``histogram_quantile`` over ``rate(..._bucket[…])`` works across scrapes and instances.
- ``locust_etcd_latency_seconds{name,quantile}``: P50, P90, P95, P99 and P99.9, exact (HdrHistogram's 3 digits, as
  in ``PREFIX_latency_history.csv``) from the per-second histograms merged over the last ``--etcd-prometheus-window``
  complete seconds; on a master the window ends ``MASTER_LAG_S`` back, where every worker's report is in.
- ``locust_etcd_users``, ``locust_etcd_shape_planned_qps``, ``locust_etcd_shape_level_info{level}`` (a
  ``judged_shape.JudgedShape``'s current level while a test runs), ``locust_etcd_sla_gate_passing{gate}`` (each
  ``--etcd-sla`` gate judged on the same window, 1 or 0, absent while the window holds no request) and
  ``locust_etcd_run_info{class,target,endpoints_count,version}``.
- the watchers' figures since the test started, while any watcher ran (``etcd_users.run_state.watch_tally``; on a
  master, its workers' as they last reported them): ``locust_etcd_watchers`` (watchers etcd confirmed),
  ``locust_etcd_watch_events_total``, ``locust_etcd_watch_progress_notifications_total``,
  ``locust_etcd_watchers_cancelled_total{reason}`` (etcd's reason) and ``locust_etcd_watch_behind_revisions{quantile}``
  (P50, P99 and max (1) of the revisions each response with events was behind the newest known).

Nothing is computed between scrapes except the window's bookkeeping: each merged second of each request name is kept
as its non-zero HDR counts (``RecentSeconds``, a listener of ``LatencyStore.merged_listeners``) for the window and
dropped after, so memory stays bounded however long the run. A scrape runs in a greenlet of the process, like Locust's
web UI, and costs about 1.5 ms per request name (most of it prometheus_client writing the 110 lines of each name's
histogram).

``ExporterRun`` is the feature's hooks (``etcd_users.core.features``): the exporter starts at init, once the run's
settings are resolved, and stops at quit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from importlib import metadata
from typing import Any

import numpy as np
from flask import make_response, request
from gevent.pywsgi import WSGIServer
from hdrh.histogram import HdrHistogram
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from etcd_users import hdr
from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.files import SERVICE
from etcd_users.judging import sla
from etcd_users.judging.judged import judged_shape
from etcd_users.latency.recent import RecentSeconds, Window
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.run_state.watch_tally import WatchTally, percentile
from etcd_users.run_state.watchers import WatchTallies
from etcd_users.settings import EtcdSettings

logger = logging.getLogger("etcd_users.reporting.exporter")  # the name users' log filters know

PREFIX = "locust_etcd_"
WEB_UI_ROUTE = "/etcd/metrics"
QUANTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
# 10^(k/20) s rounded to 3 digits, k = -86 … 20: 50 µs, 56.2 µs, 63.1 µs, 70.8 µs, 79.4 µs, 89.1 µs, 100 µs, …,
# 8.91 s, 10 s; each bound 12.2 % above the one before (histogram_quantile interpolates within one such step).
BUCKETS_S = tuple(5e-5 if k == -86 else float(f"{10 ** (k / 20):.3g}") for k in range(-86, 21))
# Workers report every 3 s (locust.runners.WORKER_REPORT_INTERVAL): a master's window ends where all reports are in.
MASTER_LAG_S = 4
RUNNING_STATES = ("spawning", "running")  # locust.runners' STATE_SPAWNING and STATE_RUNNING


class ExporterError(RuntimeError):
    """The exporter cannot serve (its port is taken), told in one line."""


def version() -> str:
    try:
        return metadata.version("locust-etcd")
    except metadata.PackageNotFoundError:
        return "unknown"


# -- the buckets of the cumulative histogram --


class _Layout:
    """Where each bound of BUCKETS_S falls in an HDR histogram's counts, and each count's middle value (µs)."""

    def __init__(self) -> None:
        template = hdr.new_histogram()
        # values are whole µs: "≤ bound" is "≤ floor(bound)", whose HDR count holds it (3 significant digits); the
        # slack keeps 251 µs from flooring to 250 (2.51e-4 * 1e6 is 250.99…)
        micros = [int(bound * 1e6 + 1e-6) for bound in BUCKETS_S]
        self.bound_indexes = np.array([template.get_counts_array_index(value) for value in micros])
        lows = np.array([template.get_value_from_index(index) for index in range(template.counts_len)], dtype=float)
        highs = np.array([template.get_highest_equivalent_value(int(low)) for low in lows], dtype=float)
        self.middles_us = lows + np.floor((highs - lows + 1) / 2)  # hdr.mean_us's convention


_LAYOUT: _Layout | None = None


def bucket_counts(histograms: Iterable[HdrHistogram]) -> tuple[list[int], int, float]:
    """Cumulative counts at each bound of BUCKETS_S, the total, and the sum in seconds, over ``histograms``."""
    global _LAYOUT
    if _LAYOUT is None:
        _LAYOUT = _Layout()
    # float64 holds every count exactly (below 2**53) and takes numpy's fast paths, which uint64 arithmetic misses
    counts = np.zeros(len(_LAYOUT.middles_us), dtype=np.float64)
    for histogram in histograms:
        np.add(counts, np.ctypeslib.as_array(histogram.counts), out=counts, casting="unsafe")
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1]) if len(cumulative) else 0
    bounded = [int(value) for value in cumulative[_LAYOUT.bound_indexes]]
    return bounded, total, float((counts * _LAYOUT.middles_us).sum()) / 1e6  # no BLAS call: no threads of its own


# -- the collector --


class RunCollector(Collector):
    """Every ``locust_etcd_*`` metric, computed when scraped from the master's merged figures."""

    def __init__(
        self,
        environment,
        recorder: LatencyRecorder,
        run_settings: Callable[[], EtcdSettings | None],
        recent: RecentSeconds,
        lag_s: int,
    ) -> None:
        self.environment = environment
        self.recorder = recorder
        self.run_settings = run_settings
        self.recent = recent
        self.lag_s = lag_s
        self.version = version()

    def collect(self) -> Iterator[Metric]:
        until = self.recorder.collect()  # a single process's own latest seconds, folded in
        yield from self._counts()
        yield self._durations()
        settings = self.run_settings()
        length = settings.exporter.window if settings is not None else 10
        self.recent.keep_s = max(self.recent.keep_s, length + self.lag_s + 2)  # a later run's longer window (web UI)
        # a second is in the window once complete: past, and every result of it applied (the loop engine's come in
        # batches, up to a tenth of a second late)
        end = int(time.time()) - self.lag_s
        if until is not None:
            end = min(end, int(until))
        window = self.recent.window(end, length)
        yield self._quantiles(window)
        yield from self._runner()
        yield self._gates(window)
        yield self._info(settings)
        yield from self._watchers(run_context(self.environment).get(WatchTallies).live())

    def _counts(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            PREFIX + "requests", "Requests since the test started, failures included.", labels=["name"]
        )
        per_name: dict[str, int] = {}
        stats = self.environment.stats
        for (name, _method), entry in list(stats.entries.items()):
            per_name[name] = per_name.get(name, 0) + entry.num_requests
        for name, count in sorted(per_name.items()):
            requests.add_metric([name], count)
        yield requests
        failures = CounterMetricFamily(
            PREFIX + "failures",
            "Failed requests since the test started, by etcd's error label.",
            labels=["name", "error"],
        )
        per_label: dict[tuple[str, str], int] = {}
        for error in list(stats.errors.values()):
            key = (error.name, str(error.error))
            per_label[key] = per_label.get(key, 0) + error.occurrences
        for (name, label), count in sorted(per_label.items()):
            failures.add_metric([name, label], count)
        yield failures

    def _durations(self) -> Metric:
        family = HistogramMetricFamily(
            PREFIX + "request_duration",
            "Response times of the successful requests since the test started, from the exact HDR histograms.",
            labels=["name"],
            unit="seconds",
        )
        by_name: dict[str, list[HdrHistogram]] = {}
        for (_type, name, _series), histogram in self.recorder.store.histograms(SERVICE).items():
            by_name.setdefault(name, []).append(histogram)
        for name, histograms in sorted(by_name.items()):
            cumulative, total, total_s = bucket_counts(histograms)
            buckets = [(floatToGoString(bound), count) for bound, count in zip(BUCKETS_S, cumulative, strict=True)]
            family.add_metric([name], [*buckets, ("+Inf", total)], total_s)
        return family

    def _quantiles(self, window: Window) -> Metric:
        family = GaugeMetricFamily(
            PREFIX + "latency",
            "Exact response-time quantiles of the successful requests of the last --etcd-prometheus-window seconds.",
            labels=["name", "quantile"],
            unit="seconds",
        )
        for name, histogram in sorted(window.histograms.items()):
            values = hdr.percentiles_us(histogram, [quantile * 100 for quantile in QUANTILES])
            for quantile, micros in zip(QUANTILES, values, strict=True):
                family.add_metric([name, floatToGoString(quantile)], micros / 1e6)
        return family

    def _runner(self) -> Iterator[Metric]:
        runner = self.environment.runner
        users = GaugeMetricFamily(PREFIX + "users", "Users running (on a master: as its workers report them).")
        users.add_metric([], getattr(runner, "user_count", 0) or 0)
        yield users
        planned = GaugeMetricFamily(PREFIX + "shape_planned_qps", "QPS the load shape's current level targets.")
        level_info = GaugeMetricFamily(
            PREFIX + "shape_level_info", "The load shape's current level (value 1).", labels=["level"]
        )
        shape = judged_shape(self.environment)
        level = None if shape is None else shape.current_level
        if level is not None and getattr(runner, "state", None) in RUNNING_STATES:
            level_info.add_metric([str(level.name)], 1)
            if level.qps is not None:
                planned.add_metric([], float(level.qps))
        yield planned
        yield level_info

    def _gates(self, window: Window) -> Metric:
        family = GaugeMetricFamily(
            PREFIX + "sla_gate_passing",
            "Each --etcd-sla gate judged on the last --etcd-prometheus-window seconds: 1 passing, 0 failing.",
            labels=["gate"],
        )
        settings = self.run_settings()
        gates = settings.gates.sla if settings is not None else ()
        requests = {
            name: window.successes.get(name, 0) + window.failures.get(name, 0)
            for name in window.successes.keys() | window.failures.keys()
        }
        if not gates or not any(requests.values()):
            return family
        measured = sla.Measurements(window.histograms, requests, window.failures, float(window.seconds))
        for result in sla.evaluate_all(gates, measured):
            family.add_metric([f"{result.gate.label} {result.gate.limit}"], 1 if result.passed else 0)
        return family

    def _watchers(self, tally: WatchTally) -> Iterator[Metric]:
        if not (tally.watchers or tally.events or tally.cancelled):
            return  # no watcher ran: no series
        watchers = GaugeMetricFamily(PREFIX + "watchers", "Watchers etcd confirmed since the test started.")
        watchers.add_metric([], tally.watchers)
        yield watchers
        events = CounterMetricFamily(PREFIX + "watch_events", "Watch events received since the test started.")
        events.add_metric([], tally.events)
        yield events
        progress = CounterMetricFamily(
            PREFIX + "watch_progress_notifications", "Watch responses without events since the test started."
        )
        progress.add_metric([], tally.progress)
        yield progress
        cancelled = CounterMetricFamily(
            PREFIX + "watchers_cancelled", "Watchers etcd cancelled, by etcd's reason.", labels=["reason"]
        )
        for reason, count in sorted(tally.cancelled.items()):
            cancelled.add_metric([reason], count)
        yield cancelled
        behind = GaugeMetricFamily(
            PREFIX + "watch_behind_revisions",
            "Revisions a response with events was behind the newest the process knew (1: the most).",
            labels=["quantile"],
        )
        for quantile in (0.5, 0.99):
            behind.add_metric([floatToGoString(quantile)], percentile(tally.by_response, quantile))
        behind.add_metric(["1"], max(tally.by_response, default=0))
        yield behind

    def _info(self, settings: EtcdSettings | None) -> Metric:
        family = GaugeMetricFamily(
            PREFIX + "run_info",
            "The run: its User classes, target mode, number of endpoints and the tool's version (value 1).",
            labels=["class", "target", "endpoints_count", "version"],
        )
        classes = ",".join(sorted(cls.__name__ for cls in self.environment.user_classes or ()))
        target = settings.target if settings is not None else ""
        endpoints = str(len(settings.endpoints)) if settings is not None else "0"
        family.add_metric([classes, target, endpoints, self.version], 1)
        return family


# -- serving --


class Exporter:
    """The registry, its own port, and the web UI's route."""

    def __init__(self, registry: CollectorRegistry, server: WSGIServer | None, url: str) -> None:
        self.registry = registry
        self.server = server
        self.url = url

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(timeout=1)
            self.server = None


def start(
    environment,
    web_ui,
    recorder: LatencyRecorder,
    run_settings: Callable[[], EtcdSettings | None],
    is_master: bool,
) -> Exporter | None:
    """Serve the metrics on ``--etcd-prometheus-port`` (and at /etcd/metrics of the web UI); None when it is 0."""
    settings = run_settings()
    port = settings.exporter.port if settings is not None else 0
    if not port:
        return None
    options = environment.parsed_options
    host = getattr(options, "web_host", "") or ""
    host = "" if host == "*" else host
    taken = {"--web-port": getattr(options, "web_port", None) if web_ui is not None else None}
    if is_master:
        taken["--master-bind-port"] = getattr(options, "master_bind_port", None)
    for flag, used in taken.items():
        if used == port:
            raise ExporterError(
                f"--etcd-prometheus-port: {port} is also {flag}; give another port"
                + (f" (the web UI serves the same page at {WEB_UI_ROUTE})" if flag == "--web-port" else "")
            )
    window = settings.exporter.window
    recent = RecentSeconds(window + MASTER_LAG_S + 2)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(environment, recorder, run_settings, recent, MASTER_LAG_S if is_master else 0))
    recorder.store.merged_listeners.append(recent.add)
    server = WSGIServer((host, port), make_wsgi_app(registry), log=None, error_log=logger)
    try:
        server.start()
    except OSError as error:
        raise ExporterError(
            f"--etcd-prometheus-port: cannot listen on {host or '*'}:{port} ({error.strerror or error}); give a free "
            "port, or 0 for no exporter"
        ) from None
    url = f"http://{_url_host(host)}:{port}/metrics"
    logger.info("Prometheus metrics at %s", url)
    exporter = Exporter(registry, server, url)
    if web_ui is not None:
        _serve_on_web_ui(environment, web_ui, registry)
    return exporter


def _url_host(host: str) -> str:
    if not host:
        return "0.0.0.0"
    return f"[{host}]" if ":" in host else host


def _serve_on_web_ui(environment, web_ui, registry: CollectorRegistry) -> None:
    base = getattr(environment.parsed_options, "web_base_path", "") or ""

    @web_ui.app.route(f"{base}{WEB_UI_ROUTE}")
    @web_ui.auth_required_if_enabled
    def etcd_metrics() -> Any:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        response = make_response(encoder(registry))
        response.headers["Content-Type"] = content_type
        return response


# -- the feature's hooks --


class ExporterRun(FeatureHooks):
    """On a master or single process: the exporter from init to quit."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.exporter: Exporter | None = None

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        if self.tool.run_settings is None:
            return  # a worker, or a run without the tool's options
        is_master = run_context(environment).role.is_master
        try:
            self.exporter = start(
                environment, web_ui, self.tool.get(LatencyRecorder), lambda: self.tool.run_settings, is_master
            )
        except ExporterError as error:
            self.tool.fail(str(error))

    def on_quit(self, **_kwargs) -> None:
        if self.exporter is not None:
            self.exporter.stop()
            self.exporter = None
