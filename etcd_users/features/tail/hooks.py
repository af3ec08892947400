"""The tail's part of a run: the members scraped each second and the client's signals while the run goes, its worst
seconds explained at the end (``PREFIX_tail.json`` before the summary reads it, the ``tail:`` lines after the exact
table).

Every process notes its client's events (``client_signals``); a worker hands its own to the master with its reports.
The master (or the single process) also scrapes the members (``scrape``), turns each second of client CPU that wanted
a whole core into a ``client-cpu`` event, reads the disruptions' windows at the end and judges the durations'
spikes against the run's own medians (``attribution``).
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import json
import logging
import os
import time

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.tail import attribution, live_tab
from etcd_users.features.tail.client_signals import ClientSignals
from etcd_users.features.tail.events import DISRUPTION, Event, clock
from etcd_users.features.tail.scrape import MemberScrape, member_name, start_scrape
from etcd_users.features.tail.seconds import SecondsKept
from etcd_users.files import CLIENT_BOUND_PCT, LOCAL_PROCESS, MASTER_PROCESS, SUFFIXES
from etcd_users.latency.client_cpu import ClientCpu, Row
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.disruption_windows import DisruptionWindows

logger = logging.getLogger(__name__)
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary and the exact table

REPORT_KEY = "etcd_tail"


def disruption_events(windows: list[dict]) -> list[Event]:
    """The tool's own disruptions, each from its start to its end."""
    found = []
    for window in windows:
        started, finished = window.get("started_at"), window.get("finished_at")
        if started is None:
            continue
        ended = finished if finished is not None else started
        outcome = "done" if window.get("ok") else (window.get("error") or window.get("result") or "unfinished")
        evidence = f"the tool's {window.get('item')} from {clock(started)} to {clock(ended)} ({outcome})"
        members = ",".join(member_name(str(member)) for member in window.get("members") or ()) or "cluster"
        found.append(Event(ended, DISRUPTION + str(window.get("action")), members, evidence, since=started, size=1.0))
    return found


