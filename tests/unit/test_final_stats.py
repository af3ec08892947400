"""Locust's CSV files completed at quit (``etcd_users.features.latency.final_stats``), in process: Locust's own writer
and its greenlet, requests that came after its last tick. A real run's files are ``tests/e2e/test_end_of_run.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads)
from locust.env import Environment
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter

import argparse
import csv

import gevent

from etcd_users.features.latency.final_stats import at_quit, at_quitting, complete


def rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_the_last_requests_reach_the_files_and_locusts_writer_stops(tmp_path):
    environment = Environment()
    prefix = str(tmp_path / "run")
    writer = StatsCSVFileWriter(environment, PERCENTILES_TO_REPORT, prefix, full_history=False)
    ticking = gevent.spawn(writer.stats_writer)
    gevent.sleep(0.1)  # Locust's first tick: nothing yet
    for _ in range(3):  # the last second of a run: after Locust's last tick
        environment.stats.log_request("etcd", "put", 2, 10)
    environment.stats.log_error("etcd", "put", "etcdserver: too many requests")

    assert complete(environment)
    assert ticking.dead  # no later tick writes over the files (or fails on them once Locust closes them)
    stats = {row["Name"]: row for row in rows(f"{prefix}_stats.csv")}
    assert (stats["put"]["Request Count"], stats["Aggregated"]["Request Count"]) == ("3", "3")
    assert rows(f"{prefix}_stats_history.csv")[-1]["Total Request Count"] == "3"
    assert [row["Error"] for row in rows(f"{prefix}_failures.csv")] == ["etcdserver: too many requests"]
    writer.close_files()  # as Locust does right after the quit event


def test_without_csv_files_there_is_nothing_to_complete():
    assert not complete(Environment())


def test_with_json_output_the_files_are_completed_before_locust_clears_its_figures(tmp_path):
    prefix = str(tmp_path / "run")
    options = argparse.Namespace(csv_prefix=prefix, json=False, json_file=str(tmp_path / "report"))
    environment = Environment(parsed_options=options)
    writer = StatsCSVFileWriter(environment, PERCENTILES_TO_REPORT, prefix, full_history=False)
    ticking = gevent.spawn(writer.stats_writer)
    gevent.sleep(0.1)
    environment.stats.log_request("etcd", "put", 2, 10)

    assert at_quitting(environment)  # quitting: the run has stopped, Locust has not printed its JSON yet
    assert ticking.dead
    environment.stats.serialize_stats()  # what --json-file does next: each name's figures reset
    assert not at_quit(environment)  # quit: the files keep the figures written at quitting
    stats = {row["Name"]: row for row in rows(f"{prefix}_stats.csv")}
    assert (stats["put"]["Request Count"], stats["Aggregated"]["Request Count"]) == ("1", "1")
    writer.close_files()

    plain = Environment(parsed_options=argparse.Namespace(csv_prefix=None, json=False, json_file=None))
    assert not at_quitting(plain) and not at_quit(plain)  # no --csv: no files
