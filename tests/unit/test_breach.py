"""The names of a breach capture's files, and ``python -m analysis``'s lines about them, from a ``capture.json``
as the capture writes it (the capture itself runs against real members: tests/e2e/test_breach.py)."""

import json

import pytest

from etcd_users.analysis.breach import capture_lines
from etcd_users.features.monitoring.breach import member_directory
from etcd_users.files import BREACH_CAPTURE


@pytest.mark.parametrize(
    "url, directory",
    [
        ("http://127.0.0.1:2379", "127.0.0.1_2379"),
        ("https://etcd-0.etcd.svc:2379", "etcd-0.etcd.svc_2379"),
        ("http://[::1]:2380", "__1_2380"),
    ],
)
def test_a_member_s_directory_is_its_host_and_port_safe_as_a_file_name(url, directory):
    assert member_directory(url) == directory


def test_the_analysis_lists_each_member_s_files_or_why_it_has_none(tmp_path):
    prefix = tmp_path / "run"
    (tmp_path / "run_breach").mkdir()
    document = {
        "why": "put p99 25 ms at step 1",
        "started": "2026-12-01T09:00:00.000Z",
        "finished": "2026-12-01T09:00:11.000Z",
        "profile_seconds": 10.0,
        "members": {
            "127.0.0.1:2379": {
                "directory": "127.0.0.1_2379",
                "files": {"profile": "127.0.0.1_2379/profile.pb.gz", "metrics": "127.0.0.1_2379/metrics.txt"},
                "errors": {},
            },
            "127.0.0.1:2380": {
                "directory": "127.0.0.1_2380",
                "files": {},
                "errors": {"profile": "HTTP 404 Not Found", "metrics": "no answer within 5s"},
            },
        },
    }
    (tmp_path / "run_breach" / BREACH_CAPTURE).write_text(json.dumps(document))
    assert capture_lines(str(prefix)) == [
        f"at the breach (put p99 25 ms at step 1; 2026-12-01T09:00:00.000Z), the members' side in {prefix}_breach/:",
        "- 127.0.0.1:2379: 127.0.0.1_2379/profile.pb.gz, 127.0.0.1_2379/metrics.txt",
        "- 127.0.0.1:2380: no files (not captured: profile: HTTP 404 Not Found; metrics: no answer within 5s)",
    ]
    assert capture_lines(str(tmp_path / "other")) == []  # no capture: nothing to say
    (tmp_path / "run_breach" / BREACH_CAPTURE).write_text("{not json")
    assert capture_lines(str(prefix)) == []
