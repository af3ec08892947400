"""The run's context: one per process and environment, its role decided once, its parts replaced run by run."""

from locust.env import Environment
from locust.event import Events
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from etcd_users.audit_trail.ledger import Ledger
from etcd_users.audit_trail.record import AuditState, RunRecord
from etcd_users.core.features import OPTIONS
from etcd_users.core.role import Role
from etcd_users.core.run_context import ATTRIBUTE, RunContext, attach, run_context
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.disruption_windows import DisruptionWindows
from etcd_users.run_state.gate_state import GateState
from etcd_users.run_state.watchers import ProcessWatchers, WatchTallies
from etcd_users.session import ProcessSession
from etcd_users.settings import settings_from_options

REPO = Path(__file__).resolve().parents[2]


def options(**values) -> argparse.Namespace:
    return argparse.Namespace(**{**{option.dest: option.default for option in OPTIONS}, **values})


def runner_of(kind: type):
    """A runner of ``kind`` as ``isinstance`` sees it, without the sockets a master or worker opens."""
    skipped = {"__init__": lambda self: None, "__del__": lambda self: None}
    unstarted = type(f"Unstarted{kind.__name__}", (kind,), skipped)
    return unstarted()


@pytest.mark.parametrize(
    ("kind", "role", "judges", "runs_users"),
    [
        (MasterRunner, Role.MASTER, True, False),
        (WorkerRunner, Role.WORKER, False, True),
        (LocalRunner, Role.SINGLE, True, True),
        (None, Role.SINGLE, True, True),  # an environment without a runner behaves as a single process
    ],
)
def test_the_role_is_decided_from_the_runner(kind, role, judges, runs_users):
    decided = Role.of(runner_of(kind) if kind is not None else None)
    assert decided is role
    assert (decided.judges, decided.runs_users) == (judges, runs_users)
    assert decided.is_master is (role is Role.MASTER) and decided.is_worker is (role is Role.WORKER)


def test_the_context_lives_on_the_environment_and_keeps_the_role_decided_at_init():
    environment = Environment(events=Events())
    context = attach(environment, runner_of(WorkerRunner))
    assert getattr(environment, ATTRIBUTE) is context and run_context(environment) is context
    environment.runner = runner_of(MasterRunner)  # decided once: a later look does not decide again
    assert run_context(environment).role is Role.WORKER


def test_an_environment_without_init_gets_a_context_from_its_runner():
    environment = Environment(events=Events())
    environment.runner = runner_of(MasterRunner)
    context = run_context(environment)
    assert isinstance(context, RunContext) and context.role is Role.MASTER
    assert run_context(environment) is context


def test_two_environments_keep_their_own_state():
    first, second = Environment(events=Events()), Environment(events=Events())
    run_context(first).get(AuditState).record = RunRecord(Ledger(b"/locust-etcd/", 32, 100))
    run_context(first).get(ProcessWatchers).newest = 42
    assert run_context(second).get(AuditState).record is None and run_context(second).get(ProcessWatchers).newest == 0
    assert isinstance(run_context(second).get(ProcessWatchers), ProcessWatchers)


class Connections:
    """A session's stand-in: its settings, and whether it was closed."""

    def __init__(self, settings) -> None:
        self.settings = settings
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_new_run_with_other_options_drops_the_session_and_quit_closes_it():
    slot = RunContext(Environment(events=Events()), Role.SINGLE).get(ProcessSession)
    settings = settings_from_options(options())
    other = settings_from_options(options(etcd_val_size=2048))
    session = slot._session = Connections(settings)
    companion = slot.companion(Connections, lambda: Connections(settings))  # closed with the session
    slot.drop_if_changed(settings)  # the same options: the same connections
    assert slot._session is session and session.closed == 0
    slot.drop_if_changed(other)  # the web UI's form changed them: the next user reconnects
    assert slot._session is None and session.closed == 1 and companion.closed == 1
    assert slot.companion_if_any(Connections) is None
    kept = slot._session = Connections(other)
    slot.close()
    slot.close()  # quit closes once
    assert slot._session is None and kept.closed == 1


def test_what_features_share_has_defaults_before_any_run():
    context = RunContext(Environment(events=Events()), Role.MASTER)
    assert context.get(GateState).lost_workers == [] and context.get(WatchTallies).final is None
    assert context.get(DisruptionWindows).so_far() == ([], False) and context.get(DisruptionWindows).final() == []
    assert context.get(MembersSeen).monitoring is None


def test_importing_the_users_makes_no_bridge():
    # --processes forks after the import: a bridge made before it would give the children no loop thread
    code = "import etcd_users.users; from etcd_users.transport import bridge; print(bridge._bridge is None)"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "True", result.stderr
