"""The table of disruption actions (``etcd_users.target.action_table``): each action has its function, of
the kind the runner calls, and the help, the option reference and docs/disruptions.md list the table's actions."""

import locust  # noqa: F401  (gevent patching before anything else loads: the actions import Locust)

import inspect
from dataclasses import replace
from pathlib import Path

import pytest

from etcd_users.__main__ import markdown
from etcd_users.features.disruptions.options import DisruptionSettings
from etcd_users.target.action_table import ACTIONS, help_text, markdown_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "disruptions.md"


@pytest.mark.parametrize("name", list(ACTIONS))
def test_each_action_has_a_function_the_runner_can_call(name):
    action = ACTIONS[name]
    function = action.load()
    parameters = list(inspect.signature(function).parameters)
    if action.local_only:  # a signal to the local etcd's process, in the runner's greenlet
        calls = ["call"] if action.calls_etcd else []  # and the Cluster API on the master's connections
        assert parameters == ["cluster", "statuses", "disruption", "done", *calls]
        assert not inspect.iscoroutinefunction(function)
    elif action.outside:  # a command of the user's, in the runner's greenlet
        assert parameters == ["command", "endpoints", "disruption", "done"]
        assert not inspect.iscoroutinefunction(function)
    elif action.calls_etcd:  # the Cluster API on the master's connections, retried in the runner's greenlet
        assert parameters == ["statuses", "disruption", "done", "call"]
        assert not inspect.iscoroutinefunction(function)
    else:  # a coroutine on the master's own connections
        assert parameters == ["pool", "disruption", "done"] and inspect.iscoroutinefunction(function)


def test_an_action_without_its_function_fails_to_load():
    lacking = replace(ACTIONS["defrag"], name="reboot", function="etcd_users.features.disruptions.actions:reboot")
    with pytest.raises(AttributeError, match="reboot"):
        lacking.load()


def test_the_help_the_reference_and_the_docs_list_the_table_s_actions():
    (schedule,) = [option for option in DisruptionSettings.options() if option.flag == "--etcd-disrupt"]
    assert help_text() in schedule.help
    assert all(name in help_text() for name in ACTIONS)
    assert markdown_table() in markdown()
    assert markdown_table() in DOCS.read_text(), (
        f"docs/disruptions.md's table of actions is not the code's:\n{markdown_table()}"
    )
