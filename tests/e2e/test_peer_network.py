"""The network between the local etcd's members (--etcd-local-peer-rtt, zones, partitions, delays and one-way cuts):
etcd measures the round trip the peer proxy makes, each pair's in zones of five members too, a put to the leader waits
about one round trip more, a cut stops one direction only, and the options are refused in one line where they mean
nothing."""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

import etcd3
import grpc
import pytest
from checks import refusal_line, stderr_lines
from support import HEADLESS, REPO, read_csv_rows, run_analysis, run_locust, start_locust

from etcd_users.exposition import fetch_metrics, metric_sum
from etcd_users.features.disruptions.cluster_api import initial_cluster
from etcd_users.local import LocalCluster
from etcd_users.settings.round_trip import PeerRtt
from etcd_users.transport import learners

pytestmark = pytest.mark.e2e

RTT_MS = 20.0
DELAY_RTT_MS = 40.0  # what a delay disruption adds to one member's links
PEER_RTT = "etcd_network_peer_round_trip_time_seconds"
# etcd's prober keeps a smoothed round trip (srtt = 7/8 srtt + 1/8 rtt, from 0) of a probe every 4 s and observes it
# into the histogram 5 s after a peer is added, again every 5 s while the peer is unhealthy, then every 30 s: in a
# member's first half minute, each observation above zero follows exactly one successful probe, and is rtt / 8.
SMOOTHING = 1 / 8
ZERO_BUCKET = 0.0001  # etcd's lowest bound: an observation made before any probe answered (srtt still 0)


def peer_rtt_means(url: str) -> dict[str, float]:
    """A member's mean non-zero peer round-trip observation in seconds, by peer (none before its first: etcd observes a
    smoothed round trip of 0 until a probe answered)."""
    samples = fetch_metrics(url)
    means = {}
    for peer in {s.labels["To"] for s in samples if s.name == PEER_RTT + "_count"}:
        mine = [s for s in samples if s.name.startswith(PEER_RTT) and s.labels.get("To") == peer]
        total = sum(s.value for s in mine if s.name == PEER_RTT + "_sum")
        count = sum(s.value for s in mine if s.name == PEER_RTT + "_count")
        zeros = sum(s.value for s in mine if s.name == PEER_RTT + "_bucket" and float(s.labels["le"]) == ZERO_BUCKET)
        if count > zeros:
            means[peer] = total / (count - zeros)
        elif total > 0:  # every observation in the lowest bucket, some above zero: a round trip below 0.8 ms
            means[peer] = total / count
    return means


PEER_RTT_ATTEMPTS = 3


