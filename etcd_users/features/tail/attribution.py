"""A run's worst seconds and what happened around each: the tail's report, its ``tail:`` lines and the precondition
of the source reports. Pure.

A second's causes are the events that overlap it or the seconds on either side (an event read from /metrics spans
the interval between two scrapes); they are ranked: inside the second before beside it, then by the kind's weight
(``events.WEIGHTS``), then by size. A cause is a coincidence in time, never a proof; a second with no event around it
is ``unexplained``, never tied to the nearest event.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence

from etcd_users.features.tail.events import UNEXPLAINED, Event, clock, weight
from etcd_users.features.tail.member_signals import Sample
from etcd_users.features.tail.seconds import Second

SPIKE_RATIO = 3.0  # an interval's mean duration this many times the member's own median over the run ...
SPIKE_FLOOR_MS = 1.0  # ... and at least this long is a spike
PRECONDITION_FSYNC_MS = 10.0  # the source reports' tables hold with WAL fsync under this
PRECONDITION_CAUSES = ("compaction", "snapshot")
LINE_CAUSES = 4  # causes a line names; the JSON has them all
LINE_ERROR_SECONDS = 20  # seconds with errors printed beyond the worst ones (an outage can have thousands); JSON: all
NEAR_S = 1  # seconds on either side of a second whose events count as its causes
_DURATION_WORDS = {
    "fsync": ("WAL fsync", "fsyncs"),
    "commit": ("backend commit", "commits"),
    "peer-rtt": ("peer round trip", "round trips"),
}


def spikes(samples: Iterable[Sample]) -> list[Event]:
    """The intervals whose mean duration was at least ``SPIKE_RATIO`` times the member's median over the run and at
    least ``SPIKE_FLOOR_MS``: ``fsync``, ``commit`` and ``peer-rtt`` events."""
    by_series: dict[tuple[str, str, str], list[Sample]] = {}
    for sample in samples:
        by_series.setdefault((sample.kind, sample.member, sample.peer), []).append(sample)
    found = []
    for (kind, member, peer), series in by_series.items():
        median = statistics.median(sample.mean_ms for sample in series)
        for sample in series:
            if sample.mean_ms < SPIKE_FLOOR_MS or sample.mean_ms < SPIKE_RATIO * median:
                continue
            to = f" to peer {peer}" if peer else ""
            what, unit = _DURATION_WORDS[kind]
            evidence = (
                f"{what}{to} averaged {sample.mean_ms:.1f} ms over {sample.count:.0f} {unit}, "
                f"{sample.mean_ms / median if median else float('inf'):.1f}x the member's median of {median:.2f} ms "
                f"(between the scrapes at {clock(sample.since)} and {clock(sample.at)})"
            )
            found.append(
                Event(sample.at, kind, member, evidence, since=sample.since, size=sample.mean_ms / (median or 1))
            )
    return found


def _distance(event: Event, second: int) -> int | None:
    """0: the event overlaps the second; 1: a neighbouring one; None: farther."""
    start, end = event.start, event.at
    if start < second + 1 and end >= second:
        return 0
    if start < second + 1 + NEAR_S and end >= second - NEAR_S:
        return 1
    return None


def causes(second: int, events: Sequence[Event]) -> list[tuple[Event, int]]:
    """The events around ``second`` ranked, one per kind and member (its strongest), with their distance."""
    near = [(event, distance) for event in events if (distance := _distance(event, second)) is not None]
    near.sort(key=lambda pair: (pair[1], -weight(pair[0].cause), -pair[0].size, pair[0].at))
    kept, seen = [], set()
    for event, distance in near:
        if (event.cause, event.member) not in seen:
            seen.add((event.cause, event.member))
            kept.append((event, distance))
    return kept


def stalls(seconds: Mapping[int, Second]) -> list[Second]:
    """The seconds in which no request ended while one was on the wire all through them, in time order: a request
    that ended in second ``t`` after ``L`` seconds began at ``t + 1 - L`` at the latest, so it spanned every whole
    second from then until ``t``. Each with its longest such request as ``waited_ms``. (A second nobody asked anything
    in, as at a low rate, is no stall: no request spanned it.)"""
    waited: dict[int, float] = {}
    for figures in seconds.values():
        if figures.max_ms is None or figures.max_ms < 1000.0:
            continue
        for second in range(math.ceil(figures.second + 1 - figures.max_ms / 1000.0), figures.second):
            if second not in seconds and figures.max_ms > waited.get(second, 0.0):
                waited[second] = figures.max_ms
    return [Second(second, None, 0, 0, waited_ms=longest) for second, longest in sorted(waited.items())]


def worst(seconds: Mapping[int, Second], count: int) -> list[Second]:
    """The ``count`` worst seconds: those in which nothing ended while a request waited (``stalls``), then those of
    highest P99, worst first; then every other second with errors in time order."""
    timed = sorted((s for s in seconds.values() if s.p99_ms is not None), key=lambda s: (-s.p99_ms, s.second))
    chosen = (stalls(seconds) + timed)[:count]
    picked = {s.second for s in chosen}
    return chosen + sorted((s for s in seconds.values() if s.errors and s.second not in picked), key=lambda s: s.second)


def _where(distance: int, event: Event, second: int) -> str:
    if distance == 0:
        return "in that second"
    return "in the second before" if event.at < second else "in the second after"


def report(seconds: Mapping[int, Second], events: Sequence[Event], count: int, started: float) -> dict:
    """The summary's ``tail``: the worst seconds with their causes, and every event, in time order."""
    origin = int(started)
    chosen = []
    for figures in worst(seconds, count):
        found = causes(figures.second, events)
        chosen.append(
            {
                "at": figures.second,
                "second": figures.second - origin,
                "p99_ms": None if figures.p99_ms is None else round(figures.p99_ms, 3),
                "waited_ms": None if figures.waited_ms is None else round(figures.waited_ms, 3),
                "requests": figures.requests,
                "errors": figures.errors,
                "causes": [
                    {
                        "cause": event.cause,
                        "member": event.member,
                        "evidence": f"{event.evidence}; {_where(distance, event, figures.second)}",
                    }
                    for event, distance in found
                ]
                or [{"cause": UNEXPLAINED, "member": "", "evidence": "no event within 1 s of it"}],
            }
        )
    return {"seconds": chosen, "events": [event.to_dict() for event in sorted(events, key=lambda e: e.at)]}


