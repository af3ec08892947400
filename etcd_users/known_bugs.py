"""etcd versions with known correctness bugs: a member's version is checked at the pre-flight, and a failed audit
names the bug its members' version may have met. Pure but for its warning: nothing of Locust or gRPC.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Version = tuple[int, int, int]


@dataclass(frozen=True)
class KnownBug:
    first: Version  # the first version with the bug
    last: Version  # the last one
    fixed_in: str
    what: str  # what an operator sees, in a few words
    issue: str  # etcd's issue

    def applies_to(self, version: str) -> bool:
        parsed = parse_version(version)
        return parsed is not None and self.first <= parsed <= self.last

    def line(self, version: str) -> str:
        where = f"etcd issue {self.issue}, fixed in {self.fixed_in}"
        return f"etcd {version.lstrip('v')} has a known bug: {self.what} ({where})"


KNOWN_BUGS = (
    KnownBug(
        (3, 5, 0),
        (3, 5, 2),
        "3.5.3",
        "a member killed under load can skip an applied entry, and its data then differ from the other members'",
        "#13766",
    ),
    KnownBug(
        (3, 5, 0),
        (3, 5, 2),
        "3.5.3",
        "a member restored from a snapshot, or rolled back to 3.4 and upgraded again, can diverge from the others",
        "#13514",
    ),
)


def parse_version(version: str) -> Version | None:
    """``3.5.1`` (or ``v3.5.1``, ``3.5.1-rc.0``) as a tuple; None for anything else."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def known_bugs(version: str) -> list[KnownBug]:
    return [bug for bug in KNOWN_BUGS if bug.applies_to(version)]


def known_bug_names(versions: list[str]) -> list[str]:
    """``etcd 3.5.1: known bugs #13766, #13514`` for each distinct version that has any: short, for a verdict's line."""
    names = []
    for version in dict.fromkeys(v for v in versions if v):
        bugs = known_bugs(version)
        if bugs:
            plural = "s" if len(bugs) > 1 else ""
            names.append(f"etcd {version.lstrip('v')}: known bug{plural} {', '.join(bug.issue for bug in bugs)}")
    return names


def known_bug_lines(versions: list[str]) -> list[str]:
    """One line per known bug of each distinct version, in the order given."""
    lines: list[str] = []
    for version in dict.fromkeys(v for v in versions if v):
        lines.extend(bug.line(version) for bug in known_bugs(version))
    return lines


def warn_known_bugs(versions: list[str]) -> None:
    """A warning per version with known bugs, at start: what a kill or restart test may then find."""
    for name in known_bug_names(versions):
        logger.warning("%s: members killed or restored under load can diverge (see the audit's docs)", name)
