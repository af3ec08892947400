"""A real member's /metrics page read with prometheus_client's parser: every metric the tool and the tests look up is
found under the name they use (the reader's details: ``tests/unit/test_exposition.py``)."""

import math
import urllib.request

import pytest

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.members.server_metrics import (
    BACKEND_COMMIT,
    DEBUGGING_COLUMNS,
    FSYNC,
    GAUGE_COLUMNS,
    GRPC_HANDLED,
    parse_scrape,
)

pytestmark = pytest.mark.e2e

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never through a proxy


def test_every_metric_looked_up_is_on_a_real_page_under_its_name(etcd1):
    url = etcd1.metrics_urls[0]
    samples = fetch_metrics(url)
    names = {sample.name for sample in samples}
    looked_up = {*GAUGE_COLUMNS.values(), *DEBUGGING_COLUMNS.values(), GRPC_HANDLED, "grpc_server_msg_received_total"}
    assert looked_up <= names, sorted(looked_up - names)
    assert metric_sum(samples, "etcd_server_has_leader") == 1
    for histogram in (FSYNC, BACKEND_COMMIT):
        bounds = {sample.labels["le"] for sample in samples if sample.name == histogram + "_bucket"}
        assert "+Inf" in bounds and len(bounds) > 10, (histogram, bounds)
        assert histogram + "_count" in names and histogram + "_sum" in names
    # the poller's reduction of the same page: every column it fills has a value
    scrape = parse_scrape(_page(url))
    assert set(scrape.values) == looked_up - {GRPC_HANDLED, "grpc_server_msg_received_total"}
    assert all(math.isfinite(value) for value in scrape.values.values())
    assert math.inf in scrape.buckets(FSYNC) and math.inf in scrape.buckets(BACKEND_COMMIT)


def _page(url: str) -> str:
    with _DIRECT.open(url, timeout=5) as response:
        return response.read().decode()
