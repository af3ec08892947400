"""Reader for the Prometheus text exposition format (etcd's /metrics), on ``prometheus_client``'s parser.

Samples keep the names that parser gives them: a histogram's ``NAME_bucket`` (with its ``le`` label), ``NAME_sum`` and
``NAME_count``; a gauge's name as written; a counter's name always ends in ``_total`` (OpenMetrics' naming: etcd
3.5's ``etcd_server_health_success``, typed counter, reads as ``etcd_server_health_success_total``; the counters named
``..._total`` already, such as ``grpc_server_handled_total``, are unchanged). Lines without a ``# TYPE`` are read as
written. Values are floats.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from prometheus_client.parser import text_fd_to_metric_families

_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def parse_metrics(text: str) -> list[Sample]:
    """Parse exposition text into samples, in the page's order; raises ValueError naming the first bad line."""
    lines = _Lines(text)
    try:
        return [
            Sample(sample.name, sample.labels, float(sample.value))
            for family in text_fd_to_metric_families(lines)
            for sample in family.samples
        ]
    except ValueError as error:
        raise ValueError(f"line {lines.number}: {error}: {lines.current!r}") from None


def fetch_metrics(url: str, timeout: float = 5.0) -> list[Sample]:
    """GET a /metrics endpoint and parse it."""
    request = urllib.request.Request(url, headers={"Accept": "text/plain; version=0.0.4"})
    with _opener_for(url).open(request, timeout=timeout) as response:
        charset = response.headers.get_content_charset() or "utf-8"
        return parse_metrics(response.read().decode(charset))


def metric_sum(samples: Iterable[Sample], name: str, **label_filters: str) -> float:
    """Sum the values of the samples called `name` whose labels include all of `label_filters`."""
    return sum(
        sample.value
        for sample in samples
        if sample.name == name and all(sample.labels.get(key) == value for key, value in label_filters.items())
    )


def _opener_for(url: str) -> urllib.request.OpenerDirector:
    # A local etcd must never be reached through an http_proxy from the environment.
    if urllib.parse.urlsplit(url).hostname in _LOOPBACK_HOSTS:
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


class _Lines:
    """The page's lines for the parser, remembering which one it reads (its errors do not say)."""

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()
        self.number = 0
        self.current = ""

    def __iter__(self) -> Iterator[str]:
        for number, line in enumerate(self._lines, start=1):
            self.number, self.current = number, line
            yield line
