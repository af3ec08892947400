"""The exporter's maths and page without a server: bucket counts from exact histograms, the window of recent seconds,
the metrics a real Locust environment and latency recorder give, the option checks, and the Grafana dashboard's
shape. A real Prometheus scraping real runs is ``tests/e2e/test_prometheus.py``."""

from locust.env import Environment
from locust.event import Events

import argparse
import json
import time

import pytest
from checks import recorded
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support import DEPLOY

from etcd_users import hdr
from etcd_users.core.features import OPTIONS
from etcd_users.core.run_context import run_context
from etcd_users.features.exporter.exporter import BUCKETS_S, QUANTILES, RunCollector, bucket_counts
from etcd_users.latency import store as store_module
from etcd_users.latency.recent import RecentSeconds
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.run_state.watch_tally import WatchTally
from etcd_users.run_state.watchers import WatchTallies
from etcd_users.settings import SettingsError, settings_from_options

DASHBOARD = DEPLOY / "grafana" / "locust-etcd.json"


def test_buckets_are_log_spaced_from_50_us_to_10_s():
    assert BUCKETS_S[0] == 5e-5 and BUCKETS_S[-1] == 10.0 and len(BUCKETS_S) == 107
    ratios = [high / low for low, high in zip(BUCKETS_S, BUCKETS_S[1:], strict=False)]
    assert all(1.11 < ratio < 1.135 for ratio in ratios), ratios  # 20 per decade, rounded to 3 digits
    assert 1e-3 in BUCKETS_S and 1e-4 in BUCKETS_S and 1.0 in BUCKETS_S


def test_bucket_counts_are_the_exact_counts_at_or_below_each_bound():
    values = [40, 50, 51, 99, 100, 101, 250, 251, 252, 999, 1000, 1001, 2500, 12_345, 999_999, 4_000_000, 20_000_000]
    first, second = recorded(values[::2]), recorded(values[1::2])
    cumulative, total, total_s = bucket_counts([first, second])
    assert total == len(values)
    for bound, count in zip(BUCKETS_S, cumulative, strict=True):
        # HDR keeps 3 significant digits: a value within 0.1 % of a bound may count on either side of it
        low = sum(value <= bound * 1e6 * 0.999 for value in values)
        high = sum(value <= bound * 1e6 * 1.001 for value in values)
        assert low <= count <= high, (bound, count)
    assert cumulative[BUCKETS_S.index(1e-4)] == 5  # 40, 50, 51, 99, 100 µs
    assert cumulative[BUCKETS_S.index(2.51e-4)] == 8  # and 101, 250, 251 µs (2.51e-4 * 1e6 is 250.99… in floats)
    assert total_s == pytest.approx(sum(values) / 1e6, rel=1e-3)


def test_the_window_merges_its_seconds_exactly_and_forgets_older_ones():
    recent = RecentSeconds(keep_s=20)
    per_second = {100 + s: recorded(range(100 + 10 * s, 3000 + 100 * s, 7)) for s in range(30)}
    for second, histogram in per_second.items():
        recent.add(second, ("etcd", "put", "service"), histogram, 0)
        recent.add(second, ("etcd", "put", "intended"), recorded([10_000_000]), 0)  # not the service time
        recent.add(second, ("etcd", "put", "service"), None, 2)
    window = recent.window(end=128, length=10)
    merged = hdr.merge(per_second[second] for second in range(118, 128))
    assert window.successes == {"put": merged.total_count} and window.failures == {"put": 20}
    assert window.seconds == 10
    percentiles = [quantile * 100 for quantile in QUANTILES]
    assert hdr.percentiles_us(window.histograms["put"], percentiles) == hdr.percentiles_us(merged, percentiles)
    assert window.histograms["put"].get_max_value() == merged.get_max_value()
    # bounded: only keep_s seconds are held, and a second that old is not taken in any more
    assert min(recent._chunks) >= 129 - 20 and len(recent._chunks) <= 21
    recent.add(50, ("etcd", "put", "service"), recorded([1]), 0)
    assert 50 not in recent._chunks
    # a run that started inside the window: its seconds only
    assert recent.window(end=200, length=10).successes == {}


def test_a_real_environment_and_recorder_give_every_metric(monkeypatch):
    environment = Environment(events=Events())
    recorder = LatencyRecorder(environment)
    recent = RecentSeconds(keep_s=20)
    recorder.store.merged_listeners.append(recent.add)
    now = time.time()
    monkeypatch.setattr(store_module, "_now", lambda: now - 3)
    for latency_ms in (0.5, 1.0, 1.5, 2.0):
        recorder.record("etcd", "put", latency_ms)
        environment.stats.log_request("etcd", "put", latency_ms, 0)
    recorder.record("etcd", "put", 5.0, exception="etcdserver: too many requests")
    environment.stats.log_request("etcd", "put", 5.0, 0)
    environment.stats.log_error("etcd", "put", "etcdserver: too many requests")
    monkeypatch.setattr(store_module, "_now", lambda: now)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(environment, recorder, lambda: None, recent, lag_s=0))
    families = {family.name: family for family in text_string_to_metric_families(generate_latest(registry).decode())}

    def samples(name: str) -> dict:
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in families[name].samples}

    assert samples("locust_etcd_requests") == {("locust_etcd_requests_total", (("name", "put"),)): 5}
    assert samples("locust_etcd_failures") == {
        ("locust_etcd_failures_total", (("error", "etcdserver: too many requests"), ("name", "put"))): 1
    }
    durations = samples("locust_etcd_request_duration_seconds")
    assert durations[("locust_etcd_request_duration_seconds_count", (("name", "put"),))] == 4  # successes
    assert durations[("locust_etcd_request_duration_seconds_bucket", (("le", "0.001"), ("name", "put")))] == 2
    assert durations[("locust_etcd_request_duration_seconds_sum", (("name", "put"),))] == pytest.approx(0.005, 1e-3)
    quantiles = {float(s.labels["quantile"]): s.value for s in families["locust_etcd_latency_seconds"].samples}
    assert quantiles == {0.5: 0.001, 0.9: 0.002, 0.95: 0.002, 0.99: 0.002, 0.999: 0.002}
    assert families["locust_etcd_users"].samples[0].value == 0
    assert families["locust_etcd_shape_planned_qps"].samples == []
    assert families["locust_etcd_sla_gate_passing"].samples == []  # no --etcd-sla