def precondition(events: Iterable[Event], samples: Iterable[Sample], started: float, ended: float) -> dict:
    """Whether the window had no compaction or snapshot and WAL fsync P99 under ``PRECONDITION_FSYNC_MS``
    everywhere, and the first event that broke it."""
    broken: list[tuple[float, str]] = [
        (event.at, f"{event.cause} on {event.member} at {clock(event.at)}")
        for event in events
        if event.cause in PRECONDITION_CAUSES and event.at >= started and event.start <= ended
    ]
    for sample in samples:
        value = sample.p99_ms if sample.p99_ms is not None else sample.mean_ms
        if sample.kind == "fsync" and value >= PRECONDITION_FSYNC_MS and sample.at >= started and sample.since <= ended:
            broken.append((sample.at, f"WAL fsync P99 {value:.1f} ms on {sample.member} at {clock(sample.at)}"))
    broken.sort()
    return {
        "met": not broken,
        "broken_by": broken[0][1] if broken else None,
        "breaks": len(broken),
    }


def _day(second: int) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(second))


def ranked(seconds: Mapping[int, Second], count: int) -> int:
    """How many of ``worst``'s seconds are there for their P99 or a stall (the rest for their errors)."""
    return min(count, len(stalls(seconds)) + sum(1 for figures in seconds.values() if figures.p99_ms is not None))


def lines(tail: dict, precondition_found: dict | None, scraped: str, by_p99: int | None = None) -> list[str]:
    """The ``tail:`` lines: one per worst second (``by_p99`` of them for their P99, the rest for their errors: at most
    ``LINE_ERROR_SECONDS`` of those), the events in one line, the precondition's."""
    out = []
    seconds = tail["seconds"]
    if seconds:
        stalled = "those in which nothing ended, then " if any(item.get("waited_ms") for item in seconds) else ""
        out.append(
            f"tail: the {len(seconds)} worst second{'s' * (len(seconds) != 1)} ({stalled}by exact P99, and those with "
            "errors), each with the events within 1 s of it: a coincidence in time, not a proof"
        )
    printed, errors_left = [], 0
    shown = (len(seconds) if by_p99 is None else by_p99) + LINE_ERROR_SECONDS
    for index, item in enumerate(seconds):
        if index >= shown:
            errors_left += 1
        else:
            printed.append(item)
    for item in printed:
        head = f"tail: s {item['second']} ({_day(item['at'])} UTC): "
        if item.get("waited_ms"):
            head += f"no request ended, one of {item['waited_ms'] / 1000:.3f} s was on the wire through it"
        else:
            p99 = "-" if item["p99_ms"] is None else f"{item['p99_ms']:.3f} ms"
            head += f"P99 {p99}, {item['requests']:,} requests, {item['errors']:,} errors"
        found = item["causes"]
        if found[0]["cause"] == UNEXPLAINED:
            out.append(f"{head}: unexplained (no event within 1 s)")
            continue
        named = "; ".join(
            f"{cause['cause']}" + (f" on {cause['member']}" if cause["member"] else "") + f" [{cause['evidence']}]"
            for cause in found[:LINE_CAUSES]
        )
        more = f"; and {len(found) - LINE_CAUSES} more" if len(found) > LINE_CAUSES else ""
        out.append(f"{head}: beside {named}{more}")
    if errors_left:
        out.append(f"tail: and {errors_left} more seconds with errors (PREFIX_tail.json has them all)")
    events = tail["events"]
    if events:
        kinds: dict[str, int] = {}
        for event in events:
            kinds[event["cause"]] = kinds.get(event["cause"], 0) + 1
        counted = ", ".join(f"{cause} {n}" for cause, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(f"tail: {len(events)} event{'s' * (len(events) != 1)} during the run ({counted}); {scraped}")
    else:
        out.append(f"tail: no event during the run; {scraped}")
    if precondition_found is not None:
        rule = f"no compaction or snapshot, WAL fsync P99 under {PRECONDITION_FSYNC_MS:g} ms"
        if precondition_found["met"]:
            out.append(f"tail: the window met the source reports' precondition ({rule})")
        else:
            others = precondition_found["breaks"] - 1
            also = f" (and {others} more)" if others > 0 else ""
            out.append(
                f"tail: the window did not meet the source reports' precondition ({rule}): "
                f"{precondition_found['broken_by']} first{also}"
            )
    return out
