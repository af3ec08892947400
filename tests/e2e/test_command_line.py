"""What a new user's first commands meet: no class named, a misspelt class, a value that is not a number. Each is one
line on stderr with exit code 2, before anything starts (the lines themselves, pure, are
``tests/unit/test_command_line.py``)."""

import pytest
from checks import refusal_line
from support import HEADLESS, assert_one_line_error, headless_args, run_locust

pytestmark = pytest.mark.e2e

CLASSES = (
    "EtcdDeleteUser, EtcdKubernetesNodeUser, EtcdKubernetesUser, EtcdLeaseUser, EtcdMixedUser, EtcdPutUser, "
    "EtcdRangeUser, EtcdTxnMixedUser, EtcdTxnPutUser, EtcdWatchUser, EtcdWatcherUser, EtcdYcsbUser, "
    "LinearizableRangeUser, "
    "SerializableRangeUser"
)


def test_a_headless_run_that_names_no_class_lists_them_and_exits_2():
    line = refusal_line(run_locust(*HEADLESS, "-u", "1", "-t", "1s", timeout=60))
    assert line == (
        "locust-etcd: error: name the User classes to run at the end of the command line, e.g. EtcdPutUser (with "
        f"none, Locust runs all 14 of locustfile.py); known: {CLASSES}"
    )


def test_a_misspelt_class_gets_the_nearest_name_and_the_list_and_exits_2():
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", "EtcdPutUsr", timeout=60)
    assert_one_line_error(
        result,
        "locust-etcd: error: 'EtcdPutUsr' is not a User class of locustfile.py (did you mean EtcdPutUser?); known: "
        + CLASSES,
    )
    assert "Unknown User(s)" not in result.stderr


def test_a_key_size_that_is_not_a_number_says_so_with_the_tools_prefix():
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", "--etcd-key-size", "abc", "EtcdPutUser", timeout=60)
    assert_one_line_error(result, "locust-etcd: error: --etcd-key-size: 'abc' is not a whole number; give one such as")


@pytest.mark.slow
def test_a_locustfile_of_one_class_runs_it_unnamed(etcd1, tmp_out):
    args = headless_args(etcd1, tmp_out / "run", "--etcd-cleanup", users=2, seconds=1)
    args[1] = "tests/locustfiles/single_class.py"
    result = run_locust(*args, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert '"EtcdPutUser": 2' in result.stderr  # Locust's "All users spawned" line
