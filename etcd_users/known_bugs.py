"""etcd versions with known correctness bugs: a member's version is checked at the pre-flight, and a failed audit
names the bug its members' version may have met. Pure but for its warning: nothing of Locust or gRPC.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

logger = logging.getLogger(__name__)

Version = tuple[int, int, int]
DATA, WATCH = "data", "watch"
CONSEQUENCES = {  # the pre-flight's warning: what a run on such a version may find
    DATA: "members killed or restored under load can diverge",
    WATCH: "a progress notification can come before events it says were sent",
}


@dataclass(frozen=True)
class KnownBug:
    first: Version  # the first version with the bug
    last: Version  # the last one
    fixed_in: str
    what: str  # what an operator sees, in a few words
    issue: str  # etcd's issue
    check: str = DATA  # the audit's check it can fail: DATA (the members' data, acknowledged writes) or WATCH

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
    # etcd answered a progress request on its own channel, beside the events still queued for the stream
    KnownBug(
        (3, 4, 0),
        (3, 4, 24),
        "3.4.25",
        "a requested watch progress notification can reach the client before events at or below its revision",
        "#15220",
        WATCH,
    ),
    KnownBug(
        (3, 5, 0),
        (3, 5, 7),
        "3.5.8",
        "a requested watch progress notification can reach the client before events at or below its revision",
        "#15220",
        WATCH,
    ),
)


def parse_version(version: str) -> Version | None:
    """``3.5.1`` (or ``v3.5.1``, ``3.5.1-rc.0``) as a tuple; None for anything else."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def known_bugs(version: str, checks: frozenset[str] = frozenset(CONSEQUENCES)) -> list[KnownBug]:
    """The known bugs of ``version`` that can fail one of ``checks`` (all of them by default)."""
    return [bug for bug in KNOWN_BUGS if bug.check in checks and bug.applies_to(version)]


def known_bug_names(versions: list[str], checks: frozenset[str] = frozenset(CONSEQUENCES)) -> list[str]:
    """``etcd 3.5.1: known bugs #13766, #13514`` for each distinct version that has any: short, for a verdict's line."""
    names = []
    for version in dict.fromkeys(v for v in versions if v):
        bugs = known_bugs(version, checks)
        if bugs:
            plural = "s" if len(bugs) > 1 else ""
            names.append(f"etcd {version.lstrip('v')}: known bug{plural} {', '.join(bug.issue for bug in bugs)}")
    return names


def known_bug_lines(versions: list[str], checks: frozenset[str] = frozenset(CONSEQUENCES)) -> list[str]:
    """One line per known bug of each distinct version, in the order given."""
    lines: list[str] = []
    for version in dict.fromkeys(v for v in versions if v):
        lines.extend(bug.line(version) for bug in known_bugs(version, checks))
    return lines


# the disruptions that start a member again on its data (etcd_users.target.action_table): the data bugs'
# cause
RESTARTING_ACTIONS = frozenset({"kill", "restart", "upgrade", "rollback", "replace"})


def run_line(version: str, restarts: bool) -> str | None:
    """One line of what ``version``'s known bugs mean for a run that does (``restarts``) or does not start members
    again on their data; None when it has none."""
    bugs = known_bugs(version)
    if not bugs:
        return None
    families = []
    for check, consequence in CONSEQUENCES.items():
        issues = [bug.issue for bug in bugs if bug.check == check]
        if issues:
            families.append(f"{consequence} ({', '.join(issues)})")
    data = any(bug.check == DATA for bug in bugs)
    if not data:
        meaning = "a watch check that fails on that is etcd's bug, and the audit's line names it"
    elif restarts:
        meaning = (
            "this run restarts members, so a divergence the audit finds may be etcd's bug, which its line then names"
        )
    else:
        meaning = "this run restarts no member: only a member killed from outside could diverge"
    return (
        f"etcd {version.lstrip('v')} has {'known bugs' if len(bugs) > 1 else 'a known bug'}: {'; '.join(families)}; "
        f"{meaning} (Getting started: "
        "etcd's known bugs)"
    )


def warn_known_bugs(versions: list[str], restarts: bool = False) -> None:
    """One warning per version with known bugs, at start: what they mean for this run."""
    for version in dict.fromkeys(v for v in versions if v):
        line = run_line(version, restarts)
        if line is not None:
            logger.warning("%s", line)
