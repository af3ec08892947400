"""The exit code, decided once from every verdict: the highest wins, and Locust's own rule on the requests is kept."""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust.env import Environment
from locust.event import Events

import argparse
import itertools

import pytest

from etcd_users.core.exit_code import (
    AUDIT_EXIT_CODE,
    GREENLET_DIED,
    REQUESTS_FAILED,
    SLA_EXIT_CODE,
    ExitVerdict,
    decide,
    locust_verdict,
)

AUDIT = ExitVerdict(AUDIT_EXIT_CODE, "the audit failed")
GATES = ExitVerdict(SLA_EXIT_CODE, "1 of 2 gates failed (put p99 < 1us)")


def environment(exit_code_on_error: int = 1, failures: int = 0, exceptions: int = 0) -> Environment:
    """A local run's environment whose requests failed ``failures`` times and whose users raised ``exceptions``."""
    env = Environment(events=Events(), parsed_options=argparse.Namespace(exit_code_on_error=exit_code_on_error))
    runner = env.create_local_runner()
    for _ in range(failures):
        env.stats.log_request("etcd", "put", 1, 0)
        env.stats.log_error("etcd", "put", "etcdserver: mvcc: database space exceeded")
    for _ in range(exceptions):
        runner.log_exception("local", "boom", "Traceback: boom")
    return env


@pytest.mark.parametrize(("audit", "gates", "requests"), itertools.product((False, True), repeat=3))
def test_the_highest_verdict_wins_in_every_combination(audit, gates, requests):
    env = environment(failures=3 if requests else 0)
    verdicts = [AUDIT if audit else None, GATES if gates else None, locust_verdict(env, greenlet_died=False)]
    decided = decide(verdicts)
    assert decided.code == (4 if audit else 3 if gates else 1 if requests else 0)
    said = [("the audit failed [4]", audit), ("1 of 2 gates failed (put p99 < 1us) [3]", gates)]
    said += [("3 requests failed [1]", requests)]
    assert decided.reason == ("; ".join(text for text, failed in said if failed) or "nothing failed")


def test_nothing_failed_is_0():
    assert decide([]) == (0, "nothing failed")
    assert locust_verdict(environment(), greenlet_died=False) is None


@pytest.mark.parametrize("code", [0, 1, 5])
def test_failed_requests_take_exit_code_on_error_as_locust_does(code):
    verdict = locust_verdict(environment(exit_code_on_error=code, failures=2), greenlet_died=False)
    assert verdict == (code, "2 requests failed")
    assert decide([verdict]).code == code  # 0: failed requests do not fail the run, an errors gate may
    assert decide([verdict, GATES]).code == max(code, SLA_EXIT_CODE)


def test_an_exception_in_a_user_counts_as_a_failure_as_in_locust():
    verdict = locust_verdict(environment(exit_code_on_error=7, exceptions=2), greenlet_died=True)
    assert verdict == (7, "2 exceptions in users")


def test_a_greenlet_that_died_is_2_unless_requests_failed():
    assert locust_verdict(environment(), greenlet_died=True) == (GREENLET_DIED, "an unhandled exception in a greenlet")
    assert locust_verdict(environment(failures=1), greenlet_died=True).code == REQUESTS_FAILED


def test_a_code_another_quitting_listener_set_replaces_locust_s_rule_and_joins_the_decision():
    env = environment(failures=1)
    env.process_exit_code = 0  # Locust's rule: a code set by a listener wins over the failed requests
    verdict = locust_verdict(env, greenlet_died=False)
    assert verdict == (0, "set by a listener of Locust's quitting event") and decide([verdict, AUDIT]).code == 4
    env.process_exit_code = 9
    assert decide([locust_verdict(env, greenlet_died=False), AUDIT, GATES]).code == 9