def test_a_second_whose_batched_results_are_not_all_applied_stays_out_of_the_window():
    # the loop engine hands its results to the recorder in batches: at a scrape just past a second's end, the last
    # results of that second may still be on their way, and a window with it would hold a part of it
    environment = Environment(events=Events())
    recorder = LatencyRecorder(environment)
    recent = RecentSeconds(keep_s=20)
    recorder.store.merged_listeners.append(recent.add)
    boundary = int(time.time())
    arrived = [(boundary - 1.5, 1.0), (boundary - 0.5, 9.0)]  # (ended at, ms): a complete second, then a part of one

    def batch() -> float:  # as the engine's flush: hand over what has come, say until when every result has
        while arrived:
            at, milliseconds = arrived.pop(0)
            recorder.store.record_at(at, "etcd", "put", milliseconds, None, None)
        return boundary - 0.02  # a result that ended 10 ms before the boundary is still on its way

    recorder.before_collect.append(batch)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(environment, recorder, lambda: None, recent, lag_s=0))
    families = {family.name: family for family in text_string_to_metric_families(generate_latest(registry).decode())}
    quantiles = {float(s.labels["quantile"]): s.value for s in families["locust_etcd_latency_seconds"].samples}
    assert quantiles == dict.fromkeys(QUANTILES, 0.001)  # the complete second only
    assert recorder.covered_until() == boundary - 0.02


def options(**values) -> argparse.Namespace:
    namespace = argparse.Namespace(**{option.dest: option.default for option in OPTIONS})
    for name, value in values.items():
        setattr(namespace, name, value)
    return namespace


def test_the_options_are_checked_and_off_by_default():
    settings = settings_from_options(options())
    assert (settings.exporter.port, settings.exporter.window) == (0, 10)
    assert settings_from_options(options(etcd_prometheus_port=9647)).exporter.port == 9647
    with pytest.raises(SettingsError, match=r"^--etcd-prometheus-port: -1 is not a TCP port; give one from 1 to"):
        settings_from_options(options(etcd_prometheus_port=-1))
    with pytest.raises(SettingsError, match=r"^--etcd-prometheus-window: 3601 seconds is outside 1 to 3600"):
        settings_from_options(options(etcd_prometheus_window=3601))


def test_the_dashboard_is_grafana_json_on_a_prometheus_variable_with_every_figure_asked_for():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "locust-etcd" and dashboard["schemaVersion"] >= 39
    [variable] = dashboard["templating"]["list"]
    assert (variable["name"], variable["type"], variable["query"]) == ("DS_PROMETHEUS", "datasource", "prometheus")
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    cells = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"] and target["expr"].strip()
    expressions = " ".join(target["expr"] for panel in panels for target in panel.get("targets", []))
    for metric in (
        "locust_etcd_shape_planned_qps",
        "rate(locust_etcd_requests_total",
        'locust_etcd_latency_seconds{quantile="0.5"}',
        'locust_etcd_latency_seconds{quantile="0.99"}',
        'locust_etcd_latency_seconds{quantile="0.999"}',
        "locust_etcd_failures_total",
        "locust_etcd_users",
        "locust_etcd_sla_gate_passing",
        "etcd_disk_wal_fsync_duration_seconds_bucket",
        "etcd_disk_backend_commit_duration_seconds_bucket",
        "etcd_server_proposals_committed_total",
        "etcd_server_proposals_failed_total",
        "etcd_server_proposals_pending",
        "etcd_server_leader_changes_seen_total",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_server_quota_backend_bytes",
        "process_resident_memory_bytes",
    ):
        assert metric in expressions, metric


def test_the_watchers_figures_are_series_while_watchers_ran():
    environment = Environment(events=Events())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(environment, LatencyRecorder(environment), lambda: None, RecentSeconds(20), 0))

    def families() -> dict:
        return {family.name: family for family in text_string_to_metric_families(generate_latest(registry).decode())}

    assert not any(name.startswith("locust_etcd_watch") for name in families())  # no watcher: no series
    tally = WatchTally(watchers=300, events=9_000, progress=12, by_response={0: 98, 3: 1, 40: 1})
    tally.cancelled = {"mvcc: required revision has been compacted": 2}
    run_context(environment).get(WatchTallies).live = lambda: tally
    found = families()
    assert found["locust_etcd_watchers"].samples[0].value == 300
    assert found["locust_etcd_watch_events"].samples[0].value == 9_000
    assert found["locust_etcd_watch_progress_notifications"].samples[0].value == 12
    (cancelled,) = found["locust_etcd_watchers_cancelled"].samples
    assert cancelled.labels == {"reason": "mvcc: required revision has been compacted"} and cancelled.value == 2
    behind = {s.labels["quantile"]: s.value for s in found["locust_etcd_watch_behind_revisions"].samples}
    assert behind == {"0.5": 0, "0.99": 3, "1": 40}
