"""The web UI's "etcd tail" tab: the run's worst seconds so far, each with the events beside it, refreshed with the
page's own poll of ``/stats/requests`` (every 2 s), through Locust's extension hooks as the other etcd tabs.

The etcd tabs' own ``extended_stats`` keep what this adds (``etcd_users.features.webui.tabs``); the table is computed
at most every 5 s whatever the number of open pages.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from flask import request

from etcd_users.features.tail.events import UNEXPLAINED

logger = logging.getLogger(__name__)

TAB = "etcd-tail"
TITLE = "etcd tail"
MAX_AGE_S = 5.0  # an hour of events ranked again takes tens of ms: not at every poll of every open page
HINT = "No second measured yet: the worst seconds show here as the run goes, each with the events beside it"
TABLE = {
    "key": TAB,
    "structure": [
        {"key": "name", "title": "Second"},
        {"key": "p99", "title": "P99 (ms)"},
        {"key": "requests", "title": "Requests"},
        {"key": "errors", "title": "Errors"},
        {"key": "beside", "title": "Beside it (a coincidence in time, not a proof)"},
    ],
}


def rows(tail: dict) -> list[dict[str, str]]:
    """The tab's rows from a report (``attribution.report``)."""
    found = []
    for item in tail.get("seconds") or ():
        named = [
            cause["cause"] + (f" on {cause['member']}" if cause["member"] else "")
            for cause in item["causes"]
            if cause["cause"] != UNEXPLAINED
        ]
        found.append(
            {
                "name": f"s {item['second']} ({time.strftime('%H:%M:%S', time.gmtime(item['at']))} UTC)",
                "p99": _p99(item),
                "requests": f"{item['requests']:,}",
                "errors": f"{item['errors']:,}",
                "beside": "; ".join(dict.fromkeys(named)) or UNEXPLAINED,
            }
        )
    return found or [{"name": HINT, "p99": "", "requests": "", "errors": "", "beside": ""}]


def _p99(item: dict) -> str:
    if item.get("waited_ms"):
        return f"none ended ({item['waited_ms'] / 1000:.3f} s on the wire)"
    return "-" if item["p99_ms"] is None else f"{item['p99_ms']:.3f}"


def install(environment, web_ui, report_so_far: Callable[[], dict]) -> None:
    """The tab on ``web_ui``: its declaration, and its rows added to the page's poll."""
    base = getattr(environment.parsed_options, "web_base_path", "") or ""
    args = web_ui.template_args
    args["extended_tabs"] = [*args.get("extended_tabs", ()), {"title": TITLE, "key": TAB}]
    args["extended_tables"] = [*args.get("extended_tables", ()), TABLE]
    cached: list = [0.0, None]

    def data() -> list[dict[str, str]]:
        if cached[1] is None or time.monotonic() - cached[0] > MAX_AGE_S:
            cached[:] = [time.monotonic(), rows(report_so_far())]
        return cached[1]

    @web_ui.app.after_request
    def add_tail(response):
        if request.path != f"{base}/stats/requests" or response.status_code != 200 or not response.is_json:
            return response
        try:
            payload = response.get_json()
            # Locust may hand back the same response again (memoized): the tab's table replaced, never added twice
            others = [table for table in payload.get("extended_stats", ()) if table.get("key") != TAB]
            payload["extended_stats"] = [*others, {"key": TAB, "data": data()}]
            response.set_data(json.dumps(payload))
        except Exception:  # the page must keep its own stats whatever ours do
            logger.exception("etcd tail tab: could not add its table")
        return response
