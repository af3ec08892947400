"""The put workload with a test-only breach: one second into the run, the run's ``on_breach`` is called twice, as
the live judging does when a level fails (the capture must start once)."""

from locust import events

import gevent

from etcd_users import EtcdPutUser  # noqa: F401  (Locust collects the User classes from this module)
from etcd_users.core.run_context import run_context
from etcd_users.members.seen import MembersSeen

TRIGGER_AFTER_SECONDS = 1.0
WHY = "test trigger: put p99 above 0.001 ms"


@events.test_start.add_listener
def _breach_soon(environment, **_kwargs) -> None:
    def breach() -> None:
        gevent.sleep(TRIGGER_AFTER_SECONDS)
        context = run_context(environment)  # the members' monitoring left its on_breach there at init
        context.get(MembersSeen).on_breach(WHY)
        context.get(MembersSeen).on_breach(WHY + " (again)")

    gevent.spawn(breach)
