"""The etcd tabs of Locust's web UI, through Locust's own extension hooks (no template of ours).

- "etcd latency": the exact percentiles of every request name from the merged HDR histograms of
  ``etcd_users.latency`` (count, failures, P50, P90, P99, P99.9, max in ms), with a CSV download of the same
  table in the columns of ``PREFIX_latency.csv``;
- "etcd endpoints": one row per member as the run follows the membership, its role (the leader marked, one that does
  not answer said so at once), whether it receives requests, and the leader changes it has seen since the run started
  (``etcd_users.features.webui.endpoints_tab``);
- "etcd SLA": the ``--etcd-sla`` gates evaluated on the data so far, or how to add some; under them, with a load shape,
  each level judged so far (its verdict and the measured values it was judged on), and each ``disrupt:`` gate on
  every window whose cost is known. A gate is ``WAITING`` until there is something to judge it on: before the run
  starts, while nothing it reads was measured, while its window waits or is measured; once the run is over it is
  judged as the run's verdict judges it;
- "etcd watchers": the watchers' figures so far (``etcd_users.run_state.watch_tally``): watchers, events and their
  rate, progress notifications, how many revisions behind, cancellations by etcd's reason, whether the client kept up;
  on a master, its workers' as they last reported them (every 3 s). A watcher-only run (``EtcdWatcherUser``) counts no
  request, so Locust's own table stays empty: this tab is where it shows;
- "etcd disruptions": each item of ``--etcd-disrupt``, in the order of its times: waiting, running, done or failed
  (not reached, once the run is over), its members, its line of result and its cost per request name once known,
  from the windows the disruptions leave on the run's context (``etcd_users.core.run_context``).

Latencies are shown in ms with 3 decimals everywhere (text, so 1.950 does not lose its zero beside 4.251).

The tabs are declared once in ``web_ui.template_args`` (``extended_tabs``, ``extended_tables``,
``extended_csv_files``), and their rows ride on the ``/stats/requests`` JSON the page polls every 2 s, under
``extended_stats``. The start form's secret options (``--etcd-user``, ``--etcd-key``) are sent to the browser as
a placeholder, never in clear; a form that sends the placeholder back keeps the value in use.

The start form (``template_args``, rebuilt by Locust on each page load): the ``--etcd-*`` options first, in the order
of ``etcd_users.core.features.OPTIONS`` (endpoints, target, SLA, …), then the others (the shapes'); choices as
drop-downs (``etcd_users.core.arguments``); each option's whole help (a little CSS, ``FORM_CSS``: Locust's labels are
cut to one line with "…"); the class picker (``--class-picker``) ticks ``EtcdPutUser`` alone, on the first form as after
*New*, and a start with no class ticked is refused rather than run with all of them. An *Edit* of a running test keeps
its classes. The header shows the endpoints as the host (``etcd_users.core.plugin`` sets it).

``WebUiTabs`` is the feature's hooks (``etcd_users.core.features``): the tabs are declared at init, on a master or
single process with a web UI, and start counting afresh with each run.
"""

import io
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from flask import jsonify, make_response, request
from werkzeug.datastructures import ImmutableMultiDict

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.features import OPTIONS
from etcd_users.core.run_context import run_context
from etcd_users.core.user_classes import DEFAULT_CLASS, USER_CLASSES_DEST
from etcd_users.features.webui.endpoints_tab import EndpointsTab
from etcd_users.judging import disruption_gates, sla
from etcd_users.judging.disruption_cost import Cost, describe
from etcd_users.judging.judged import judged_shape
from etcd_users.judging.sla_specs import Gate
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.latency.store import LatencyRow
from etcd_users.latency.writer import write_summary_csv
from etcd_users.members.seen import MembersSeen
from etcd_users.run_state.disruption_windows import DisruptionWindows
from etcd_users.run_state.watch_tally import WatchTally, percentile
from etcd_users.run_state.watchers import WatchTallies
from etcd_users.session import ProcessSession
from etcd_users.settings import EtcdSettings
from etcd_users.target.cluster import TargetCluster

logger = logging.getLogger("etcd_users.reporting.webui")  # the name users' log filters know

