"""The web UI against real etcd members: the start form, the etcd tabs (the SLA tab waiting before the run, the
endpoints tab showing a frozen member as not answering as soon as the log says it was left out, and following the
membership as a learner is added and promoted and a member removed), shapes picked in the UI, secrets kept out of the
page, and a headless Chromium that starts, edits and stops a test the way a person would, on a form that shows each
option's whole help in order, choices as drop-downs, EtcdPutUser alone ticked and the endpoints as the host. The
endpoints table's rows are ``tests/unit/test_endpoints_tab.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: the test imports etcd_users.features.webui.tabs)

import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import etcd3
import pytest
from certs import make_certs
from support import REPO, LocustProcess, free_port, running, start_locust

from etcd_users import settings as etcd_options
from etcd_users.core.features import OPTIONS
from etcd_users.features.shapes import options as shape_options
from etcd_users.features.webui.tabs import NOT_STARTED, SECRET_PLACEHOLDER, SLA_HINT, WAITING
from etcd_users.files import LATENCY_SUMMARY_COLUMNS as SUMMARY_COLUMNS
from etcd_users.local import ClusterError, LocalCluster

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]  # fmt: skip
SCREENSHOT = REPO / "test-artifacts" / "webui.png"
TEMPLATE_ARGS = re.compile(r"window\.templateArgs = (\{.*\})\s*$", re.MULTILINE)
# the direct opener: a loopback UI must never be reached through an http_proxy from the environment
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class WebUI:
    """A Locust web UI on 127.0.0.1 and the HTTP calls its page makes."""

    def __init__(self, process: LocustProcess, url: str) -> None:
        self.process = process
        self.url = url

    def get(self, path: str) -> bytes:
        with _OPENER.open(self.url + path, timeout=10) as response:
            return response.read()

    def post(self, path: str, form: dict[str, str] | list[tuple[str, str]] | None = None) -> dict:
        data = urllib.parse.urlencode(form or {}).encode()
        with _OPENER.open(urllib.request.Request(self.url + path, data=data, method="POST"), timeout=30) as response:
            return json.loads(response.read())

    def page_html(self) -> str:
        return self.get("/").decode()

    def template_args(self) -> dict:
        return json.loads(TEMPLATE_ARGS.search(self.page_html()).group(1))

    def stats(self) -> dict:
        return json.loads(self.get("/stats/requests"))

    def wait_for(self, check, what: str, timeout: float = 30.0) -> dict:
        """Poll /stats/requests until ``check(stats)`` holds; returns those stats."""
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats()
            if check(stats):
                return stats
            if time.monotonic() > deadline:
                raise AssertionError(f"web UI: {what} not seen within {timeout:g}s; last stats: {stats}")
            time.sleep(0.5)

    def stop_locust(self) -> str:
        """Quit Locust with SIGTERM, as Kubernetes or systemd would; its stderr."""
        self.process.terminate()
        finished = self.process.finish(timeout=60)
        assert finished.returncode == 0, finished.stderr[-3000:]
        return finished.stderr


@contextmanager
def web_ui(tmp_out: Path, *args: str) -> Iterator[WebUI]:
    port = free_port()
    process = start_locust(*args, "--web-host", "127.0.0.1", "--web-port", str(port), log_dir=tmp_out)
    with process:
        ui = WebUI(process, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 60
        while True:
            try:
                ui.get("/")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"the web UI did not come up\n{process.output()[1][-3000:]}") from None
                time.sleep(0.3)
        yield ui


def extended(stats: dict, key: str) -> list[dict]:
    return next(table["data"] for table in stats.get("extended_stats", []) if table["key"] == key)


def locust_row(stats: dict, name: str) -> dict | None:
    return next((row for row in stats["stats"] if row["name"] == name), None)


# -- over HTTP, as the page calls it --


@pytest.mark.slow
def test_the_form_offers_every_option_and_a_picked_shape_runs_to_its_end(etcd1, tmp_out):
    endpoints = ",".join(etcd1.endpoints)
    files = "locustfile.py,shapes/step_spike.py,shapes/ladder.py"
    csv = tmp_out / "ui"
    with web_ui(
        tmp_out,
        "-f",
        files,
        "--class-picker",
        "--etcd-endpoints",
        endpoints,
        "--etcd-prefix",
        "/test-webui-form/",
        "--etcd-cleanup",
        "--csv",
        str(csv),
    ) as ui:
        args = ui.template_args()
        form = args["extra_options"]
        # a repeatable option (--etcd-disrupt-command) is a list: the command line's, which a form field cannot hold
        every = (*OPTIONS, *shape_options.OPTIONS)
        expected = {option.dest: option for option in every if not getattr(option, "repeatable", False)}
        first = ["etcd_endpoints", "etcd_target", "etcd_sla"]  # where the load goes and what the run is judged by
        assert list(form) == first + [dest for dest in expected if dest not in first]  # then ours, then the shapes'
        assert {dest: field["choices"] for dest, field in form.items() if field["choices"]} == {
            "etcd_target": ["round-robin", "leader"],
            "etcd_local_members": [1, 2, 3, 4, 5],
            "etcd_consistency": ["l", "s"],
            "etcd_engine": ["loop", "greenlet"],
            "etcd_arrival": ["fixed", "poisson"],
        }
        given = {"etcd_endpoints": endpoints, "etcd_prefix": "/test-webui-form/", "etcd_cleanup": True}
        for dest, option in expected.items():
            field = form[dest]
            assert field["default_value"] == given.get(dest, option.default), dest
            assert field["help_text"].startswith(option.help), dest
            assert f"[env {option.env_var}, default {option.default!r}]" in field["help_text"], dest
            assert field["is_secret"] == getattr(option, "secret", False), dest
        assert {dest for dest, field in form.items() if field["is_secret"]} == {"etcd_key", "etcd_user"}
        assert {"ConcurrencyLadderShape", "StepSpikeShape"} <= set(args["available_shape_classes"])
        assert [tab["title"] for tab in args["extended_tabs"]] == [
            "etcd latency",
            "etcd endpoints",
            "etcd SLA",
            "etcd disruptions",
            "etcd watchers",
            "etcd tail",
        ]
        # the picker lists every class and ticks EtcdPutUser alone; the header shows the endpoints as the host
        assert len(args["users"]) == 14 and args["available_user_classes"] == ["EtcdPutUser"]
        assert (args["host"], args["missing_host_warning"]) == (endpoints, False)
        refused = ui.post("/swarm", [("user_count", "1"), ("spawn_rate", "1")])  # no class ticked
        assert not refused["success"] and "Tick the User classes" in refused["message"], refused
        assert extended(ui.stats(), "etcd-sla") == [{"name": SLA_HINT, "measured": "", "verdict": ""}]

        started = ui.post(
            "/swarm",
            [
                ("user_count", "1"), ("spawn_rate", "1"), ("user_classes", "EtcdPutUser"),
                ("shape_class", "ConcurrencyLadderShape"), ("shape_ladder", "2,3"), ("shape_step_time", "2"),
                ("etcd_sla", "put:p99<5s,errors<1%"),
            ],
        )  # fmt: skip
        assert started["success"], started
        stats = ui.wait_for(lambda stats: stats["state"] == "stopped", "the shape's end", timeout=60)
        # each rung's users were all up and running before it ended: the shape's record says when, whatever the
        # machine's load made the page's polls miss
        rungs = json.loads(Path(f"{csv}_shape.json").read_text())["levels"]
        assert [(rung["users"], rung["running_at"] is not None) for rung in rungs] == [(2, True), (3, True)], rungs
        ended = ui.wait_for(lambda stats: extended(stats, "etcd-endpoints")[0]["role"] != "checking", "a leader")

        put = locust_row(stats, "put")
        [exact] = [row for row in extended(ended, "etcd-latency") if row["name"] == "put"]
        assert exact["count"] == put["num_requests"] > 0
        assert exact["failures"] == 0
        assert all(re.fullmatch(r"\d+\.\d{3}", exact[key]) for key in ("p50", "p90", "p99", "p999", "max")), exact
        p50, p90, p99, p999, top = (float(exact[key]) for key in ("p50", "p90", "p99", "p999", "max"))
        assert 0 < p50 <= p90 <= p99 <= p999 <= top
        [member] = extended(ended, "etcd-endpoints")
        assert {key: member[key] for key in ("name", "role", "load", "conns")} == {
            "name": etcd1.endpoints[0],
            "role": "leader",
            "load": "yes (rotation)",
            "conns": 1,
        }
        # the first election is not a change: none since the run started
        assert member["leaderchanges"] == 0 and re.fullmatch(r"\d+s ago", member["checked"])
        sla = extended(ended, "etcd-sla")
        assert [(row["name"], row["verdict"]) for row in sla[:2]] == [
            ("put p99 < 5s", "PASS"),
            ("Aggregated errors < 1%", "PASS"),
        ]
        # under them the rungs judged live as each ended (a 2 s rung may hold no whole second to judge)
        assert all(re.fullmatch(r"level 'ladder \d' at \d users", row["name"]) for row in sla[2:]), sla
        assert all(row["verdict"] == "pass" and row["measured"].startswith("put p99 ") for row in sla[2:]), sla
        assert sla[0]["measured"] == f"{p99 / 1000:.6f}s"

        lines = ui.get("/etcd/latency/csv").decode().splitlines()
        assert lines[0] == ",".join(SUMMARY_COLUMNS)
        assert lines[1].startswith(f"etcd,put,service,{put['num_requests']},0,")
        stderr = ui.stop_locust()
    assert "shape: plan complete at" in stderr
    assert "SLA put p99 < 5s: " in stderr


@pytest.mark.slow
def test_the_disruptions_tab_follows_the_schedule_and_the_sla_tab_judges_its_windows(etcd1, tmp_out):
    endpoints = ",".join(etcd1.endpoints)
    gates = ("--etcd-sla", "put:p99<60s,disrupt:gap<3600s")
    schedule = ("--etcd-disrupt", "defrag@1s", "--etcd-disrupt-allowed", *gates)
    args = ("-f", "locustfile.py", "--etcd-endpoints", endpoints, "--etcd-prefix", "/test-webui-disruptions/")
    args += ("--etcd-cleanup", *schedule, "EtcdPutUser")
    with web_ui(tmp_out, *args) as ui:
        before = ui.stats()
        [waiting] = extended(before, "etcd-disruptions")
        assert (waiting["name"], waiting["state"], waiting["cost"]) == ("defrag:leader@1s", "waiting", "")
        # before the run a gate waits: nothing failed yet
        assert extended(before, "etcd-sla") == [
            {"name": "put p99 < 60s", "measured": NOT_STARTED, "verdict": WAITING},
            {
                "name": "disrupt defrag:leader@1s gap < 3600s",
                "measured": "waiting for its disruption",
                "verdict": WAITING,
            },
        ]
        assert ui.post("/swarm", {"user_count": "2", "spawn_rate": "2"})["success"]

        def measured(stats: dict) -> bool:
            [row] = extended(stats, "etcd-disruptions")
            return row["state"] == "done" and row["cost"].startswith("put: ")

        # the cost is logged once the P99 is back within 1.2x of before, or 30 s after the window's end at the latest
        stats = ui.wait_for(measured, "the defragmentation's cost", timeout=60)
        [done] = extended(stats, "etcd-disruptions")
        assert done["members"] == etcd1.endpoints[0] and done["result"].startswith(
            f"defrag of {etcd1.endpoints[0]} took "
        )
        assert "longest gap without a success " in done["cost"]
        requests, gate = extended(stats, "etcd-sla")
        assert requests["name"] == "put p99 < 60s" and requests["verdict"] == "PASS", requests
        assert gate["name"] == "disrupt defrag:leader@1s gap < 3600s" and gate["verdict"] == "PASS", gate
        assert ui.post("/stop")["success"]
        stderr = ui.stop_locust()
    assert "SLA put p99 < 60s: " in stderr
    assert "SLA disrupt defrag:leader@1s gap < 3600s: " in stderr


def member_rows(stats: dict) -> dict[str, dict]:
    """The endpoints tab's members by URL (the alarm's row left out)."""
    return {row["name"]: row for row in extended(stats, "etcd-endpoints") if row["name"] != "ALARM"}


def wait_for_line(ui: WebUI, pattern: re.Pattern, timeout: float) -> None:
    """Until a line of the process's log matches ``pattern``; the process must not end before."""
    deadline = time.monotonic() + timeout
    while not pattern.search(ui.process.output()[1]):
        assert ui.process.poll() is None, f"locust exited early\n{ui.process.output()[1][-3000:]}"
        assert time.monotonic() < deadline, (
            f"no {pattern.pattern!r} within {timeout:g}s\n{ui.process.output()[1][-3000:]}"
        )
        time.sleep(0.05)


