"""The run's gates from judging to reporting: judged at quitting on the final figures (the exit code is decided right
after), written for CI at quit (``--etcd-junit``, ``$GITHUB_STEP_SUMMARY``) and printed last, where a pipeline's log
ends. Only a master or a single process judges: workers see a part of the load.

``disrupt:`` gates are judged on the windows of ``--etcd-disrupt`` (``etcd_users.features.disruptions.runner``),
whatever the shape; ``member:`` gates on the worst member's own metrics over the run, from the rows the poller kept;
``stale:`` gates on the serializable reads' staleness per member, from the audit's counts."""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import os
import time

from etcd_users.audit_trail.staleness import MemberStaleness
from etcd_users.core.exit_code import ExitVerdict
from etcd_users.features.gates import stale_gates, step_summary
from etcd_users.judging import disruption_gates as disruptions
from etcd_users.judging import junit, member_gates, sla
from etcd_users.judging.judged import JudgedShape
from etcd_users.judging.sla_specs import disruption_gates, request_gates
from etcd_users.judging.sla_specs import member_gates as on_members
from etcd_users.judging.sla_specs import stale_gates as on_staleness
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.members.member_figures import member_figures
from etcd_users.settings import EtcdSettings


class GateVerdicts:
    def __init__(self) -> None:
        self.results: list[sla.Result] = []

    def judge(
        self,
        environment,
        recorder: LatencyRecorder,
        settings: EtcdSettings,
        shape: JudgedShape | None,
        windows: list[dict],
        member_rows: list[dict] = (),
        staleness: dict[str, MemberStaleness] | None = None,
    ) -> None:
        """The gates on the final figures; ``windows``: the run's disruption windows, each with its cost;
        ``member_rows``: the members' polled rows of the run; ``staleness``: the serializable reads per member."""
        on_requests = request_gates(settings.gates.sla)
        if shape is not None and not shape.judges_whole_run:
            on_requests = ()  # a capacity search mixes passing and failing probes: its gates are judged per probe
        on_windows = disruption_gates(settings.gates.sla)
        judged = disruptions.judge(on_windows, settings.disruptions.items, windows) if on_windows else []
        members = on_members(settings.gates.sla) if shape is None or shape.judges_whole_run else ()
        if members:
            judged += member_gates.judge(members, member_figures(member_rows))
        stale = on_staleness(settings.gates.sla) if shape is None or shape.judges_whole_run else ()
        if stale:
            judged += stale_gates.judge(stale, staleness or {})
        self.results = sla.judge(environment, recorder, on_requests, judged) if on_requests or judged else []

    def write_reports(
        self, environment, recorder: LatencyRecorder, settings: EtcdSettings, shape: JudgedShape | None, ran: bool
    ) -> None:
        """``--etcd-junit`` and ``$GITHUB_STEP_SUMMARY``, whether gates failed or not (the exit code stays the
        run's)."""
        junit_path = settings.gates.junit
        summary = os.environ.get(step_summary.ENV_VAR) if ran else None
        if not junit_path and not summary:
            return
        if not ran:
            why_not_judged = "no run started"
        elif shape is not None and not shape.judges_whole_run:
            why_not_judged = "the shape judges its gates per probe, not on the whole run"
        else:
            why_not_judged = "not judged on the whole run"
        levels = junit.recorded_levels(shape)
        gates = settings.gates.sla
        gates += tuple(dict.fromkeys(result.gate for result in self.results if result.gate not in gates))  # workers
        if junit_path:
            started_at = environment.stats.start_time if ran else None
            document = junit.report(
                gates,
                self.results,
                levels,
                started_at=started_at,
                duration_s=time.time() - started_at if started_at else 0.0,
                why_not_judged=why_not_judged,
            )
            junit.write(junit_path, document)
        if summary:
            rows = recorder.snapshot()
            step_summary.append(step_summary.markdown(rows, gates, self.results, levels, why_not_judged), summary)

    def exit_verdict(self) -> ExitVerdict | None:
        """Exit code 3 when a gate failed (a lost worker's verdict among them); None when every gate passed."""
        return sla.exit_verdict(self.results)

    def print(self) -> None:
        sla.print_results(self.results)
