"""A new workload as docs/reference/layout.md's worked example adds one: one new folder under etcd_users/features/ and
one line in FEATURES (the second file it touches, the docs' workload table, is not part of the package). Built in a
copy of the package, registered, and run for 3 s against a local member: its option in ``python -m etcd_users``, its
line at the stop, its requests in Locust's CSV."""

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, run_locust

pytestmark = pytest.mark.e2e

TOY_INIT = '''"""A toy workload: random deletes of keys of the key space, and a line at the test's stop."""

from etcd_users.core.features import Feature
from etcd_users.features.toy.options import ToySettings

FEATURE = Feature(
    "toy workload", ToySettings, hooks="users:ToyHooks", users=("users:EtcdToyUser",), docs="workloads.md"
)
'''

TOY_OPTIONS = '''"""The toy workload's one option."""

from dataclasses import dataclass

from etcd_users.core.declare import OptionGroup, option


@dataclass(frozen=True)
class ToySettings(OptionGroup):
    TITLE = "toy workload"
    DESCRIPTION = "A user that deletes random keys"

    ratio: float = option("--etcd-toy-ratio", 0.5, "the share of a toy user's requests that delete a key")
'''

# the user and its hooks in one module that imports the users: the layout once made this a circular import
TOY_USERS = '''"""The toy user and its hooks, in one module."""

import logging
import random

from locust import task

from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.features.toy.options import ToySettings
from etcd_users.users import EtcdUser


class EtcdToyUser(EtcdUser):
    @task
    def delete_or_put(self) -> None:
        keys = self.etcd.keys
        if random.random() < ToySettings.from_options(self.environment.parsed_options).ratio:
            self.etcd.delete(keys.next_key())
        else:
            self.etcd.put(keys.next_write_key(), keys.value)


class ToyHooks(FeatureHooks):
    def on_test_stop(self, environment, **_kwargs) -> None:
        ratio = ToySettings.from_options(environment.parsed_options).ratio
        logging.getLogger(RUN_LOGGER).info("toy: the run stopped with a delete ratio of %s", ratio)
'''


def toy_package(root: Path) -> list[str]:
    """A copy of the package with the toy feature in it; the files of the copy that differ from the package's."""
    shutil.copytree(REPO / "etcd_users", root / "etcd_users", ignore=shutil.ignore_patterns("__pycache__"))
    toy = root / "etcd_users" / "features" / "toy"
    toy.mkdir()
    (toy / "__init__.py").write_text(TOY_INIT)
    (toy / "options.py").write_text(TOY_OPTIONS)
    (toy / "users.py").write_text(TOY_USERS)
    registry = root / "etcd_users" / "core" / "features.py"
    text = registry.read_text()
    registry.write_text(text.replace('    "rate_held",\n)', '    "rate_held",\n    "toy",\n)', 1))
    result = subprocess.run(
        ["diff", "-rq", str(REPO / "etcd_users"), str(root / "etcd_users"), "-x", "__pycache__"],
        capture_output=True,
        text=True,
    )
    return result.stdout.splitlines()


def test_a_new_workload_is_one_folder_and_one_line_and_runs_the_first_time(etcd1, tmp_path):
    changed = toy_package(tmp_path)
    assert len(changed) == 2, changed  # the new folder, and FEATURES
    assert any("Only in" in line and line.endswith(": toy") for line in changed), changed
    assert any("core/features.py" in line and "differ" in line for line in changed), changed
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    reference = subprocess.run(
        [sys.executable, "-m", "etcd_users"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert reference.returncode == 0, reference.stderr
    assert "--etcd-toy-ratio" in reference.stdout and "ETCD_TOY_RATIO" in reference.stdout

    prefix = tmp_path / "out" / "toy"
    result = run_locust(
        "-f",
        str(tmp_path / "etcd_users" / "locustfile.py"),
        "--headless",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "3s",
        "--csv",
        str(prefix),
        "--etcd-endpoints",
        ",".join(etcd1.endpoints),
        "--etcd-prefix",
        "/toy-feature/",
        "--etcd-key-space-size",
        "100",
        "--etcd-toy-ratio",
        "0.25",
        "EtcdToyUser",
        cwd=tmp_path,
        env=env,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "toy: the run stopped with a delete ratio of 0.25" in output
    with open(f"{prefix}_stats.csv", newline="") as rows:
        counts = {row["Name"]: int(row["Request Count"]) for row in csv.DictReader(rows)}
    assert counts.get("delete", 0) > 0 and counts.get("put", 0) > 0, counts