LATENCY_TAB = "etcd-latency"
ENDPOINTS_TAB = "etcd-endpoints"
SLA_TAB = "etcd-sla"
DISRUPTIONS_TAB = "etcd-disruptions"
WATCHERS_TAB = "etcd-watchers"
CSV_ROUTE = "/etcd/latency/csv"
SECRET_PLACEHOLDER = "********"
SECRET_DESTS = frozenset(option.dest for option in OPTIONS if option.secret)
# the form's first fields, in this order: where the load goes and what the run is judged by, then the rest
_FIRST = ("etcd_endpoints", "etcd_target", "etcd_sla")
FORM_ORDER = _FIRST + tuple(option.dest for option in OPTIONS if option.dest not in _FIRST)
RUNNING_STATES = ("spawning", "running")  # locust.runners' STATE_SPAWNING and STATE_RUNNING
NOT_STARTED_STATE = "ready"  # locust.runners' STATE_INIT: no run yet
OVER_STATE = "stopped"  # locust.runners' STATE_STOPPED: the run's figures are final
WAITING = "WAITING"  # a gate with nothing to judge yet, beside PASS and FAIL
NOT_STARTED = "the run has not started"
SLA_HINT = (
    "No gates: type them into the start form's Etcd Sla field (New), or give --etcd-sla, e.g. "
    "put:p99<15ms,errors<0.1%,qps>1000"
)
# Locust's form labels each field with its option's help, cut to one line with "…" (MUI's InputLabel): within the
# custom parameters, let the label wrap above its field, and close the outline's notch it no longer sits in. The
# class picker's select-all box goes: it ticks the classes the form starts with (DEFAULT_CLASS), not all of them.
FORM_CSS = """
.MuiTableHead-root:has(.MuiCheckbox-root) { display: none; }
.MuiAccordionDetails-root .MuiFormControl-root > .MuiInputLabel-root {
  position: static; transform: none; white-space: normal; overflow: visible; text-overflow: clip;
  max-width: none; margin-bottom: 6px; line-height: 1.35;
}
.MuiAccordionDetails-root .MuiOutlinedInput-notchedOutline > legend { max-width: 0.01px; padding: 0; }
.MuiAccordionDetails-root .MuiOutlinedInput-notchedOutline { top: 0; }
"""

STATS_MAX_AGE_S = 1.0  # several open browsers share one computation

TABS = [
    {"title": "etcd latency", "key": LATENCY_TAB},
    {"title": "etcd endpoints", "key": ENDPOINTS_TAB},
    {"title": "etcd SLA", "key": SLA_TAB},
    {"title": "etcd disruptions", "key": DISRUPTIONS_TAB},
    {"title": "etcd watchers", "key": WATCHERS_TAB},
]
WATCHERS_HINT = "No watchers yet: EtcdWatcherUser opens them (--etcd-watch-streams, --etcd-watchers-per-stream)"
DISRUPTIONS_HINT = "No disruptions: give --etcd-disrupt, e.g. defrag:leader@120s,move-leader@300s"
TABLES = [
    {
        "key": LATENCY_TAB,
        "structure": [
            {"key": "name", "title": "Name"},
            {"key": "type", "title": "Type"},
            {"key": "series", "title": "Series"},
            {"key": "count", "title": "# Requests"},
            {"key": "failures", "title": "# Fails"},
            {"key": "p50", "title": "P50 (ms)"},
            {"key": "p90", "title": "P90 (ms)"},
            {"key": "p99", "title": "P99 (ms)"},
            {"key": "p999", "title": "P99.9 (ms)"},
            {"key": "max", "title": "Max (ms)"},
        ],
    },
    {
        "key": ENDPOINTS_TAB,
        "structure": [
            {"key": "name", "title": "Endpoint"},
            {"key": "role", "title": "Role"},
            {"key": "load", "title": "Receives requests"},
            {"key": "conns", "title": "Connections per process"},
            {"key": "leaderchanges", "title": "Leader changes since the run started"},
            {"key": "checked", "title": "Checked"},
        ],
    },
    {
        "key": SLA_TAB,
        "structure": [
            {"key": "name", "title": "Gate"},
            {"key": "measured", "title": "Measured"},
            {"key": "verdict", "title": "Verdict"},
        ],
    },
    {
        "key": DISRUPTIONS_TAB,
        "structure": [
            {"key": "name", "title": "Disruption"},
            {"key": "state", "title": "State"},
            {"key": "members", "title": "Members"},
            {"key": "result", "title": "Result"},
            {"key": "cost", "title": "Cost"},
        ],
    },
    {
        "key": WATCHERS_TAB,
        "structure": [
            {"key": "name", "title": "Watchers"},
            {"key": "value", "title": "So far"},
        ],
    },
]


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def latency_rows(rows: list[LatencyRow]) -> list[dict[str, Any]]:
    """The latency tab's rows: one per (type, name, series), the Aggregated row last."""
    return [
        {
            "name": row.name,
            "type": row.type,
            "series": row.series,
            "count": row.count,
            "failures": row.failures,
            "p50": _ms(row.p50),
            "p90": _ms(row.p90),
            "p99": _ms(row.p99),
            "p999": _ms(row.p999),
            "max": _ms(row.max_ms),
        }
        for row in rows
    ]