class TailHooks(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.environment = None
        self.seconds = SecondsKept()
        self.signals: ClientSignals | None = None
        self.scrape: MemberScrape | None = None
        self.judges = False
        self.worst = 0
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.events: list[Event] = []
        self.lines: list[str] = []
        self.compactor = None  # the tool's own (--etcd-compact-interval), while the run has one
        tool.get(LatencyRecorder).store.merged_listeners.append(self._on_merged)
        tool.get(ClientCpu).listeners.append(self._on_cpu)

    def _on_merged(self, second, key, histogram, failures) -> None:
        if self.judges and self.worst:
            self.seconds.add(second, key, histogram, failures)

    def _on_cpu(self, row: Row) -> None:
        if self.signals is not None:  # once a second: this process's own events onto the timeline
            self.events.extend(self.signals.take())
        second, process, cpu, wait = row
        wanted = cpu + (wait or 0.0)
        if self.judges and self.worst and self.started_at is not None and wanted >= CLIENT_BOUND_PCT:
            waited = f", waiting {wait:.0f} % for one" if wait else ""
            evidence = f"the client process wanted {wanted:.0f} % of a core (CPU {cpu:.0f} %{waited}): saturated"
            self.events.append(Event(second + 1.0, "client-cpu", process, evidence, since=float(second), size=wanted))

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        self.environment = environment
        if web_ui is not None and self.tool.run_settings is not None:  # a master or single process with a web UI
            live_tab.install(environment, web_ui, self._so_far)

    def _so_far(self) -> dict:
        """The report as it stands (the web UI's tab): the worst seconds so far with the events so far."""
        if self.environment is None or self.started_at is None or not self.worst:
            return {"seconds": [], "events": []}
        if self.signals is not None:
            self.events.extend(self.signals.take())
        windows = run_context(self.environment).get(DisruptionWindows).so_far()[0]
        samples = list(self.scrape.samples) if self.scrape is not None else []
        events = [*self.events, *disruption_events(windows), *self._compactions(), *attribution.spikes(samples)]
        return attribution.report(self.seconds.so_far(), events, self.worst, self.started_at)

    def _wanted(self, environment) -> int:
        return int(getattr(environment.parsed_options, "etcd_tail", 0) or 0)

    def on_run_start(self, environment, settings) -> None:
        self._stop()
        self.worst = settings.tail.worst
        self.judges = run_context(environment).role.judges
        self.seconds.clear()
        self.events, self.lines = [], []
        self.started_at = self.ended_at = None
        self.scrape = start_scrape(settings, self.events.append) if self.worst and self.judges else None

    def on_test_start(self, environment, **_kwargs) -> None:
        role = run_context(environment).role
        if role.is_worker:
            self.worst = self._wanted(environment)
        if not self.worst:
            return
        self.started_at, self.ended_at = time.time(), None
        monitoring = run_context(environment).get(MembersSeen).monitoring
        self.compactor = monitoring.compactor if monitoring is not None else None
        if self.signals is None:
            process = str(environment.runner.client_id) if role.is_worker else None
            self.signals = ClientSignals(process or (MASTER_PROCESS if role.is_master else LOCAL_PROCESS))
        self.signals.take()  # a previous run's
        self.signals.start()

    def on_test_stop(self, environment, **_kwargs) -> None:
        if self.started_at is not None and self.ended_at is None:
            self.ended_at = time.time()
        self._stop()

    def _stop(self) -> None:
        if self.scrape is not None:
            self.scrape.stop()
        if self.signals is not None:
            self.signals.stop()

    def _compactions(self) -> list[Event]:
        """The tool's own compactions (``etcd_users.transport.compaction``): cluster-wide, each when it was answered."""
        done = list(self.compactor.compacted_at) if self.compactor is not None else []
        evidence = "the tool's compactor (--etcd-compact-interval) compacted the history at revision {}"
        return [Event(at, "compaction", "cluster", evidence.format(revision), size=1.0) for at, revision in done]

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        if self.signals is not None:
            data[REPORT_KEY] = [[e.at, e.cause, e.member, e.evidence, e.since, e.size] for e in self.signals.take()]

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        for at, cause, member, evidence, since, size in data.get(REPORT_KEY) or ():
            self.events.append(Event(float(at), str(cause), str(member), str(evidence), since, float(size)))

    def on_run_files(self) -> None:
        environment = self.environment
        if environment is None or not self.judges or not self.worst or not self.tool.ran or self.started_at is None:
            return
        try:
            self._report(environment)
        except Exception:  # a report never stops the end of the run
            logger.exception("locust-etcd: could not explain the run's worst seconds")

    def _report(self, environment) -> None:
        self._stop()
        ended = self.ended_at if self.ended_at is not None else time.time()
        events = list(self.events)
        if self.signals is not None:
            events += self.signals.take()
        events += disruption_events(run_context(environment).get(DisruptionWindows).so_far()[0])
        events += self._compactions()
        samples = self.scrape.samples if self.scrape is not None else []
        events += attribution.spikes(samples)
        seconds = self.seconds.all()
        tail = attribution.report(seconds, events, self.worst, self.started_at)
        met = attribution.precondition(events, samples, self.started_at, ended) if self.scrape is not None else None
        tail["precondition"] = met
        if self.scrape is not None:
            members = len(self.scrape.members)
            scraped = f"{members} member{'s' if members != 1 else ''}' /metrics read each second".replace("r'", "r's")
        else:
            scraped = "the members' /metrics not read"
        watched = scraped + ", the client's own signals watched"
        # a run that measured no request has no slow second to explain (the empty run's line says why)
        self.lines = attribution.lines(tail, met, watched, attribution.ranked(seconds, self.worst)) if seconds else []
        prefix = getattr(environment.parsed_options, "csv_prefix", None)
        if prefix:
            path = prefix + SUFFIXES["tail"]
            with open(path + ".tmp", "w") as file:
                json.dump(tail, file, indent=2, allow_nan=False)
            os.replace(path + ".tmp", path)

    def on_run_files_listed(self) -> None:
        for line in self.lines:
            _console.info(line)
        if self.lines:
            _console.info("")
        self.lines = []

    def on_cleanup(self, failed: bool) -> None:
        self._stop()
