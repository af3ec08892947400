"""The audit's life cycle in a run: a record of the acknowledged writes in each process that runs users, from the
run's start; at its stop each such process reads its keys back (a worker sends its counts with its last report);
at quitting the master (or single process) hashes every member, sums the counts and judges; at quit it prints the
line, last, and adds a case to the ``--etcd-junit`` report; with ``--csv`` it writes ``PREFIX_audit.json`` and, when
serializable reads were measured, ``PREFIX_staleness.csv``.

``AuditRun`` is the feature's hooks (``etcd_users.core.features``). The plugin calls ``on_quitting`` here once the
workers have reported and the gates' hooks have judged the gates, then ``exit_verdict``: a failed audit makes the exit
code 4 (``etcd_users.core.exit_code``). The local etcd stops, and ``--etcd-cleanup`` deletes the prefix, later, at quit.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import csv
import json
import logging
import os
import time
from dataclasses import replace
from functools import partial

from etcd_users.audit_trail.ledger import KeyCounts, Ledger
from etcd_users.audit_trail.record import AuditState, RunRecord
from etcd_users.audit_trail.staleness import MemberStaleness, Staleness
from etcd_users.core.exit_code import AUDIT_EXIT_CODE, ExitVerdict
from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.audit import evidence as evidence_files
from etcd_users.features.audit.divergence import keys_held_differently
from etcd_users.features.audit.hashkv import hash_members
from etcd_users.features.audit.options import AuditSettings
from etcd_users.features.audit.readback import read_back
from etcd_users.features.audit.verdict import Audit, ProcessAudit
from etcd_users.files import LOCAL_PROCESS, STALENESS_COLUMNS, STALENESS_FIELDS, SUFFIXES
from etcd_users.judging import junit
from etcd_users.session import ProcessSession
from etcd_users.settings import SettingsError, settings_from_options
from etcd_users.target.cluster import TargetCluster
from etcd_users.transport.errors import EndpointError, error_detail
from etcd_users.transport.probe import with_probe

logger = logging.getLogger("etcd_users.audit.run")  # the name users' log filters know
_console = logging.getLogger("locust.stats_logger")  # where Locust prints its summary, and the SLA lines

REPORT_KEY = "etcd_audit"
JUNIT_CLASS = "audit"


class AuditRun(FeatureHooks):
    """The audit's hooks, and its state in one process across runs."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.on = False  # the current run is audited
        self.workers = 0  # a master's workers at the run's start
        self.mine: ProcessAudit | None = None  # this process's keys read back
        self.unsent: dict | None = None  # a worker's counts, for its next report
        self.reports: dict[str, ProcessAudit] = {}  # a master's workers' counts
        self.audit: Audit | None = None  # the verdict, on a master or single process
        self.junit = ""  # --etcd-junit of the run judged

    def on_test_start(self, environment, **_kwargs) -> None:
        self.mine, self.unsent, self.reports, self.audit = None, None, {}, None
        options = environment.parsed_options
        self.on = hasattr(options, "etcd_endpoints") and not AuditSettings.read_one(options, "skip")
        context = run_context(environment)
        context.get(AuditState).final_staleness = lambda: self.staleness(environment)
        if context.role.is_master:
            self.workers = environment.runner.worker_count
            return
        ledger = None
        if self.on:
            try:
                settings = settings_from_options(options)
            except SettingsError:
                settings = None  # the plugin has said why; the run stops
            if settings is not None:
                ledger = Ledger(settings.prefix, settings.key_size, settings.key_space_size)
        context.get(AuditState).record = RunRecord(ledger) if ledger is not None else None

    def on_test_stop(self, environment, **_kwargs) -> None:
        """A process that ran users reads its keys back once they have stopped."""
        role = run_context(environment).role
        if role.runs_users and self.mine is None:
            self.mine = self._read_back(environment)
            if role.is_worker and self.mine is not None:
                self.unsent = self.mine.to_report()

    def on_report_to_master(self, client_id, data, **_kwargs) -> None:
        if self.unsent is not None:
            data[REPORT_KEY], self.unsent = self.unsent, None

    def on_worker_report(self, client_id, data, **_kwargs) -> None:
        report = data.get(REPORT_KEY)
        if isinstance(report, dict):
            try:
                self.reports[str(client_id)] = ProcessAudit.from_report({**report, "process": str(client_id)})
            except TypeError as error:
                logger.warning("audit: a report of worker %s could not be read: %s", client_id, error)

    def on_quitting(self, environment) -> None:
        """Judge the run, on a master or single process, once the workers' last reports are in."""
        runner = environment.runner
        role = run_context(environment).role
        if not self.on or runner is None or role.is_worker:
            return
        if role.is_master:
            processes = list(self.reports.values())
            missing = max(0, self.workers - len(processes))
        else:
            if self.mine is None:  # quitting before the users stopped (Ctrl-C): writes after the read are not judged
                self.mine = self._read_back(environment)
            processes, missing = [self.mine] if self.mine is not None else [], 0
        if not missing and not any(p.keys.writes or p.watches.watchers or p.error for p in processes):
            return  # a run that wrote nothing of the key space (reads, leases, Kubernetes' objects) is not audited
        self.audit = Audit(processes, missing=missing)
        settings = self.tool.run_settings
        self.junit = settings.gates.junit
        try:
            # every member, whichever the load's target: the hashes must not wait for a leader
            every_member = replace(settings, target="round-robin")
            self.audit.hashes = with_probe(every_member, partial(hash_members, wait_s=settings.audit.wait))
        except (EndpointError, SettingsError) as error:
            self.audit.hash_error = str(error)
        except Exception as error:  # whatever the members do, the audit ends with its line: failed, saying why
            self.audit.hash_error = error_detail(error)
        evidence = self._offending_keys(settings) if self.audit.evidence else None
        if evidence is not None:
            self.audit.held_differently = evidence.get("held_differently")
        local = self.tool.get(TargetCluster).local
        if self.audit.failed and local is not None:  # what the members hold is the failure's evidence: not removed
            kept = local.keep_files()
            self.audit.kept = str(kept) if kept is not None else None
        prefix = getattr(environment.parsed_options, "csv_prefix", None)
        if prefix:
            if evidence is not None:
                self.audit.evidence_files = evidence_files.write(prefix, evidence)
            _write_json(prefix + SUFFIXES["audit"], self.audit.as_json())
            rows = self.audit.staleness().rows()
            if rows:
                _write_staleness(prefix + SUFFIXES["staleness"], rows)

    def _offending_keys(self, settings) -> dict | None:
        """The keys lost and those of stale linearizable reads, with every member's view of each, and the keys members
        whose data differ hold differently; None without any."""
        lost, violations = self.audit.lost_keys if self.audit.lost else [], self.audit.reads.evidence
        keys = evidence_files.offending_keys(lost, violations)
        data_differ = self.audit.hashes_differ or bool(self.audit.diverged)
        if not keys and not data_differ:
            return None
        every_member = replace(settings, target="round-robin")
        view, held = {}, None
        # the members' views are a help, not the verdict: the keys are kept without them
        try:
            if keys:
                view = with_probe(every_member, lambda pool: evidence_files.members_view(pool, keys))
        except Exception as error:
            logger.warning("audit: the members' view of the offending keys could not be read: %s", error_detail(error))
        try:
            if data_differ:
                held = with_probe(every_member, lambda pool: keys_held_differently(pool, settings.prefix))
        except Exception as error:
            logger.warning("audit: the members' keys could not be compared: %s", error_detail(error))
        return evidence_files.document(lost, violations, view, held)

    def staleness(self, environment) -> dict[str, MemberStaleness]:
        """The serializable reads of the run's processes per member, for the ``stale:`` gates (judged before
        ``on_quitting``: the workers' last reports are in)."""
        role = run_context(environment).role
        if role.is_master:
            processes = list(self.reports.values())
        else:
            if self.mine is None and self.on and role.runs_users:
                self.mine = self._read_back(environment)
            processes = [self.mine] if self.mine is not None else []
        total = Staleness()
        for process in processes:
            total.add(Staleness.from_report(process.staleness).members)
        return total.members

    def exit_verdict(self, environment) -> ExitVerdict | None:
        if self.audit is None or not self.audit.failed:
            return None
        return ExitVerdict(AUDIT_EXIT_CODE, "the audit failed")

    def on_quit(self, **_kwargs) -> None:
        """The line last, after the gates' (their hooks print them at quit, before this listener)."""
        audit = self.audit
        if audit is None:
            return
        for line in audit.error_lines():
            logger.error(line)
        _console.info(audit.line())
        if self.junit and os.path.exists(os.path.expanduser(self.junit)):  # the gates' hooks wrote their report
            failure = "\n".join(audit.error_lines()) if audit.failed else None
            record = audit.as_json()
            properties = [(key, str(value)) for key, value in record["writes"].items()]
            if audit.watches.watchers:  # each watch guarantee's count, as the line gives it
                properties += [(f"watch_{key}", str(value)) for key, value in record["watches"].items()]
            junit.add_case(self.junit, JUNIT_CLASS, "audit", audit.line(), failure, properties)

    def _read_back(self, environment) -> ProcessAudit | None:
        """This process's keys read back at one revision, judged against its record; None when it wrote nothing."""
        context = run_context(environment)
        run = context.get(AuditState).record
        if run is None or not (run.ledger.writes or run.ledger.untracked_deletes or run.watches.watchers):
            return None
        started = time.perf_counter()
        runner = environment.runner
        process = str(runner.client_id) if context.role.is_worker else LOCAL_PROCESS
        ledger = run.ledger
        try:
            current = context.get(ProcessSession).session(context.environment)
            first, end = current.keys.first_and_end()
            revision, found = current.bridge.run(
                read_back, current.pool, ledger, first, end, current.settings.audit.wait
            )
        except Exception as error:  # etcd refused the read (a member gone, or diverged): said, and the audit fails
            unread = KeyCounts(writes=ledger.writes, deletes=ledger.deletes)
            reads = run.reads
            return ProcessAudit(
                process,
                unread,
                run.watches,
                error=error_detail(error),
                reads=reads.counts,
                staleness=reads.staleness.to_report(),
            )
        counts = ledger.check(revision, found)
        return ProcessAudit(
            process,
            counts,
            run.watches,
            revision,
            time.perf_counter() - started,
            ledger.bytes_per_key(),
            reads=run.reads.counts,
            staleness=run.reads.staleness.to_report(),
        )


def _write_staleness(path: str, rows: list[dict]) -> None:
    partial = f"{path}.tmp"
    try:
        with open(partial, "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(STALENESS_COLUMNS)
            writer.writerows([row[field] for field in STALENESS_FIELDS] for row in rows)
        os.replace(partial, path)
    except OSError as error:
        logger.error("locust-etcd: error: could not write %s: %s", path, error.strerror or error)


def _write_json(path: str, data: dict) -> None:
    partial = f"{path}.tmp"
    try:
        with open(partial, "w") as file:
            json.dump(data, file, indent=2)
        os.replace(partial, path)
    except OSError as error:
        logger.error("locust-etcd: error: could not write %s: %s", path, error.strerror or error)
