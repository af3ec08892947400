"""``locust-etcd``'s command line (``etcd_users.cli.locust_arguments``): what it hands to Locust, what it refuses."""

import pytest

from etcd_users.cli import LOCUSTFILE, SHAPES, UsageError, locust_arguments


def test_every_argument_but_shape_goes_to_locust_unchanged_after_the_packaged_locustfile():
    argv = ["--headless", "-u", "8", "--etcd-user-rate", "10", "--shape-time-scale", "0.01", "EtcdPutUser"]
    assert locust_arguments(argv) == ["-f", str(LOCUSTFILE), *argv]
    shaped = locust_arguments(["--headless", "--shape", "step-spike", "--shape-max-qps", "40", "EtcdPutUser"])
    assert shaped == [
        "-f",
        f"{LOCUSTFILE},{SHAPES['step-spike']}",
        "--headless",
        "--shape-max-qps",
        "40",
        "EtcdPutUser",
    ]
    assert locust_arguments(["--shape=capacity"]) == ["-f", f"{LOCUSTFILE},{SHAPES['capacity']}"]
    assert locust_arguments(["--", "-f", "--shape"]) == ["-f", str(LOCUSTFILE), "--", "-f", "--shape"]


def test_the_packaged_files_exist():
    assert LOCUSTFILE.is_file()
    assert all(path.is_file() for path in SHAPES.values())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shape", "x"], "--shape: 'x' is not one of: step-spike, ladder, sine, capacity"),
        (["--shape"], "--shape: expected a name, one of: step-spike, ladder, sine, capacity"),
        (["--shape", "sine", "--shape=ladder"], "--shape: given twice; a run has one shape"),
        (["-f", "mine.py"], "-f: locust-etcd chooses the locustfile (its own workloads); for yours, run locust -f "),
        (["-fmine.py"], "-f: "),
        (["--locustfile=mine.py"], "--locustfile: "),
    ],
)
def test_bad_input_is_one_line(argv, message):
    with pytest.raises(UsageError) as raised:
        locust_arguments(argv)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)
