"""Open files per process: each gRPC connection is a socket, and a process holds at most its open-file limit.

At start each process raises its soft limit to its hard limit (``raise_limit``); a run whose connections cannot fit
in one process under it is refused in one line (``connections_error``): ``--etcd-conns`` is per endpoint per
process, so more connections than fit take more processes (``--processes``, or workers), each with fewer.
Pure but for ``resource``.
"""

from __future__ import annotations

import math
import resource

# what a process holds besides its connections: Locust's own (logs, CSV files, the web UI, a master's sockets),
# gRPC's (epoll and wake-up descriptors, per thread), the members' /metrics polling and the pre-flight's channels
OTHER_FILES = 128


def raise_limit() -> int:
    """The soft limit raised to the hard one where the system allows; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass  # a container may forbid it: the check below tells what fits
    return soft


def connections_error(conns: int, endpoints: int, limit: int) -> str | None:
    """Why ``conns`` connections to each of ``endpoints`` cannot open in one process under ``limit`` open files;
    None when they fit (or the limit is infinite)."""
    if limit == resource.RLIM_INFINITY or limit < 0:
        return None
    needed = conns * endpoints
    room = max(0, limit - OTHER_FILES)
    if needed <= room:
        return None
    asked = f"--etcd-conns {conns} × {endpoints} endpoint{'s' if endpoints != 1 else ''}"
    if room < endpoints:
        fix = "raise the hard limit (ulimit -Hn, LimitNOFILE=) or give fewer endpoints"
    else:
        processes = math.ceil(needed / room)
        while math.ceil(conns / processes) * endpoints > room:  # whole connections per endpoint
            processes += 1
        share = math.ceil(conns / processes)
        fix = (
            f"spread them over {processes} processes with --etcd-conns {share} each (--processes {processes}, or "
            f"{processes} workers), or raise the hard limit (ulimit -Hn)"
        )
    return (
        f"--etcd-conns: {needed} connections per process ({asked}) do not fit in its open-file limit of {limit} "
        f"less {OTHER_FILES} for its other files; {fix}"
    )