def quit_locust(ui: WebUI) -> str:
    """Stop the test and quit; its stderr, which must hold no traceback (the exit code follows the failures)."""
    ui.post("/stop")
    ui.process.terminate()
    stderr = ui.process.finish(timeout=60).stderr
    assert "Traceback" not in stderr, stderr[-3000:]
    return stderr


ANSWER_SHOWN_S = 2.0  # the promise: the tab shows a frozen member as not answering this soon after the log


@pytest.mark.slow
def test_the_endpoints_tab_shows_a_frozen_member_as_not_answering_as_soon_as_the_log_says_it_was_left_out(tmp_out):
    # a timeout longer than the freeze: only the pool's verdict, not a call's deadline, says the member is silent
    with running(LocalCluster(3, name="webui-freeze")) as cluster:
        args = ("-f", "locustfile.py", "--etcd-endpoints", ",".join(cluster.endpoints), "--etcd-timeout", "20")
        with web_ui(tmp_out, *args, "--etcd-skip-preflight", "--exit-code-on-error", "0", "EtcdPutUser") as ui:
            assert ui.post("/swarm", {"user_count": "8", "spawn_rate": "8"})["success"]
            ui.wait_for(
                lambda stats: (
                    sorted(row["role"] for row in member_rows(stats).values()) == ["follower", "follower", "leader"]
                ),
                "every member answering",
            )
            follower = next(index for index in range(3) if index != cluster.leader_index())
            url = cluster.endpoints[follower]
            others = [other for other in cluster.endpoints if other != url]
            cluster.pause_member(follower)
            try:
                wait_for_line(
                    ui, re.compile(rf"etcd endpoint {re.escape(url)} does not answer \(.*\); skipping it"), 30
                )
                logged = time.monotonic()
                while True:
                    rows = member_rows(ui.stats())
                    frozen = rows[url]
                    if frozen["role"].startswith("not answering") and frozen["load"].startswith("no"):
                        break
                    assert time.monotonic() - logged < ANSWER_SHOWN_S, (
                        f"{ANSWER_SHOWN_S:g}s after the log's line the tab still shows {frozen}"
                    )
                    time.sleep(0.1)
                shown_after = time.monotonic() - logged
                # each member is looked up on its own: the others' rows go on answering beside it
                assert all(rows[other]["role"] in ("leader", "follower") for other in others), rows
                assert all(rows[other]["load"] == "yes (rotation)" for other in others), rows
                assert frozen["load"] == "no (left out until it answers)", frozen
            finally:
                cluster.resume_member(follower)
            print(f"\nthe tab showed the frozen member as not answering {shown_after:.2f}s after the log: {frozen}")
            wait_for_line(ui, re.compile(rf"etcd endpoint {re.escape(url)} answers again; using it"), 30)
            back = ui.wait_for(lambda stats: member_rows(stats)[url]["load"] == "yes (rotation)", "the member back")
            assert member_rows(back)[url]["role"] in ("leader", "follower"), member_rows(back)
            quit_locust(ui)