def latency_csv(recorder: LatencyRecorder) -> str:
    """The table as ``PREFIX_latency.csv`` has it."""
    out = io.StringIO()
    write_summary_csv(out, recorder.snapshot(), recorder.first_request, recorder.last_request)
    return out.getvalue()


def sla_rows(results: list[sla.Result], waiting_for: list[str] | None = None) -> list[dict[str, str]]:
    """One row per result; ``waiting_for``: what each result waits for before it is judged ('': judged), shown in
    place of its measure under ``WAITING``."""
    if not results:
        return [{"name": SLA_HINT, "measured": "", "verdict": ""}]
    waiting_for = waiting_for or [""] * len(results)
    return [
        {
            "name": f"{result.label} {result.gate.limit}",
            "measured": waits or result.shown,
            "verdict": WAITING if waits else "PASS" if result.passed else "FAIL",
        }
        for result, waits in zip(results, waiting_for, strict=True)
    ]


def request_gate_waits(result: sla.Result, started: bool, over: bool) -> str:
    """What a request gate's result waits for ('': nothing, it stands): before the run, the run; during it, a
    measure (a gate on a name that has not run yet, a latency without a success); once the run is over, nothing."""
    if not started:
        return NOT_STARTED
    if over or result.measured is not None:
        return ""
    return f"nothing measured yet ({result.shown})"


def disrupt_gate_results(
    gates: Sequence[Gate], items: tuple[str, ...], windows: list[dict], over: bool
) -> tuple[list[sla.Result], list[str]]:
    """Each ``disrupt:`` gate on each item of the schedule, with what it waits for: its window's cost, unless the
    action failed or, the run over (``over``), its item was never reached."""
    results, waiting_for = [], []
    for gate in gates:
        for index, item in enumerate(items):
            window = windows[index] if index < len(windows) else None
            judged = disruption_gates.judge_window(gate, item, window)
            if window is None:
                waits = "" if over else "its disruption"
            elif window.get("cost") or window.get("ok") is False:
                waits = ""
            else:
                waits = "its disruption's cost"
            results.append(judged)
            waiting_for.append(f"waiting for {waits}" if waits else "")
    return results, waiting_for


def disruption_rows(items: tuple[str, ...], windows: list[dict], over: bool) -> list[dict[str, str]]:
    """One row per item of the schedule (``items``, by time) with its window (``windows``, in the same order, as far
    as the run got); ``over``: the run has ended, so an item without a window was never reached."""
    if not items:
        return [{"name": DISRUPTIONS_HINT, "state": "", "members": "", "result": "", "cost": ""}]
    rows = []
    for index, item in enumerate(items):
        window = windows[index] if index < len(windows) else {}
        costs = [entry for entry in window.get("cost") or [] if isinstance(entry, dict)]
        if not window:
            state = "not reached" if over else "waiting"
        elif window.get("finished_at") is None:
            state = "running"
        else:
            state = "done" if window.get("ok") else "failed"
        if costs:
            cost = "; ".join(
                describe(
                    Cost(**{key: entry[key] for key in Cost._fields if key in entry}), entry.get("errors_by_label")
                )
                for entry in costs
            )
        elif state in ("running", "done", "failed"):
            cost = "measuring: known once the P99 is back (at most 30 s after the end)"
        else:
            cost = ""
        rows.append(
            {
                "name": item,
                "state": state,
                "members": " ".join(window.get("members") or []),
                "result": window.get("result") or window.get("error") or "",
                "cost": cost,
            }
        )
    return rows


