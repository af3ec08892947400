"""How long reading one etcd /metrics page takes: prometheus_client's parser against a hand-written one.

    python -m benchmarks.exposition_parse [--repeat 200] [--page FILE] [--save FILE]

Without ``--page`` it starts a throwaway 1-member etcd on 127.0.0.1, sends it a few hundred puts and range calls
through its HTTP gateway (so the gRPC counters and the disk histograms hold values, as during a run), fetches its
/metrics page and stops it. Each reader parses the page ``--repeat`` times per round; the figure printed is the best
of five rounds, in µs per page: for the whole page, and for what the metrics poller does once per member per
``--etcd-metrics-interval`` (``server_metrics.parse_scrape``: keep the lines it uses, parse them). The baseline is the
hand-written reader the tool used before ``prometheus_client``'s, kept here for the comparison only.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from etcd_users.local import ClusterError, LocalCluster
from etcd_users.reporting import exposition, server_metrics

ROUNDS = 5
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1 never through a proxy
_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = _NAME_START | set("0123456789")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def baseline_parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """The hand-written reader the tool used before prometheus_client's: (name, labels, value) per sample line."""
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


def _parse_sample(line: str) -> tuple[str, dict[str, str], float]:
    position = _scan_name(line, 0)
    name = line[:position]
    labels: dict[str, str] = {}
    if position < len(line) and line[position] == "{":
        position = _parse_labels(line, position + 1, labels)
    rest = line[position:].split()
    if not rest or len(rest) > 2:  # value, optionally followed by a timestamp
        raise ValueError("expected a value after the metric name")
    return name, labels, float(rest[0])


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


def prometheus_parse(text: str) -> list:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _as_samples(text: str) -> list[exposition.Sample]:
    return [exposition.Sample(*sample) for sample in baseline_parse(text)]


def micros_per_call(function: Callable[[str], object], text: str, repeat: int) -> float:
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(repeat):
            function(text)
        rounds.append((time.perf_counter() - start) / repeat * 1e6)
    return min(rounds)  # the least disturbed round: the machine is shared


def live_page() -> str:
    """A loaded local member's /metrics."""
    cluster = LocalCluster(1, name="bench-exposition")
    cluster.start(timeout=30)
    try:
        base = cluster.endpoints[0]
        for index in range(300):
            key = base64.b64encode(f"/locust-etcd/bench/{index}".encode()).decode()
            for path, body in (
                ("put", {"key": key, "value": base64.b64encode(b"x" * 1024).decode()}),
                ("range", {"key": key}),
            ):
                request = urllib.request.Request(f"{base}/v3/kv/{path}", data=json.dumps(body).encode(), method="POST")
                with _DIRECT.open(request, timeout=5) as response:
                    response.read()
        with _DIRECT.open(cluster.metrics_urls[0], timeout=5) as response:
            return response.read().decode()
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exposition_parse", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200, help="pages parsed per round (default 200)")
    parser.add_argument("--page", type=Path, help="a saved /metrics page instead of a live local etcd's")
    parser.add_argument("--save", type=Path, help="write the page read to this file")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat: give a count of 1 or more")
    try:
        text = args.page.read_text() if args.page else live_page()
    except (OSError, ClusterError) as error:
        print(f"exposition_parse: error: {error}", file=sys.stderr)
        return 1
    if args.save:
        args.save.write_text(text)
    ours = baseline_parse(text)
    theirs = exposition.parse_metrics(text)
    # the same samples, but for the counters whose name lacks _total (prometheus_client appends it)
    renamed = [(old[0], new.name) for old, new in zip(ours, theirs, strict=False) if old[0] != new.name]
    same = len(ours) == len(theirs) and all(
        old[1:] == (new.labels, new.value) for old, new in zip(ours, theirs, strict=False)
    )
    print(
        f"page: {len(text) / 1024:.0f} KiB, {text.count(chr(10))} lines, {len(ours)} samples; "
        f"{args.repeat} pages x {ROUNDS} rounds, best round"
    )
    print(
        f"same labels and values: {'yes' if same else 'NO'}; renamed: "
        + (", ".join(f"{old} -> {new}" for old, new in renamed) or "none")
    )
    rows = [
        ("whole page, hand-written reader", baseline_parse, text),
        ("whole page, prometheus_client", prometheus_parse, text),
        ("whole page, exposition.parse_metrics", exposition.parse_metrics, text),
    ]
    for label, function, page in rows:
        print(f"{label:<52}{micros_per_call(function, page, args.repeat):>10.0f} µs")
    # what the poller does once per member per --etcd-metrics-interval: keep the lines it uses, then parse them
    for label, reader in (("hand-written reader", _as_samples), ("exposition.parse_metrics", exposition.parse_metrics)):
        server_metrics.parse_metrics = reader
        try:
            micros = micros_per_call(server_metrics.parse_scrape, text, args.repeat)
        finally:
            server_metrics.parse_metrics = exposition.parse_metrics
        print(f"{'per poll (parse_scrape), ' + label:<52}{micros:>10.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
