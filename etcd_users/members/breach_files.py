"""Where a breach capture puts its files: ``PREFIX_breach/`` and its ``capture.json`` (the monitoring writes them,
the end of the run lists them). Pure."""

from pathlib import Path

from etcd_users.files import BREACH_CAPTURE, BREACH_DIRECTORY_SUFFIX


def capture_directory(prefix: str) -> Path:
    return Path(prefix + BREACH_DIRECTORY_SUFFIX)


def capture_file(prefix: str) -> str:
    """``PREFIX_breach/capture.json``: what a capture took, and where."""
    return str(capture_directory(prefix) / BREACH_CAPTURE)