@pytest.mark.slow
def test_the_endpoints_tab_follows_the_membership_a_learner_added_promoted_and_a_member_removed(tmp_out):
    schedule = ("--etcd-disrupt", "add-learner@1s,promote@15s,remove:follower@20s", "--etcd-local-members", "3")
    args = ("-f", "locustfile.py", *schedule, "--etcd-skip-preflight", "--exit-code-on-error", "0", "EtcdPutUser")
    with web_ui(tmp_out, *args) as ui:
        first = list(member_rows(ui.wait_for(lambda stats: len(member_rows(stats)) == 3, "the local members")))
        assert ui.post("/swarm", {"user_count": "2", "spawn_rate": "2"})["success"]

        def learner_listed(stats: dict) -> bool:
            return any(row["role"] == "learner" for row in member_rows(stats).values())

        stats = ui.wait_for(learner_listed, "the learner added", timeout=60)
        [(new, learner)] = [(url, row) for url, row in member_rows(stats).items() if url not in first]
        assert (learner["role"], learner["load"]) == ("learner", "no (learner)"), learner
        # the disruption's line names the member added, once it has caught up: after the tab lists it as a learner
        wait_for_line(ui, re.compile(re.escape(f"add-learner: {new} member ")), 60)
        promoted = ui.wait_for(
            lambda stats: member_rows(stats)[new]["load"] == "yes (rotation)", "the learner promoted", timeout=60
        )
        assert member_rows(promoted)[new]["role"] in ("leader", "follower"), member_rows(promoted)
        assert list(member_rows(promoted)) == [*first, new]
        removal = re.compile(r"disruption remove:follower@20s: remove: (\S+) member \S+ removed in ")
        wait_for_line(ui, removal, 60)
        gone = removal.search(ui.process.output()[1]).group(1)
        assert gone in [*first, new], gone
        after = ui.wait_for(lambda stats: gone not in member_rows(stats), "the removed member gone", timeout=30)
        assert list(member_rows(after)) == [url for url in [*first, new] if url != gone]
        assert all(row["load"] == "yes (rotation)" for row in member_rows(after).values()), member_rows(after)
        stderr = quit_locust(ui)
    assert f"etcd membership: {new} is a voting member; load goes to it" in stderr


