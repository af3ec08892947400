"""A ready workload's operation repeated on the loop thread, as ``EtcdUser.repeat`` repeats one on a greenlet: back to
back, or at ``--etcd-user-rate`` on a schedule that never slips and never sends early."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from etcd_users.features.engine.client import LoopClient
from etcd_users.workload_model.arrivals import due_times
from etcd_users.workload_model.workloads import Operation

# uvloop wakes a timer at the nearest millisecond of a loop time taken when its turn began, up to a millisecond early:
# a sleep asks half a millisecond more, and the schedule looks at the clock again when it wakes
TIMER_ROUNDING = 0.0005


async def repeat(client: LoopClient, operation: Operation, running: Callable[[], bool]) -> None:
    """Run ``operation`` while ``running()``: back to back, or at ``--etcd-user-rate`` per second on an intended
    schedule that does not slip when a response is late (the next request goes out at once to catch up, and its
    latency is also measured from when it was due). A request never leaves before its due time."""
    settings = client.settings
    if settings.user_rate <= 0:
        while running():
            await operation()
        return
    for due in due_times(settings.arrival, settings.user_rate, time.perf_counter()):  # --etcd-arrival
        if not running():
            return
        delay = due - time.perf_counter()
        while delay > 0:  # a timer may wake early: never send before the due time
            await asyncio.sleep(delay + TIMER_ROUNDING)
            if not running():
                return
            delay = due - time.perf_counter()
        client.intended_start = due
        await operation()
