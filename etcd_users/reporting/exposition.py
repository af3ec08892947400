"""Minimal reader for the Prometheus text exposition format (enough to read etcd's /metrics)."""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import NamedTuple

_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = _NAME_START | set("0123456789")


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


def parse_metrics(text: str) -> list[Sample]:
    """Parse exposition text into samples; comments (# HELP, # TYPE) and blank lines are skipped."""
    samples = []
    for line_number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            samples.append(_parse_sample(line))
        except ValueError as error:
            raise ValueError(f"line {line_number}: {error}: {raw_line!r}") from None
    return samples


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


def _parse_sample(line: str) -> Sample:
    position = _scan_name(line, 0)
    name = line[:position]
    labels: dict[str, str] = {}
    if position < len(line) and line[position] == "{":
        position = _parse_labels(line, position + 1, labels)
    rest = line[position:].split()
    if not rest or len(rest) > 2:  # value, optionally followed by a timestamp
        raise ValueError("expected a value after the metric name")
    return Sample(name, labels, float(rest[0]))


def _scan_name(line: str, start: int) -> int:
    if start >= len(line) or line[start] not in _NAME_START:
        raise ValueError(f"expected a name at column {start + 1}")
    end = start + 1
    while end < len(line) and line[end] in _NAME_CHARS:
        end += 1
    return end


def _skip_spaces(line: str, position: int) -> int:
    while position < len(line) and line[position] in " \t":
        position += 1
    return position


def _parse_labels(line: str, position: int, labels: dict[str, str]) -> int:
    """Read `name="value",...}` starting after the `{`; return the position after the `}`."""
    while True:
        position = _skip_spaces(line, position)
        if position < len(line) and line[position] == "}":
            return position + 1
        end = _scan_name(line, position)
        label = line[position:end]
        position = _skip_spaces(line, end)
        if line[position : position + 1] != "=":
            raise ValueError(f"expected = after label {label!r}")
        position = _skip_spaces(line, position + 1)
        if line[position : position + 1] != '"':
            raise ValueError(f"expected a quoted value for label {label!r}")
        position += 1
        value: list[str] = []
        while True:
            if position >= len(line):
                raise ValueError(f"unterminated value for label {label!r}")
            char = line[position]
            if char == '"':
                break
            if char == "\\" and position + 1 < len(line):
                position += 1
                char = _ESCAPES.get(line[position], "\\" + line[position])
            value.append(char)
            position += 1
        labels[label] = "".join(value)
        position = _skip_spaces(line, position + 1)
        if position < len(line) and line[position] == ",":
            position += 1
        elif position >= len(line) or line[position] != "}":
            raise ValueError(f"expected , or }} after label {label!r}")