@pytest.mark.slow
def test_a_watcher_only_run_shows_its_watchers_and_their_events_in_the_tab_and_the_metrics(etcd1, tmp_out):
    """EtcdWatcherUser counts no request, so Locust's own table stays empty: the watchers tab and the exporter carry
    its figures, which must be the events etcd sent for the puts made from outside."""
    prefix, watchers, puts = "/webui-watchers/", 20, 5
    metrics_port = free_port()
    fan_out = ("--etcd-watch-streams", "2", "--etcd-watchers-per-stream", "10", "--etcd-prometheus-port")
    args = ("-f", "locustfile.py", "--etcd-endpoints", ",".join(etcd1.endpoints), "--etcd-prefix", prefix)
    with web_ui(tmp_out, *args, "--etcd-cleanup", *fan_out, str(metrics_port), "EtcdWatcherUser") as ui:
        [hint] = extended(ui.stats(), "etcd-watchers")
        assert hint["name"].startswith("No watchers yet: EtcdWatcherUser opens them")
        assert ui.post("/swarm", {"user_count": "1", "spawn_rate": "1"})["success"]

        def figures(stats: dict) -> dict[str, str]:
            return {row["name"]: row["value"] for row in extended(stats, "etcd-watchers")}

        ui.wait_for(lambda stats: figures(stats).get("watchers") == str(watchers), "the watchers open", 60)
        client = etcd3.client(host="127.0.0.1", port=int(etcd1.endpoints[0].rsplit(":", 1)[1]))
        for index in range(puts):
            client.put(f"{prefix}{index}", "v")
        # however slow the machine, the events on their way are waited for: the count is what is judged
        stats = ui.wait_for(lambda stats: figures(stats)["events"] == str(puts * watchers), "every event", 60)
        assert figures(stats)["progress notifications"].isdigit()
        assert all(row["num_requests"] == 0 for row in stats["stats"])  # Locust's table: no request of its own
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as response:
            page = response.read().decode()
        assert re.search(rf"^locust_etcd_watchers {watchers}(\.0)?$", page, re.M), page
        assert re.search(rf"^locust_etcd_watch_events_total {puts * watchers}(\.0)?$", page, re.M), page
        assert ui.post("/stop")["success"]
        ui.stop_locust()


