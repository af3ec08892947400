"""The state of one process for a run, kept on Locust's environment (``environment.etcd_run``): ``run_context``.

One context per process and environment, made at Locust's ``init`` (``attach``) with the process's ``Role``, decided
there once from the runner. What the process's parts share during a run lives on it as typed slots, each owned by
the feature that defines its type (``run_context(environment).get(MembersSeen)``): the session
(``etcd_users.session.ProcessSession``), the audit's record, the watchers' state, the members seen,
the gates' results, the disruptions' windows. Core knows none of them.
"""

from etcd_users.core.role import Role
from etcd_users.core.slots import Slots

ATTRIBUTE = "etcd_run"


class RunContext(Slots):
    def __init__(self, environment, role: Role) -> None:
        super().__init__()
        self.environment = environment
        self.role = role


def attach(environment, runner) -> RunContext:
    """At Locust's ``init``: the process's context, with its role decided from ``runner``."""
    context = RunContext(environment, Role.of(runner))
    setattr(environment, ATTRIBUTE, context)
    return context


def run_context(environment) -> RunContext:
    """The process's context; made from the environment's runner if ``init`` has not made it (a test's environment)."""
    context = getattr(environment, ATTRIBUTE, None)
    return context if context is not None else attach(environment, environment.runner)