def watcher_rows(tally: WatchTally) -> list[dict[str, str]]:
    """The watchers' figures so far, a row each; a hint without any watcher or event."""
    if not (tally.watchers or tally.events or tally.cancelled):
        return [{"name": WATCHERS_HINT, "value": ""}]
    responses = tally.by_response
    behind = f"P50 {percentile(responses, 0.5)}, P99 {percentile(responses, 0.99)}, max {max(responses, default=0)}"
    rows = [
        ("watchers", f"{tally.watchers:,}"),
        ("events", f"{tally.events:,}"),
        ("events per second", f"{tally.events_per_second:,.1f}"),
        ("progress notifications", f"{tally.progress:,}"),
        ("revisions behind the newest known, per response", behind),
        ("watchers that fell behind", f"{tally.watchers_behind:,} (worst {max(tally.by_watcher, default=0):,})"),
    ]
    rows += [(f"cancelled: {label}", f"{count:,}") for label, count in sorted(tally.cancelled.items())]
    if tally.event_intervals:
        busy = f"{tally.busy_intervals} of {tally.event_intervals} intervals with events"
        rows.append(("client busy", busy + (": client-bound" if tally.client_bound else "")))
    return [{"name": name, "value": value} for name, value in rows]


def level_rows(shape_record: dict | None) -> list[dict[str, str]]:
    """One row per level of a load shape judged live so far (``judged_shape.JudgedShape.shape_record``)."""
    rows = []
    for level in (shape_record or {}).get("levels") or []:
        if level.get("verdict") is None:
            continue
        load = f" at {level['qps']:g} QPS" if level.get("qps") is not None else f" at {level.get('users')} users"
        rows.append(
            {
                "name": f"level '{level.get('name')}'{load}",
                "measured": "; ".join(check.get("line", "") for check in level.get("checks") or []),
                "verdict": level["verdict"],
            }
        )
    return rows


