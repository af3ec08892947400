"""What both measured clients record over their window (the Locust probe and the bare loop): the process's CPU from
the OS, the latency percentiles, and the result file. Free of Locust and gevent, which the bare loop must not load."""

import json
import os
import resource
import time

from hdrh.histogram import HdrHistogram


def process_usage() -> dict:
    """The process's CPU (every thread) and context switches so far, and when they were read."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "time": time.perf_counter(),
        "cpu": usage.ru_utime + usage.ru_stime,
        "cpu_user": usage.ru_utime,
        "cpu_system": usage.ru_stime,
        "voluntary_switches": usage.ru_nvcsw,
        "involuntary_switches": usage.ru_nivcsw,
    }


def percentiles_ms(histogram: HdrHistogram) -> dict:
    """The latency figures of a histogram of microseconds, in milliseconds."""
    return {
        "p50": histogram.get_value_at_percentile(50) / 1000.0,
        "p90": histogram.get_value_at_percentile(90) / 1000.0,
        "p99": histogram.get_value_at_percentile(99) / 1000.0,
        "p99.9": histogram.get_value_at_percentile(99.9) / 1000.0,
        "max": histogram.get_max_value() / 1000.0,
        "mean": histogram.get_mean_value() / 1000.0,
    }


def write_atomically(path: str, content: dict) -> None:
    """JSON that a reader polling the file never sees half-written."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as file:
        json.dump(content, file)
    os.replace(temporary, path)
