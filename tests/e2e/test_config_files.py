"""The tool's options from Locust's configuration files, as docs/getting-started.md shows them: a ``locust.conf``
given with ``--config``, and ``[tool.locust]`` of a ``pyproject.toml`` in the working directory. Real short runs
against a real member; what each run took is read back from its ``PREFIX_summary.json`` and its exact latency rows.
"""

import json
from pathlib import Path

import pytest
from support import REPO, read_csv_rows, run_locust

pytestmark = pytest.mark.e2e


def options_of(prefix: Path) -> dict:
    return json.loads(prefix.with_name(prefix.name + "_summary.json").read_text())["options"]


def names_of(prefix: Path) -> set[str]:
    return {row["Name"] for row in read_csv_rows(prefix.with_name(prefix.name + "_latency.csv"))}


@pytest.mark.slow
def test_a_locust_conf_gives_the_tool_s_options_switches_and_lists_included(etcd1, tmp_out):
    config = tmp_out / "locust.conf"
    config.write_text(
        "# Locust's own settings and the tool's, as on the command line without the leading dashes\n"
        "locustfile = locustfile.py\n"
        "headless = true\n"
        "only-summary = true\n"
        "users = 2\n"
        "spawn-rate = 2\n"
        "run-time = 2s\n"
        f"etcd-endpoints = {','.join(etcd1.endpoints)}\n"
        "etcd-prefix = /test-config-file/\n"
        "etcd-val-size = 100\n"
        "etcd-key-space-size = 50\n"
        "etcd-consistency = s\n"
        "etcd-mix = put:60,range:40\n"
        "etcd-cleanup = true\n"
        "etcd-sla = put:p99<30s,errors<50%\n"
    )
    prefix = tmp_out / "conf"
    result = run_locust("--config", str(config), "--csv", str(prefix), "EtcdMixedUser", timeout=90)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output[-3000:]
    options = options_of(prefix)
    assert options["config"] == str(config)
    assert (options["etcd_prefix"], options["etcd_val_size"], options["etcd_key_space_size"]) == (
        "/test-config-file/",
        100,
        50,
    )
    assert (options["etcd_consistency"], options["etcd_mix"]) == ("s", "put:60,range:40")
    assert options["etcd_cleanup"] is True and options["etcd_sla"] == "put:p99<30s,errors<50%"
    assert options["num_users"] == 2 and options["etcd_endpoints"] == ",".join(etcd1.endpoints)
    assert {"put", "range/serializable"} <= names_of(prefix) and "delete" not in names_of(prefix)  # the mix, the reads
    assert "SLA put p99 < 30s: " in output  # the gates came from the file too
    assert "deleted " in output and "under '/test-config-file/'" in output  # the switch took effect


@pytest.mark.slow
def test_tool_locust_of_a_pyproject_toml_in_the_working_directory_gives_the_options_the_command_line_wins(
    etcd1, tmp_out
):
    (tmp_out / "pyproject.toml").write_text(
        "[tool.locust]\n"
        f'locustfile = "{REPO / "locustfile.py"}"\n'
        "headless = true\n"
        "only-summary = true\n"
        "users = 2\n"
        'run-time = "2s"\n'
        f'etcd-endpoints = "{",".join(etcd1.endpoints)}"\n'
        'etcd-prefix = "/test-pyproject/"\n'
        "etcd-key-size = 64\n"
        "etcd-cleanup = true\n"
        "etcd-allow-existing = false\n"
    )
    # the command line wins over the environment, which wins over the file
    environment = {"LOCUST_ETCD_KEY_SIZE": "80", "LOCUST_ETCD_PREFIX": "/test-pyproject-env/"}
    args = ("--csv", "out/run", "--etcd-prefix", "/test-pyproject-cli/", "EtcdPutUser")
    result = run_locust(*args, cwd=tmp_out, env=environment, timeout=90)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output[-3000:]
    options = options_of(tmp_out / "out" / "run")
    assert (options["etcd_prefix"], options["etcd_key_size"]) == ("/test-pyproject-cli/", 80)
    assert options["etcd_cleanup"] is True and options["etcd_allow_existing"] is False
    assert options["num_users"] == 2 and options["run_time"] == 2


def test_a_toml_array_is_refused_a_comma_separated_string_is_the_list(tmp_out):
    (tmp_out / "pyproject.toml").write_text(
        '[tool.locust]\nlocustfile = "{}"\netcd-endpoints = ["http://127.0.0.1:1", "http://127.0.0.1:2"]\n'.format(
            REPO / "locustfile.py"
        )
    )
    result = run_locust("--headless", "-t", "1s", "EtcdPutUser", cwd=tmp_out, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "etcd-endpoints can't be set to a list" in result.stderr
