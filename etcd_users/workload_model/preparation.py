"""What a run writes before its measured window: the read key space, a Kubernetes prefill. Not measured, not in the
stats; its keys and time are in the log and in the run summary (``preparation``), and an empty run says if it was the
cause. Pure: no Locust.
"""

from __future__ import annotations

from dataclasses import dataclass

KEY_SPACE = "key_space"  # etcd_users.key_space_fill
KUBERNETES = "kubernetes"  # etcd_users.features.kubernetes.run

_SHOWN = {KEY_SPACE: "the key space fill", KUBERNETES: "the Kubernetes prefill"}


@dataclass
class Preparation:
    """One preparation of the current (or last) run; ``written`` and ``error`` change while it runs."""

    what: str  # KEY_SPACE or KUBERNETES
    keys: int  # the keys the run starts with
    written: int = 0  # by this preparation (the others existed)
    seconds: float = 0.0
    error: str = ""  # why it stopped short; empty when every key is there
    inside_run: bool = False  # done at a run's start (the web UI), inside a run time set by the form

    @property
    def shown(self) -> str:
        return _SHOWN.get(self.what, self.what)

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def to_dict(self) -> dict:
        """The summary's ``preparation.<what>`` (``etcd_users.files.SUMMARY_PREPARATION_KEYS``)."""
        return {
            "keys": self.keys,
            "written": self.written,
            "seconds": round(self.seconds, 3),
            "error": self.error or None,
        }
