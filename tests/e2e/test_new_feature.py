"""A new workload as docs/contributing.md's worked example adds one: one new folder under etcd_users/features/ and one
line in FEATURES (the second file it touches, the docs' workload table, is not part of the package). Its files as the
page prints them, in a copy of the package, registered, checked by the house's rules (tests/unit/test_house.py on the
copy) and run for 3 s against a local member: its option in ``python -m etcd_users``, its line at the stop, its
requests in Locust's CSV."""

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, run_locust

pytestmark = pytest.mark.e2e

PAGE = REPO / "docs" / "contributing.md"


def page_files() -> dict[str, str]:
    """The worked example's files as the page prints them: a line naming the file, then its block."""
    blocks = re.findall(
        r"^`(etcd_users/features/toy/[\w/]+\.py)`[^\n]*\n(?:[^\n]+\n)*?\n```python\n(.*?)```",
        PAGE.read_text(),
        re.M | re.S,
    )
    return dict(blocks)


def toy_package(root: Path) -> list[str]:
    """A copy of the package with the toy feature in it; the files of the copy that differ from the package's."""
    shutil.copytree(REPO / "etcd_users", root / "etcd_users", ignore=shutil.ignore_patterns("__pycache__"))
    files = page_files()
    assert sorted(files) == [f"etcd_users/features/toy/{name}.py" for name in ("__init__", "options", "users")]
    (root / "etcd_users" / "features" / "toy").mkdir()
    for path, text in files.items():
        (root / path).write_text(text)
    registry = root / "etcd_users" / "core" / "features.py"
    text = registry.read_text()
    registry.write_text(text.replace('    "rate_held",\n)', '    "rate_held",\n    "toy",\n)', 1))
    result = subprocess.run(
        ["diff", "-rq", str(REPO / "etcd_users"), str(root / "etcd_users"), "-x", "__pycache__"],
        capture_output=True,
        text=True,
    )
    return result.stdout.splitlines()


def house_rules(root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """tests/unit/test_house.py run on the copy at ``root``: its package, and the rest of the repository it reads."""
    for folder in ("shapes", "analysis", "benchmarks", "docs"):
        if not (root / folder).exists():
            shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "locustfile.py", root / "locustfile.py")
    (root / "tests" / "unit").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "tests" / "unit" / "test_house.py", root / "tests" / "unit" / "test_house.py")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_house.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_new_workload_is_one_folder_and_one_line_and_runs_the_first_time(etcd1, tmp_path):
    changed = toy_package(tmp_path)
    assert len(changed) == 2, changed  # the new folder, and FEATURES
    assert any("Only in" in line and line.endswith(": toy") for line in changed), changed
    assert any("core/features.py" in line and "differ" in line for line in changed), changed
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    # the example keeps the house's rules as printed; its base user taken from the top would break them
    house = house_rules(tmp_path, env)
    assert house.returncode == 0, house.stdout[-3000:] + house.stderr[-2000:]
    assert " passed" in house.stdout and " failed" not in house.stdout, house.stdout[-2000:]
    users = tmp_path / "etcd_users" / "features" / "toy" / "users.py"
    printed = users.read_text()
    users.write_text(
        printed.replace("from etcd_users.user_base.user import EtcdUser", "from etcd_users.users import EtcdUser")
    )
    broken = house_rules(tmp_path, env)
    assert broken.returncode == 1, broken.stdout[-3000:]
    assert "etcd_users.features.toy.users -> etcd_users.users" in broken.stdout, broken.stdout[-3000:]
    users.write_text(printed)

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