@pytest.fixture(scope="module")
def auth_etcd(tmp_path_factory) -> Iterator[tuple[LocalCluster, Path]]:
    """Auth on over TLS (no password goes over a plain channel); user ``webui`` may write under the default prefix."""
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    cluster = LocalCluster(1, name="webui-auth", tls=certs.cluster_tls())
    try:
        cluster.start(timeout=30)
        cluster.enable_auth("root-Pw-5d1e", "webui", "webui-Pw-8a2c", etcd_options.DEFAULT_PREFIX)
    except ClusterError as error:
        cluster.stop()
        pytest.fail(str(error), pytrace=False)
    yield cluster, certs.ca
    cluster.stop()


@pytest.mark.slow
def test_secrets_stay_out_of_the_page_and_the_run_keeps_them(auth_etcd, tmp_out):
    cluster, ca = auth_etcd
    secret = "webui:webui-Pw-8a2c"
    args = ("-f", "locustfile.py", "--etcd-endpoints", cluster.endpoints[0], "--etcd-cacert", str(ca))
    with web_ui(tmp_out, *args, "--etcd-user", secret, "--etcd-cleanup", "EtcdPutUser") as ui:
        assert "webui-Pw-8a2c" not in ui.page_html()
        assert ui.template_args()["extra_options"]["etcd_user"]["default_value"] == SECRET_PLACEHOLDER
        # what the browser sends back when nobody touched the field: the placeholder
        started = ui.post("/swarm", {"user_count": "2", "spawn_rate": "2", "etcd_user": SECRET_PLACEHOLDER})
        assert started["success"], started
        stats = ui.wait_for(lambda stats: (locust_row(stats, "put") or {}).get("num_requests", 0) > 20, "puts")
        assert stats["errors"] == [], stats["errors"]
        assert ui.post("/stop")["success"]
        stderr = ui.stop_locust()
    assert "refused user" not in stderr and "invalid auth token" not in stderr


