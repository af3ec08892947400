"""The process's exit code, decided once when Locust quits: the highest code among the run's verdicts.

Each part of the tool that can fail a run gives an ``ExitVerdict``, its code and why: the gates (lost workers and
the capacity search's failure among them) 3, the audit 4. At ``quitting``, once every feature has judged, the plugin
adds Locust's own verdict (``locust_verdict``) and calls ``decide``; a new check adds its verdict to that list. The
codes are documented in one table, docs/pipelines.md#exit-codes. Pure: Locust's figures are read from the objects
passed in.
"""

from collections.abc import Iterable
from typing import NamedTuple

REQUESTS_FAILED = 1  # Locust's own, its --exit-code-on-error default
NOTHING_MEASURED = 1  # the run's measured window holds no request (etcd_users.features.empty_run.hooks)
BAD_INPUT = 2  # refused at start, in one line (argparse's code, and the tool's for its own options)
SLA_EXIT_CODE = 3  # a gate failed: --etcd-sla, a disruption's window, a lost worker, a capacity search without result
AUDIT_EXIT_CODE = 4  # the audit found data lost: it outranks slow data
GREENLET_DIED = 2  # Locust's own, after an unhandled exception in one of its greenlets


class ExitVerdict(NamedTuple):
    code: int
    reason: str  # what failed, in a few words: "the audit failed", "12 requests failed"


def decide(verdicts: Iterable[ExitVerdict | None]) -> ExitVerdict:
    """The highest code among ``verdicts`` (None: a part that did not fail), its reason followed by the others'."""
    failed = sorted((verdict for verdict in verdicts if verdict is not None and verdict.code), key=lambda v: -v.code)
    if not failed:
        return ExitVerdict(0, "nothing failed")
    return ExitVerdict(failed[0].code, "; ".join(f"{verdict.reason} [{verdict.code}]" for verdict in failed))


def locust_verdict(environment, greenlet_died: bool) -> ExitVerdict | None:
    """Locust's own rule (``locust.main``'s ``shutdown``), which a ``process_exit_code`` set by the tool would replace:
    a code a listener of ``quitting`` already set; else ``--exit-code-on-error`` (1 by default) when a request failed
    or a user raised; else 2 after an unhandled exception in a greenlet (``greenlet_died``); else nothing."""
    if environment.process_exit_code is not None:
        return ExitVerdict(environment.process_exit_code, "set by a listener of Locust's quitting event")
    runner = environment.runner
    failures = environment.stats.total.num_failures
    exceptions = sum(row["count"] for row in runner.exceptions.values()) if runner is not None else 0
    if (runner is not None and runner.errors) or exceptions:
        code = getattr(environment.parsed_options, "exit_code_on_error", REQUESTS_FAILED)
        said = [f"{failures:,} requests failed"] if failures else []
        said += [f"{exceptions:,} exceptions in users"] if exceptions else []
        return ExitVerdict(code, " and ".join(said) or "requests failed")
    if greenlet_died:
        return ExitVerdict(GREENLET_DIED, "an unhandled exception in a greenlet")
    return None