def three_members_round_trip(stderr_path) -> tuple[float, list[dict[str, float]]]:
    """Three new members through the peer proxy at ``RTT_MS``: the median of their six links' first observations in
    ms (a probe slowed by the loaded machine moves one link, not the figure), and the observations."""
    with open(stderr_path, "w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "etcd_users.local", "--members", "3", "--peer-rtt", f"{RTT_MS:g}ms"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        first = process.stdout.readline()
        assert first.startswith("LOCUST_ETCD_ENDPOINTS=http://127.0.0.1:"), stderr_path.read_text()
        urls = [f"{endpoint}/metrics" for endpoint in first.strip().split("=", 1)[1].split(",")]
        deadline = time.monotonic() + 20
        time.sleep(4)  # the first probe comes 4 s after a member starts: no scrapes to load the machine meanwhile
        while True:
            observed = [peer_rtt_means(url) for url in urls]
            if all(len(means) == 2 for means in observed) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert all(len(means) == 2 for means in observed), observed  # each member: both peers observed
    [line] = stderr_lines(stderr_path.read_text())
    assert f"; peer round trip {RTT_MS:g}ms through the peer proxy)" in line, line
    return statistics.median(mean for means in observed for mean in means.values()) / SMOOTHING * 1000, observed


@pytest.mark.slow
def test_etcd_measures_the_round_trip_the_peer_proxy_makes(tmp_path):
    """etcd observes one probe per link in a member's first seconds. Load only adds to a round trip: the bound below
    holds in every cluster, the one above for the lowest of up to three new clusters (a loaded machine held one up by
    14 ms over 20 in the suite's run)."""
    measured = []
    for attempt in range(PEER_RTT_ATTEMPTS):
        measured_ms, observed = three_members_round_trip(tmp_path / f"stderr{attempt}")
        print(f"\ncluster {attempt + 1}: median peer round trip {measured_ms:.1f} ms as etcd measures it")
        # within 20 % below in every cluster: the proxy never delivers a chunk early
        assert RTT_MS * 0.8 <= measured_ms, (measured_ms, observed)
        measured.append(measured_ms)
        if measured_ms <= RTT_MS * 1.5:
            break
    # above, a loaded machine adds its own scheduling to the proxy's and the members' (25.1 ms for 20 ms at a load
    # average of 10 to 30, the suite's three workers and a busy loop on two cores), so the bound there is 50 %
    lowest = min(measured)
    assert lowest <= RTT_MS * 1.5, measured
    # bucket-consistent too: rtt / 8 = 2.5 ms lies in etcd's (1.6 ms, 3.2 ms] bucket, or the next one when loaded
    assert 0.0016 < lowest * SMOOTHING / 1000 <= 0.0064


FIVE_ZONES, FIVE_ZONE_RTT_MS = ("a", "a", "b", "b", "c"), 10.0


def member_ids(cluster: LocalCluster) -> list[str]:
    """Each member's ID as etcd's metrics label it (hex), in the members' order."""
    with grpc.insecure_channel(cluster.endpoints[0].removeprefix("http://")) as channel:
        listed = learners.ClusterStub(channel).MemberList(learners.MemberListRequest(), timeout=5).members
    return [next(f"{m.ID:x}" for m in listed if endpoint in m.clientURLs) for endpoint in cluster.endpoints]


FIVE_ZONE_ATTEMPTS = 3


def five_members_round_trips() -> dict[tuple[int, int], float]:
    """Five new members in zones a,a,b,b,c and 10 ms between zones: each (member, peer)'s round trip in ms, as etcd's
    first observation has it (the members by their index)."""
    with LocalCluster(5, peer_rtt=PeerRtt(0.0), zones=FIVE_ZONES, zone_rtt=PeerRtt(FIVE_ZONE_RTT_MS)) as cluster:
        ids = member_ids(cluster)
        deadline = time.monotonic() + 30
        time.sleep(4)  # the first probe comes 4 s after a member starts
        while True:
            observed = [peer_rtt_means(url) for url in cluster.metrics_urls]
            if all(len(means) == 4 for means in observed) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert all(len(means) == 4 for means in observed), observed  # each member: its four peers observed
    return {
        (index, ids.index(peer)): mean / SMOOTHING * 1000
        for index, means in enumerate(observed)
        for peer, mean in means.items()
    }


def near_and_far(measured: dict[tuple[int, int], float]) -> tuple[dict, dict]:
    near = {pair: ms for pair, ms in measured.items() if FIVE_ZONES[pair[0]] == FIVE_ZONES[pair[1]]}
    far = {pair: ms for pair, ms in measured.items() if FIVE_ZONES[pair[0]] != FIVE_ZONES[pair[1]]}
    return near, far


@pytest.mark.slow
def test_five_members_in_zones_show_each_pair_s_round_trip_in_etcd_s_own_measure():
    """etcd observes one probe per pair in a member's first seconds, when a loaded machine may hold a member up for
    tens of ms. Load only adds to a round trip, so each pair's smallest observation over new clusters (up to three,
    until the zones stand apart) tells the proxy's delay from the machine's."""
    lowest: dict[tuple[int, int], float] = {}
    for attempt in range(1, FIVE_ZONE_ATTEMPTS + 1):
        measured = five_members_round_trips()
        print(f"\npeer round trips as etcd measures them, ms, cluster {attempt} (rows: the member; columns: its peer):")
        for member in range(5):
            print(
                f"{FIVE_ZONES[member]} {member}: " + " ".join(f"{measured.get((member, p), 0):6.1f}" for p in range(5))
            )
        near, far = near_and_far(measured)
        assert len(far) == 16 and len(near) == 4, measured
        # every pair of different zones, both ways (etcd's prober names no sender: the proxy traces its connections to
        # the member's process), at least one round trip between zones in every cluster: the proxy delivers nothing
        # early
        assert all(ms >= FIVE_ZONE_RTT_MS * 0.9 for ms in far.values()), far
        lowest = {pair: min(ms, lowest.get(pair, ms)) for pair, ms in measured.items()}
        near, far = near_and_far(lowest)
        # the pairs within a zone (0 ms asked) stand apart from the others, by their medians at least half the zones'
        # round trip apart: a proxy that delayed them as it delays the zones never gets there
        if statistics.median(near.values()) + FIVE_ZONE_RTT_MS / 2 <= statistics.median(far.values()):
            return
    raise AssertionError(f"the pairs within a zone never stood apart; their lowest {near}, the others' {far}")


def _until(call, seconds: float = 20.0):
    """``call()`` until it does not raise a gRPC error (etcd refuses a reconfiguration for a while after a change)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
def test_a_replaced_member_is_known_to_the_proxy_by_its_new_id_and_a_partition_cuts_it_off():
    with LocalCluster(3, peer_rtt=PeerRtt(0.0)) as cluster:
        leader = cluster.leader_index()
        victim = next(index for index in range(3) if index != leader)
        channel = grpc.insecure_channel(cluster.endpoints[leader].removeprefix("http://"))
        stub = learners.ClusterStub(channel)
        listed = stub.MemberList(learners.MemberListRequest(), timeout=5).members
        old_id = next(m.ID for m in listed if cluster.endpoints[victim] in m.clientURLs)
        # a disk failure, as replace does it: killed, removed, wiped, added back as a learner, started, promoted
        cluster.kill_member(victim)
        _until(lambda: stub.MemberRemove(learners.MemberRemoveRequest(ID=old_id), timeout=5))
        cluster.wipe_member(victim)
        request = learners.MemberAddRequest(peerURLs=[cluster.peer_url(victim)], isLearner=True)
        added = _until(lambda: stub.MemberAdd(request, timeout=5))
        new_id = added.member.ID
        cluster.start_member(
            victim, 30, initial_cluster=initial_cluster(added.members, cluster.member_name(victim), new_id)
        )
        _until(lambda: stub.MemberPromote(learners.MemberPromoteRequest(ID=new_id), timeout=5))
        # the proxy knows the link by the ID etcd's own requests give it now, beside the one it first learnt: the new
        # member's peers dial it with that ID as they take it in (a peer that has not applied the removal yet may
        # still dial the old one after it)
        deadline = time.monotonic() + 10
        while True:
            links = cluster.peer_links.command("stats").split()[1:]
            if f"{new_id:x}" in links[victim].split(":")[1].split("+") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert f"{new_id:x}" in links[victim].split(":")[1].split("+") and new_id != old_id, (links, new_id, old_id)
        client = etcd3.client("127.0.0.1", int(cluster.endpoints[leader].rsplit(":", 1)[1]), timeout=5)
        cluster.blackhole_member(victim)
        time.sleep(0.5)  # what it received before the cut is applied
        before = cluster.raft_indexes(victim)[1]
        for index in range(50):  # the others commit without it
            client.put(f"/after-the-cut/{index}", "v")
        time.sleep(1.0)
        assert cluster.raft_indexes(victim)[1] == before < cluster.raft_indexes(leader)[1]
        cluster.heal_member(victim)
        deadline = time.monotonic() + 20
        while cluster.raft_indexes(victim)[1] < cluster.raft_indexes(leader)[1] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cluster.raft_indexes(victim)[1] >= cluster.raft_indexes(leader)[1] - 1  # back, caught up
        client.close()
        channel.close()


def put_ms(tmp_out, name: str, *args: str) -> tuple[float, float]:
    """The fastest put and the P50, in ms, of a fixed-rate run to the leader of three local members."""
    prefix = tmp_out / name
    timing = ("-u", "2", "-r", "2", "-t", "6s", "--csv", str(prefix), "--etcd-local-members", "3")
    rate = ("--etcd-target", "leader", "--etcd-user-rate", "20", "--etcd-metrics-interval", "0")
    result = run_locust(*HEADLESS, *timing, *rate, *args, "EtcdPutUser", timeout=120)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (tmp_out / f"{name}.log").write_text(result.stderr)
    rows = read_csv_rows(f"{prefix}_latency.csv")
    [put] = [row for row in rows if row["Name"] == "put" and row["Series"] == "service"]
    assert int(put["Count"]) > 100 and put["Failures"] == "0", put
    return float(put["Min"]), float(put["P50"])


# The fastest request is the physical figure: its round trips and the least work of the members and the client. A P50
# adds what the machine is doing at the time (a WAL fsync P99 of 60 ms was seen in CI, and a P50 without a round trip
# of 14.6 ms), so two runs' P50s differ by more than the round trip and by less; every P50 still waits the round trip.


@pytest.mark.slow
def test_a_put_to_the_leader_waits_about_one_round_trip_more(tmp_out):
    direct, _ = put_ms(tmp_out, "direct")
    proxied, proxied_p50 = put_ms(tmp_out, "proxied", "--etcd-local-peer-rtt", f"{RTT_MS:g}ms")
    # the leader commits once a follower has the entry: one round trip to the nearer follower; never less (the proxy
    # delivers nothing early), and not two (21.1 ms more at the least seen under CI's load)
    assert RTT_MS * 0.95 <= proxied - direct < RTT_MS * 1.5, (direct, proxied)
    assert proxied_p50 >= RTT_MS, proxied_p50


@pytest.mark.slow
def test_a_put_to_a_leader_waits_for_the_nearest_follower_of_its_zone_or_of_the_other(tmp_out):
    zoned = ("--etcd-local-peer-rtt", "0ms", "--etcd-local-zones", "a,a,b", "--etcd-local-zone-rtt", f"{RTT_MS:g}ms")
    fastest, p50 = put_ms(tmp_out, "zoned", *zoned)
    summary = json.loads((tmp_out / "zoned_summary.json").read_text())
    started = next(line for line in stderr_lines((tmp_out / "zoned.log").read_text()) if "started a local etcd" in line)
    assert f", zones a,a,b {RTT_MS:g}ms apart)" in started, started
    endpoints = started.rsplit("): ", 1)[1].split(";")[0].split(",")
    # the leader commits once one follower has the entry: a leader of zone a has the other member of a at hand, the
    # member alone in zone b waits one round trip between zones
    if summary["environment"]["cluster"]["leader"] == endpoints[2]:
        assert RTT_MS * 0.95 <= fastest < RTT_MS * 1.5 and p50 >= RTT_MS, (fastest, p50)
    else:
        assert fastest < RTT_MS / 2, (fastest, p50)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-local-peer-rtt", "10ms"),
            "--etcd-local-peer-rtt: sets the network of the local etcd the tool starts, and --etcd-endpoints gives a "
            "cluster of your own; leave one of them out",
        ),
        (
            ("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-local-heartbeat", "50"),
            "--etcd-local-heartbeat: sets the network of the local etcd",
        ),
        (
            ("--etcd-endpoints", "http://127.0.0.1:1", "--etcd-local-zones", "a,a,b"),
            "--etcd-local-zones: sets the network of the local etcd",
        ),
        (("--etcd-local-peer-rtt", "10"), "--etcd-local-peer-rtt: '10' is not a round trip"),
        (("--etcd-local-election", "200"), "--etcd-local-election: 200 ms is less than 5 heartbeats of 100 ms"),
    ],
)
def test_the_network_options_are_refused_in_one_line(args, message, tmp_out):
    result = run_locust(*HEADLESS, "-u", "1", "-t", "1s", *args, "EtcdPutUser", timeout=60)
    assert message in refusal_line(result)


@pytest.mark.slow
def test_a_partitioned_leader_is_replaced_the_writes_resume_and_the_audit_passes(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "4", "-r", "4", "-t", "16s", "--csv", str(prefix), "--etcd-local-members", "3")
    network = ("--etcd-local-peer-rtt", "0ms", "--etcd-metrics-interval", "1")
    result = run_locust(*HEADLESS, *timing, *network, "--etcd-disrupt", "partition:leader@3s+8s", "EtcdPutUser")
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.returncode in (0, 1), output[-3000:]  # 1: requests in flight to the cut leader failed
    [window] = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    assert window["ok"] and " cut off from its peers for " in window["result"], window
    assert window["finished_at"] - window["started_at"] >= 8.0
    # the leadership as the members' Status told it: the others elect a new leader after at least one election
    # timeout (raft draws each member's from 1 to 2 of them; 1 s here), in a later term, and keep it after the heal:
    # 2.2 to 2.6 s after the cut in six runs, 4.28 s in one; the cut's 8 s leave room for a slow one
    [step] = window["steps"]
    assert step["leader_before"] == step["member"] == window["members"][0], step
    assert step["leader_during"] not in (None, step["member"]) and step["term_during"] > step["term_before"], step
    assert 0.9 < step["elected_after_s"] < 8.0, step
    assert step["leader_after"] and step["term_after"] >= step["term_during"], step
    assert f"{step['leader_during']} elected {step['elected_after_s']:.2f} s after the cut" in window["result"]
    summary = json.loads((tmp_out / "run_summary.json").read_text())
    assert summary["members"]["leader_changes"]["value"] >= 1, summary["members"]
    # what the members counted over the window, in the live line and the window's record
    said = window["members_said"]["leader_changes"]
    assert said["value"] >= 1 and said["member"].startswith("http://127.0.0.1:"), window["members_said"]
    line = f"disruption partition:leader@3s+8s, what the members counted: leader changes {said['value']:g} ("
    assert line in output
    # writes go on after the link is healed: puts counted in the seconds after the window's end
    history = read_csv_rows(tmp_out / "run_stats_history.csv")
    after = [
        int(row["Total Request Count"])
        for row in history
        if row["Name"] == "Aggregated" and float(row["Timestamp"]) > window["finished_at"] + 1
    ]
    assert len(after) >= 2 and after[-1] > after[0], after
    audit = json.loads((tmp_out / "run_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]
    # the disruption table sets the members' own figures beside the clients': etcd counted the election
    analysed = run_analysis(str(prefix), "--out", str(tmp_out / "analysis"))
    assert analysed.returncode == 0, analysed.stderr[-3000:]
    [row] = read_csv_rows(tmp_out / "analysis" / "disruptions.csv")
    assert float(row["leader changes"]) == said["value"], row


@pytest.mark.slow
def test_a_run_that_stops_during_a_partition_heals_it_first_and_keeps_what_the_window_saw(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "4", "-r", "4", "-t", "5s", "--csv", str(prefix), "--etcd-local-members", "3")
    # without --etcd-local-peer-rtt: the local etcd starts the peer proxy for the partition, without a delay
    cut = ("--etcd-disrupt", "partition:follower@2s+30s", "--exit-code-on-error", "0")
    result = run_locust(*HEADLESS, *timing, *cut, "EtcdPutUser")
    output = result.stdout + result.stderr
    assert "Traceback" not in output and result.returncode == 0, output[-3000:]
    assert ", peer round trip 0ms through the peer proxy (for partition:follower@2s+30s)" in output
    [window] = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    [step] = window["steps"]
    assert step["member"] == window["members"][0] and step["leader_before"] not in (None, step["member"]), step
    assert step["leader_during"] == step["leader_before"], step  # a cut follower leaves the leader in place
    audit = json.loads((tmp_out / "run_audit.json").read_text())
    assert audit["passed"] and audit["hashkv"]["equal"], audit["line"]  # healed: all three compared


def probe_ms(peer_url: str) -> float:
    """One GET of etcd's /raft/probing on a member's peer URL (the proxy's port), timed as etcd's prober times it."""
    started = time.perf_counter()
    with urllib.request.urlopen(f"{peer_url}/raft/probing", timeout=5) as answer:
        answer.read()
    return (time.perf_counter() - started) * 1000


@pytest.mark.slow
def test_a_delayed_follower_s_links_take_the_round_trip_asked_and_the_others_do_not(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "2", "-r", "2", "-t", "11s", "--csv", str(prefix), "--etcd-local-members", "3")
    rate = ("--etcd-target", "leader", "--etcd-user-rate", "20", "--etcd-metrics-interval", "0")
    delay = ("--etcd-local-peer-rtt", "0ms", "--etcd-disrupt", f"delay:follower@2s+6s={DELAY_RTT_MS:g}ms")
    probes: list[tuple[float, str, float]] = []  # (unix time, the member's client URL, the probe's round trip)
    with start_locust(*HEADLESS, *timing, *rate, *delay, "EtcdPutUser", log_dir=tmp_out) as locust:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"started a local etcd .*?: (http://\S+);", locust.output()[1])):
            assert locust.poll() is None and time.monotonic() < deadline, locust.output()[1][-3000:]
            time.sleep(0.2)
        peers = peer_urls(found[1].split(",")[0])
        while locust.poll() is None:
            for client, peer in peers.items():
                try:
                    probes.append((time.time(), client, probe_ms(peer)))
                except OSError:  # the run's end stops the members under the last probes
                    continue
            time.sleep(0.1)
        result = locust.finish()
    output = result.stdout + result.stderr
    assert "Traceback" not in output and result.returncode == 0, output[-3000:]
    [window] = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    assert window["ok"] and f"round trip to its peers {DELAY_RTT_MS:g}ms longer" in window["result"], window
    [step] = window["steps"]
    [delayed] = window["members"]
    assert step["leader_before"] not in (None, delayed) and step["leader_during"] == step["leader_before"], step

    def fastest(member: str, inside: bool) -> float:
        # a margin on each side: the proxy's command and the probe's own round trip are not instant
        begin, end = window["started_at"] + 0.3, window["finished_at"] - 0.3
        picked = [ms for at, client, ms in probes if client == member and (begin <= at <= end) == inside]
        assert len(picked) >= 3, (member, inside, probes)  # a loaded machine probes slowly
        return min(picked)

    # the fastest probe is the link's own figure: a median adds what the machine's load does to every probe at the time
    # (CI saw medians of 50 ms on the links left at 0 ms, and 130 ms on the delayed one)
    others = [client for client in peers if client != delayed]
    during = {client: fastest(client, True) for client in peers}
    outside = {client: fastest(client, False) for client in peers}
    print(f"fastest probe round trips, ms: during the window {during}, outside it {outside}")
    # the same tolerance as etcd's reading of the global round trip above, and the probe's own cost (the other members'
    # links keep the 0 ms asked: their figure is that cost): the proxy never delivers early; the delay applied twice
    # (80 ms) would be over
    own_cost = max(during[client] for client in others)
    assert DELAY_RTT_MS * 0.8 <= during[delayed] <= DELAY_RTT_MS * 1.5 + own_cost, (during, outside)
    # the others keep the cluster's own round trip, and the delayed member gets it back after the window: both well
    # below the delayed member's during it, by most of the round trip added
    assert during[delayed] - own_cost >= DELAY_RTT_MS * 0.5, (during, outside)
    assert during[delayed] - outside[delayed] >= DELAY_RTT_MS * 0.5, (during, outside)


def peer_urls(client_url: str) -> dict[str, str]:
    """Each member's client URL and the peer URL it advertises (the proxy's port), from etcd's JSON gateway."""
    request = urllib.request.Request(f"{client_url}/v3/cluster/member/list", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:
        members = json.loads(answer.read())["members"]
    return {member["clientURLs"][0]: member["peerURLs"][0] for member in members}


def members_by_url(client_url: str) -> dict[str, str]:
    """Each member's client URL and its ID as etcd's metrics label it (hex), from etcd's JSON gateway."""
    request = urllib.request.Request(f"{client_url}/v3/cluster/member/list", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as answer:
        members = json.loads(answer.read())["members"]
    return {member["clientURLs"][0]: f"{int(member['ID']):x}" for member in members}


def applied_and_received(client_url: str) -> tuple[int, dict[str, float]]:
    """A member's raft applied index and the bytes it received from each peer (by the peer's ID), from its /metrics."""
    samples = fetch_metrics(f"{client_url}/metrics", timeout=1.0)
    received = {s.labels["From"]: s.value for s in samples if s.name == "etcd_network_peer_received_bytes_total"}
    return int(metric_sum(samples, "etcd_server_proposals_applied_total")), received


@pytest.mark.slow
def test_a_one_way_cut_from_the_leader_stops_a_follower_s_applied_index_while_its_messages_reach_the_leader(tmp_out):
    prefix = tmp_out / "run"
    timing = ("-u", "2", "-r", "2", "-t", "14s", "--csv", str(prefix), "--etcd-local-members", "3")
    rate = ("--etcd-target", "leader", "--etcd-user-rate", "20", "--etcd-metrics-interval", "0")
    # without --etcd-local-peer-rtt: the local etcd starts the peer proxy for the cut
    cut = ("--etcd-disrupt", "cut:leader->follower@3s+6s", "--exit-code-on-error", "0")
    samples: list[tuple[float, str, int, dict[str, float]]] = []  # (unix time, member, applied index, received)
    with start_locust(*HEADLESS, *timing, *rate, *cut, "EtcdPutUser", log_dir=tmp_out) as locust:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"started a local etcd .*?: (http://\S+);", locust.output()[1])):
            assert locust.poll() is None and time.monotonic() < deadline, locust.output()[1][-3000:]
            time.sleep(0.2)
        endpoints = found[1].split(",")
        ids = members_by_url(endpoints[0])
        while locust.poll() is None:
            for url in endpoints:
                try:
                    samples.append((time.time(), url, *applied_and_received(url)))
                except OSError:  # the run's end stops the members under the last scrapes
                    continue
            time.sleep(0.2)
        result = locust.finish()
    output = result.stdout + result.stderr
    assert "Traceback" not in output and result.returncode == 0, output[-3000:]
    assert "peer round trip 0ms through the peer proxy (for cut:leader->follower@3s+6s)" in output
    [window] = json.loads((tmp_out / "run_disruptions.json").read_text())["windows"]
    leader, follower = window["members"]
    assert (
        window["ok"]
        and f"{leader}'s messages to {follower} dropped (its messages to {leader} passed)" in (window["result"])
    ), window
    [step] = window["steps"]
    assert step["leader_before"] == step["member"] == leader and step["to"] == follower, step

    def during(member: str) -> list[tuple[int, float, float]]:
        """The member's (applied index, bytes from the leader, bytes from the follower) inside the cut: a margin
        after its start for what was on its way, and before its end for the proxy's command."""
        begin, end = window["started_at"] + 0.5, window["finished_at"] - 0.2
        return [
            (applied, received.get(ids[leader], 0.0), received.get(ids[follower], 0.0))
            for at, url, applied, received in samples
            if url == member and begin <= at <= end
        ]

    cut_off, leading = during(follower), during(leader)
    assert len(cut_off) >= 3 and len(leading) >= 3, samples  # a loaded machine scrapes slowly
    print(f"\nthe follower during the cut: {cut_off}\nthe leader during the cut: {leading}")
    # the leader's messages do not reach the follower: it applies nothing and receives no byte from the leader
    assert len({applied for applied, _, _ in cut_off}) == 1, cut_off
    assert len({from_leader for _, from_leader, _ in cut_off}) == 1, cut_off
    # the follower's messages (its votes, as it hears no leader) reach the leader, which goes on committing
    assert leading[-1][0] > leading[0][0], leading
    assert leading[-1][2] > leading[0][2], leading
    # mended: the follower catches up
    last_applied = max(applied for at, url, applied, _ in samples if url == follower)
    assert last_applied > cut_off[-1][0], (last_applied, cut_off)