# -- in a browser --


def ticked_classes(scope) -> list[str]:
    """The classes ticked in the class picker within ``scope`` (a page or a dialog)."""
    ticked = []
    for row in scope.locator("tbody tr").all():
        box = row.locator('input[type="checkbox"]')
        if box.count() and box.first.is_checked():
            ticked.append(row.locator("td").nth(1).inner_text())
    return ticked


@pytest.mark.slow
def test_a_person_starts_edits_and_stops_a_test_in_chromium(etcd1, tmp_out):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run installs it)", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: .venv/bin/pip install -r requirements-test.txt", pytrace=False)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    endpoints = ",".join(etcd1.endpoints)
    args = ("-f", "locustfile.py", "--class-picker", "--etcd-endpoints", endpoints, "--etcd-cleanup")
    args += ("--etcd-prefix", "/test-webui-chromium/")
    with web_ui(tmp_out, *args) as ui, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            page.goto(ui.url)

            # the header shows the endpoints as the host, and no notice asks for one
            assert page.locator("header").get_by_text(endpoints).is_visible()
            assert page.get_by_text("has no host attribute set").count() == 0
            # the class picker lists every workload and ticks EtcdPutUser alone
            assert ticked_classes(page) == ["EtcdPutUser"]
            assert page.locator("tr").filter(has_text=re.compile(r"^EtcdWatchUser$")).count() == 1

            # the form: Locust's fields, then ours under "Custom parameters" (names camel-cased by the page)
            page.get_by_text("Custom parameters").click()
            custom = page.locator(".MuiAccordionDetails-root").filter(has=page.locator('[name="etcdEndpoints"]'))
            names = [field.get_attribute("name") for field in custom.locator("input[name], select[name]").all()]
            first = ["etcdEndpoints", "etcdTarget", "etcdSla", "etcdLocalMembers", "etcdLocalBinary"]
            first.append("etcdLocalPeerRtt")
            assert names[:6] == first, names
            # choices as drop-downs
            for name, options in (
                ("etcdTarget", ["round-robin", "leader"]),
                ("etcdConsistency", ["l", "s"]),
                ("etcdLocalMembers", ["1", "2", "3", "4", "5"]),
            ):
                select = custom.locator(f'select[name="{name}"]')
                assert select.locator("option").all_inner_texts() == options, name
            # each field is labelled with its option's whole help, never cut with "…"
            for option in (option for option in OPTIONS if not option.repeatable):  # lists: no field
                label = custom.locator("label").filter(has_text=f"[env {option.env_var}, default ")
                assert option.help in label.inner_text(), option.flag
                assert label.evaluate("e => e.scrollWidth <= e.clientWidth && e.offsetHeight > 0"), option.flag
            # each field holds its default
            key_size = page.get_by_label(re.compile(r"Key size in bytes, prefix included\. \[env LOCUST_ETCD_KEY_SIZE"))
            assert key_size.get_attribute("name") == "etcdKeySize"
            assert key_size.input_value() == "256"
            user = page.get_by_label(re.compile(r"etcd authentication as name:password\."))
            assert user.get_attribute("name") == "etcdUser"
            assert user.get_attribute("type") == "password"
            page.locator('input[name="userCount"]').fill("2")
            page.locator('input[name="spawnRate"]').fill("2")
            page.get_by_role("button", name="Start").click()

            # Locust's statistics: a put row whose request count grows
            requests_column = 1 + [text.strip() for text in page.locator("thead th").all_inner_texts()].index(
                "# Requests"
            )
            put_row = page.locator("tbody tr").filter(has=page.locator("td", has_text=re.compile(r"^put$")))
            requests = put_row.locator(f"td:nth-child({requests_column})")
            first = int(requests.inner_text())
            # the page polls every 2 s and Locust caches the figures for 2 s: a new count within a few polls
            deadline = time.monotonic() + 15
            while (count := int(requests.inner_text())) == first and time.monotonic() < deadline:
                page.wait_for_timeout(500)
            assert 0 < first < count, (first, count)

            # the exact percentiles in the etcd latency tab
            page.get_by_role("tab", name="etcd latency").click()
            headers = [text.strip() for text in page.locator("thead th").all_inner_texts()]
            assert headers[:3] == ["Name", "Type", "Series"] and "P99.9 (ms)" in headers
            latency_put = page.locator("tbody tr").filter(has=page.locator("td", has_text=re.compile(r"^put$")))
            p99 = latency_put.locator(f"td:nth-child({headers.index('P99 (ms)') + 1})").inner_text()
            assert re.fullmatch(r"\d+\.\d{3}", p99) and float(p99) > 0, p99
            # no gates given: the SLA tab says how to add some
            page.get_by_role("tab", name="etcd SLA").click()
            page.get_by_text(SLA_HINT).wait_for()

            # more users while it runs
            page.get_by_role("button", name="Edit").click()
            page.locator('input[name="userCount"]').fill("4")
            page.get_by_role("button", name="Update").click()
            ui.wait_for(lambda stats: stats["user_count"] == 4, "4 users after the edit")
            page.wait_for_timeout(2500)
            page.screenshot(path=str(SCREENSHOT))

            page.get_by_role("button", name="Stop").click()
            ui.wait_for(lambda stats: stats["state"] == "stopped", "the stop")
            # the page stops polling once it has seen the run leave "running": a reload shows where it ended
            page.reload()
            page.get_by_text(re.compile(r"^stopped$", re.IGNORECASE)).first.wait_for()
            # a new test: EtcdPutUser alone ticked again
            page.get_by_role("button", name="New").click()
            new_test = page.locator(".MuiModal-root").filter(has_text="Start new load test")
            new_test.locator("tbody tr").first.wait_for()
            assert ticked_classes(new_test) == ["EtcdPutUser"]
        finally:
            browser.close()
        stderr = ui.stop_locust()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert SCREENSHOT.stat().st_size > 10_000