class EtcdTabs:
    """The data behind the tabs of one web UI (on the master or the single process)."""

    def __init__(
        self,
        environment,
        recorder: LatencyRecorder,
        run_settings: Callable[[], EtcdSettings | None],
        alarm: Callable[[], str | None] = lambda: None,
        disruption_windows: Callable[[], tuple[list[dict], bool]] = lambda: ([], False),
        watch_tally: Callable[[], WatchTally] = WatchTally,
        endpoints_tab: EndpointsTab | None = None,
    ) -> None:
        self.environment = environment
        self.watch_tally = watch_tally  # the watchers' tally so far
        # --etcd-disrupt: the current (or last) run's windows, and whether that run is over
        self.disruption_windows = disruption_windows
        self.recorder = recorder
        self.run_settings = run_settings  # the master's settings of the current run, None before it has any
        self.alarm = alarm  # etcd's NOSPACE alarm as the run knows it, one line; None without one
        self.endpoints_tab = endpoints_tab or EndpointsTab()
        self._stats: list[dict[str, Any]] | None = None
        self._stats_at = 0.0

    def on_test_start(self) -> None:
        """A run starts: the figures afresh, leader changes counted from now, the members looked up at once."""
        self._stats = None
        settings = self.run_settings()
        if settings is not None and settings.endpoints:
            self.endpoints_tab.on_test_start(settings)

    def close(self) -> None:
        """Stop looking up the members (at quit, before the process's connections close)."""
        self.endpoints_tab.quit()

    def endpoints(self) -> list[dict[str, Any]]:
        settings = self.run_settings()
        rows = self.endpoints_tab.rows(settings) if settings is not None and settings.endpoints else []
        alarm = self.alarm()
        if not alarm:
            return rows
        # etcd refuses every write until the alarm is disarmed: the first row says so, above the members
        row = {"name": "ALARM", "role": alarm, "load": "", "conns": "", "leaderchanges": "", "checked": ""}
        return [row, *rows]

    # -- the JSON of /stats/requests --

    def sla(self) -> list[dict[str, str]]:
        settings = self.run_settings()
        gates = settings.gates.sla if settings is not None else ()
        if not gates:
            return sla_rows([])
        runner = getattr(self.environment, "runner", None)
        state = getattr(runner, "state", NOT_STARTED_STATE)
        started, over = state != NOT_STARTED_STATE, state == OVER_STATE
        results = sla.evaluate_all(gates, sla.measurements(self.environment, self.recorder))
        waiting_for = [request_gate_waits(result, started, over) for result in results]
        # each disrupt: gate on each item of the schedule, judged once its window's cost is known
        windows, windows_over = self.disruption_windows()
        disrupt = [gate for gate in gates if gate.disrupt]
        judged, waits = disrupt_gate_results(disrupt, settings.disruptions.items, windows, windows_over)
        # a load shape's levels judged so far, under the gates of the whole run
        shape = judged_shape(self.environment)
        levels = level_rows(shape.shape_record() if shape is not None else None)
        return sla_rows(results + judged, waiting_for + waits) + levels

    def disruptions(self) -> list[dict[str, str]]:
        settings = self.run_settings()
        windows, over = self.disruption_windows()
        return disruption_rows(settings.disruptions.items if settings is not None else (), windows, over)

    def extended_stats(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        if self._stats is None or now - self._stats_at > STATS_MAX_AGE_S:
            self._stats = [
                {"key": LATENCY_TAB, "data": latency_rows(self.recorder.snapshot())},
                {"key": ENDPOINTS_TAB, "data": self.endpoints()},
                {"key": SLA_TAB, "data": self.sla()},
                {"key": DISRUPTIONS_TAB, "data": self.disruptions()},
                {"key": WATCHERS_TAB, "data": watcher_rows(self.watch_tally())},
            ]
            self._stats_at = now
        return self._stats


def _mask_secrets(template_args: dict[str, Any]) -> None:
    for dest, option in (template_args.get("extra_options") or {}).items():
        if dest in SECRET_DESTS and option.get("default_value"):
            option["default_value"] = SECRET_PLACEHOLDER


def shape_form(template_args: dict[str, Any], named: list[str] | None) -> None:
    """The start form as ``template_args`` gives it to the page: options in order, the classes to tick (in place).

    The page ticks every class of ``available_user_classes`` and lists those of ``users``: keep the list whole and
    tick the classes named on the command line, or ``DEFAULT_CLASS``.
    """
    extra = template_args.get("extra_options") or {}
    first = [dest for dest in FORM_ORDER if dest in extra]
    template_args["extra_options"] = {dest: extra[dest] for dest in [*first, *(d for d in extra if d not in first)]}
    users = template_args.get("users") or {}
    if users:
        template_args["users"] = {name: users[name] for name in sorted(users)}
    available = template_args.get("available_user_classes") or []
    ticked = [name for name in named or () if name in available]
    if not ticked and DEFAULT_CLASS in available:
        ticked = [DEFAULT_CLASS]
    if ticked:
        template_args["available_user_classes"] = ticked


def _with_form_css(html: str) -> str:
    return html.replace("</head>", f"<style>{FORM_CSS}</style></head>", 1)


def install(
    environment,
    web_ui,
    recorder: LatencyRecorder,
    run_settings: Callable[[], EtcdSettings | None],
    alarm: Callable[[], str | None] = lambda: None,
    disruption_windows: Callable[[], tuple[list[dict], bool]] = lambda: ([], False),
    watch_tally: Callable[[], WatchTally] = WatchTally,
    endpoints_tab: EndpointsTab | None = None,
) -> EtcdTabs:
    """Declare the tabs and hook the routes of ``web_ui``."""
    tabs = EtcdTabs(environment, recorder, run_settings, alarm, disruption_windows, watch_tally, endpoints_tab)
    base = getattr(environment.parsed_options, "web_base_path", "") or ""
    web_ui.template_args["extended_tabs"] = TABS
    web_ui.template_args["extended_tables"] = TABLES
    web_ui.template_args["extended_csv_files"] = [{"href": f".{CSV_ROUTE}", "title": "Download exact etcd latency CSV"}]
    # the page lists the form's options in the order of template_args, which Jinja's tojson would sort a-z
    web_ui.app.jinja_env.policies["json.dumps_kwargs"] = {"sort_keys": False}

    # Locust rebuilds the form's options (secrets in clear) on every page load: mask them after each rebuild
    rebuild = web_ui.update_template_args

    def update_template_args() -> None:
        rebuild()
        _mask_secrets(web_ui.template_args)
        shape_form(web_ui.template_args, getattr(environment.parsed_options, USER_CLASSES_DEST, None))

    web_ui.update_template_args = update_template_args
    _mask_secrets(web_ui.template_args)
    shape_form(web_ui.template_args, getattr(environment.parsed_options, USER_CLASSES_DEST, None))

    @web_ui.app.before_request
    def prepare_swarm_form():
        """A start's form: secrets in use for their placeholders, and the User classes it runs."""
        if request.method != "POST" or request.path != f"{base}/swarm":
            return None
        options = environment.parsed_options
        items = [
            (key, getattr(options, key) if key in SECRET_DESTS and value == SECRET_PLACEHOLDER else value)
            for key, value in request.form.items(multi=True)
        ]
        if web_ui.userclass_picker_is_active:
            runner = environment.runner
            if runner is not None and runner.state in RUNNING_STATES:
                # an Edit: the page sends the classes it ticks on a new form; the running test keeps its own
                items = [(key, value) for key, value in items if key != USER_CLASSES_DEST]
                running = environment.available_user_classes.items()
                items += [(USER_CLASSES_DEST, name) for name, cls in running if cls in environment.user_classes]
            elif not any(key == USER_CLASSES_DEST for key, _ in items) and len(environment.available_user_classes) > 1:
                message = f"Tick the User classes to run (e.g. {DEFAULT_CLASS}): none ticked would run them all"
                return jsonify({"success": False, "message": message, "host": environment.host})
        request.form = ImmutableMultiDict(items)
        return None

    @web_ui.app.after_request
    def add_form_css(response):
        if request.path != f"{base}/" or response.status_code != 200 or response.mimetype != "text/html":
            return response
        response.set_data(_with_form_css(response.get_data(as_text=True)))
        return response

    @web_ui.app.after_request
    def add_extended_stats(response):
        if request.path != f"{base}/stats/requests" or response.status_code != 200 or not response.is_json:
            return response
        try:
            payload = response.get_json()
            # Locust may hand back the same response again (memoized): ours replaced, a feature's own (the tail's) kept
            ours = tabs.extended_stats()
            keys = {table["key"] for table in ours}
            kept = [table for table in payload.get("extended_stats", ()) if table.get("key") not in keys]
            payload["extended_stats"] = [*ours, *kept]
            response.set_data(json.dumps(payload))
        except Exception:  # the page must keep its own stats whatever ours do
            logger.exception("etcd tabs: could not add the etcd tables")
        return response

    @web_ui.app.route(f"{base}{CSV_ROUTE}")
    @web_ui.auth_required_if_enabled
    def etcd_latency_csv():
        response = make_response(latency_csv(recorder))
        stamp = time.strftime("%Y%m%d-%H%M%S")
        response.headers["Content-Type"] = "text/csv"
        response.headers["Content-Disposition"] = f"attachment;filename=etcd_latency_{stamp}.csv"
        return response

    return tabs


class WebUiTabs(FeatureHooks):
    """The tabs of the process's web UI; the alarm, the disruptions' windows and the users' pool are read from the
    run's context, the local etcd's members from the tool's target."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.tabs: EtcdTabs | None = None

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        if web_ui is None or self.tool.run_settings is None:
            return  # no web UI, a worker, or a run without the tool's options
        context = run_context(environment)
        target = self.tool.get(TargetCluster)

        def local_members() -> list[tuple[str, str]]:
            local = target.local  # the local etcd, which an add-learner grows; None on endpoints given
            return list(zip(local.endpoints, local.metrics_urls, strict=True)) if local is not None else []

        self.tabs = install(
            environment,
            web_ui,
            self.tool.get(LatencyRecorder),
            lambda: self.tool.run_settings,
            lambda: context.get(MembersSeen).alarm,
            lambda: context.get(DisruptionWindows).so_far(),
            lambda: context.get(WatchTallies).live(),
            EndpointsTab(context.get(ProcessSession).users_pool, local_members),
        )

    def on_run_start(self, environment, settings: EtcdSettings) -> None:
        if self.tabs is not None:
            self.tabs.on_test_start()

    def on_run_files(self) -> None:
        # at quit, while the process's connections are still open
        if self.tabs is not None:
            self.tabs.close()
