"""YCSB's core workloads A–F (``--etcd-ycsb``): the operation proportions and request distribution of YCSB's
workload files (workloads/workloada … workloadf of brianfrankcooper/YCSB), and the draw of each operation.

In etcd terms: read is a range of one key, update a put of a loaded key, insert a put of a new key past the
loaded ones, scan a range of 1–100 consecutive keys (YCSB's maxscanlength=100, scanlengthdistribution=uniform),
read-modify-write a range then a put of the same key, timed as one operation. Request names are YCSB's, under
``ycsb/``.

Pure: nothing of Locust, gevent or gRPC.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.workload_model.distributions import KeyDistribution

READ, UPDATE, INSERT, SCAN, RMW = "read", "update", "insert", "scan", "rmw"
OPERATIONS = (READ, UPDATE, INSERT, SCAN, RMW)
REQUEST_PREFIX = "ycsb/"
MAX_SCAN_LENGTH = 100  # YCSB's maxscanlength of workload E
INSERT_HEADROOM = 100  # inserts a key space of D and E must have room for, in multiples of the loaded records


@dataclass(frozen=True)
class YcsbWorkload:
    """One of YCSB's core workloads: its letter, what it models, its operations' shares and key distribution."""

    letter: str
    title: str
    proportions: tuple[tuple[str, float], ...]
    distribution: KeyDistribution

    def __str__(self) -> str:
        shares = "/".join(f"{share * 100:g}" for _, share in self.proportions)
        names = "/".join(name for name, _ in self.proportions)
        return f"YCSB {self.letter} ({self.title}): {names} {shares} %, {self.distribution.kind}"

    @property
    def inserts(self) -> bool:
        return any(name == INSERT for name, _ in self.proportions)


_ZIPFIAN, _LATEST = KeyDistribution("zipfian"), KeyDistribution("latest")

WORKLOADS = {
    workload.letter: workload
    for workload in (
        YcsbWorkload("A", "update heavy", ((READ, 0.5), (UPDATE, 0.5)), _ZIPFIAN),
        YcsbWorkload("B", "read mostly", ((READ, 0.95), (UPDATE, 0.05)), _ZIPFIAN),
        YcsbWorkload("C", "read only", ((READ, 1.0),), _ZIPFIAN),
        YcsbWorkload("D", "read latest", ((READ, 0.95), (INSERT, 0.05)), _LATEST),
        YcsbWorkload("E", "short ranges", ((SCAN, 0.95), (INSERT, 0.05)), _ZIPFIAN),
        YcsbWorkload("F", "read-modify-write", ((READ, 0.5), (RMW, 0.5)), _ZIPFIAN),
    )
}


def parse_workload(text: str) -> YcsbWorkload | None:
    """``A`` … ``F`` (any case, ``workloada`` too) into its workload; '' for none; ValueError with the fix."""
    letter = text.strip().upper().removeprefix("WORKLOAD")
    if not letter:
        return None
    if letter not in WORKLOADS:
        raise ValueError(f"{shown(text)} is not one of YCSB's core workloads; give one of {', '.join(WORKLOADS)}")
    return WORKLOADS[letter]


def request_name(operation: str) -> str:
    return REQUEST_PREFIX + operation


def chooser(workload: YcsbWorkload, uniform: Callable[[], float]) -> Callable[[], str]:
    """The operation of each request, drawn by the workload's proportions (one draw and a bisect)."""
    names = [name for name, _ in workload.proportions]
    if len(names) == 1:
        only = names[0]
        return lambda: only
    cumulative = list(itertools.accumulate(share for _, share in workload.proportions))
    total, last = cumulative[-1], len(names) - 1
    return lambda: names[min(bisect.bisect(cumulative, uniform() * total), last)]


def scan_lengths(uniform: Callable[[], float]) -> Callable[[], int]:
    """Scan lengths uniform in 1 … ``MAX_SCAN_LENGTH`` (YCSB's scanlengthdistribution=uniform)."""
    return lambda: 1 + int(uniform() * MAX_SCAN_LENGTH)
