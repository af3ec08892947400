"""Whether each combination's connections fit in its processes: a Locust process opens ``--etcd-conns`` connections
to every endpoint, and holds at most this machine's hard limit of open files (each process raises its soft limit to
it at start). A combination that cannot fit is refused before anything runs, in one line naming ``processes``."""

from __future__ import annotations

import resource

from etcd_users import open_files
from etcd_users.settings import parse_endpoints
from etcd_users.suite.plan import Combination
from etcd_users.suite.schema import OPTIONS_BY_NAME, Suite, SuiteError


def hard_limit() -> int:
    """The open files a process here can hold once it raised its soft limit: the hard limit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def limit_text(limit: int) -> str:
    return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)


def endpoint_count(suite: Suite, combo: Combination) -> int:
    return len(parse_endpoints(suite.endpoints)) if suite.endpoints else combo.members


def connections_per_process(suite: Suite, combo: Combination) -> int:
    conns = combo.options.get("conns", OPTIONS_BY_NAME["conns"].default)
    return conns * endpoint_count(suite, combo)


def check_fit(suite: Suite, combos: list[Combination], limit: int) -> None:
    """SuiteError for the first combination whose connections per process exceed what ``limit`` leaves for them."""
    for combo in combos:
        conns = combo.options.get("conns", OPTIONS_BY_NAME["conns"].default)
        error = open_files.connections_error(conns, endpoint_count(suite, combo), limit)
        if error is None:
            continue
        # the tool's line speaks of --processes; in a suite file the processes key (or axis) sets it
        total = conns * combo.processes
        where = f"combination {combo.label}: " if suite.axes else ""
        raise SuiteError(
            f"{suite.path}: {where}{error.removeprefix('--etcd-conns: ')}; in the suite, conns "
            f"is per endpoint per process ({combo.processes} process{'es' if combo.processes != 1 else ''}, "
            f"{total} per endpoint in all): raise processes and divide conns by as much"
        )
