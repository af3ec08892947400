"""Every slow second explained: a timeline of what the members and the client did, one second at a time, and at the
run's end its worst seconds, each with the events around it (``tail:`` lines, ``PREFIX_tail.json``, the summary's
``tail``).

- ``member_signals``: the families of a member's /metrics that explain a slow second, read and compared scrape to
  scrape (pure); ``scrape``: every member's page each second during a run (up to ``MAX_MEMBERS``);
- ``client_signals``: the client's own: Python's GC pauses, the users' and the transport's threads waking late, the
  pool leaving out a member and taking it back;
- ``seconds``: the exact latency per second (P99, requests, errors) as the latency store merges it;
- ``attribution``: the worst seconds and their causes, the precondition of the source reports (pure);
- ``hooks``: the feature's part of a run.
"""

from etcd_users.core.features import Feature
from etcd_users.features.tail.options import TailSettings

FEATURE = Feature(
    "tail of a run",
    TailSettings,
    hooks="hooks:TailHooks",
    docs="tail.md",
    public=("events", "member_signals", "scrape"),
)
