"""What the two harnesses share: their subprocesses, the local etcd, the machine description."""

import locust  # noqa: F401  (etcd_users applies gevent's monkey patching: let it come before anything else loads)

import argparse
import contextlib
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit

import gevent

from etcd_users.core.features import OPTIONS
from etcd_users.local import ClusterError, LocalCluster, find_etcd_binary

REPO = Path(__file__).resolve().parent.parent
PROBE = "benchmarks/cpu_probe.py"
DEFAULTS = {option.flag: option.default for option in OPTIONS}
_TAIL_CHARS = 300
POLL_SECONDS = 0.5


def locust_etcd_flags() -> list[str]:
    """Flags every measured Locust run gets, where this version of the tool has them: run among the keys the
    previous runs left under the prefix (reads need them), and skip the start-up fsync probe (not measured)."""
    return [flag for flag in ("--etcd-allow-existing", "--etcd-skip-preflight") if DEFAULTS.get(flag) is False]


class BenchmarkError(RuntimeError):
    """A run that cannot be measured, told in one line."""


def positive_ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more integers greater than zero")
    return values


def fail_line(program: str, error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{program}: error: {text[0] if text else type(error).__name__}"


@contextlib.contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """SIGTERM ends the harness like Ctrl-C, so its children and etcd are stopped on the way out."""

    def interrupt(signum, frame) -> None:
        raise KeyboardInterrupt

    # an interrupt that lands in gevent's hub reaches the main greenlet anyway; the hub need not print it
    hub = gevent.get_hub()
    not_error = hub.NOT_ERROR
    hub.NOT_ERROR = (*not_error, KeyboardInterrupt)
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        hub.NOT_ERROR = not_error


def child_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without the LOCUST_* and --etcd-* variables that would change the run behind our flags."""
    ours = {option.env_var for option in OPTIONS} | {option.retired_env_var for option in OPTIONS}
    environment = {key: value for key, value in os.environ.items() if not key.startswith("LOCUST_") and key not in ours}
    environment["PYTHONUNBUFFERED"] = "1"
    environment.update(extra or {})
    return environment


class Child:
    """A subprocess in its own session (Ctrl-C reaches only the harness), its output in files under ``log_dir``."""

    def __init__(self, name: str, command: Sequence[str], log_dir: Path, env: dict[str, str], cwd: Path = REPO) -> None:
        self.name = name
        stem = "".join(c if c.isalnum() else "-" for c in name)
        self.stdout_path = log_dir / f"{stem}.stdout"
        self.stderr_path = log_dir / f"{stem}.stderr"
        with open(self.stdout_path, "wb") as stdout, open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                list(command),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchmarkError(
                f"{self.name} did not finish within {timeout:.0f}s (log: {self.stderr_path})"
            ) from None

    def terminate(self, grace: float = 10.0) -> int:
        """SIGTERM (Locust shuts down cleanly on it), SIGKILL after ``grace`` seconds."""
        if self.running():
            self.process.terminate()
        try:
            return self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.process.returncode

    def kill(self) -> None:
        # the whole group: whatever the child started goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stderr_tail(self) -> str:
        """The last meaningful line of stderr, for a one-line error."""
        try:
            lines = [line.strip() for line in self.stderr_path.read_text(errors="replace").splitlines()]
        except OSError:
            return ""
        lines = [line for line in lines if line and not line.startswith(("Traceback", "File ", "^"))]
        return lines[-1][-_TAIL_CHARS:] if lines else ""

    def failure(self, what: str) -> BenchmarkError:
        tail = self.stderr_tail()
        return BenchmarkError(f"{self.name} {what}{': ' + tail if tail else ''} (log: {self.stderr_path})")


@contextlib.contextmanager
def child(name: str, command: Sequence[str], log_dir: Path, env: dict[str, str], cwd: Path = REPO) -> Iterator[Child]:
    """A started Child, killed with its group if still running when the block is left (error or Ctrl-C)."""
    started = Child(name, command, log_dir, env, cwd)
    try:
        yield started
    finally:
        if started.running():
            started.kill()


def read_result(path: Path, who: Child) -> dict:
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        raise who.failure("wrote no measurement") from None
    if result.get("state") != "done":
        raise BenchmarkError(f"{who.name}: {result.get('error', 'the measurement did not finish')}")
    return result


def process_rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in kB."""
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    except (OSError, ValueError):
        raise BenchmarkError(f"cannot read the memory of process {pid}") from None
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def connections_to(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` to ``port`` (the sockets among its open files)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed in between
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        raise BenchmarkError(f"cannot list the open files of process {pid}") from None
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state, inode = fields[2], fields[3], fields[9]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and inode in inodes:
                count += 1
    return count


def read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet
        return {}


def watch(process: Child, out: Path, timeout: float, on_sample=None, until_done: bool = False) -> dict:
    """Poll ``out`` (the probe's or bare_aio's measurement file) until the child exits, or with ``until_done`` until
    the file says done; call ``on_sample(process)`` at each poll while it says measuring. Returns its last state."""
    deadline = time.monotonic() + timeout
    while True:
        state = read_state(out)
        if state.get("state") == "measuring" and on_sample is not None:
            on_sample(process)
        elif state.get("state") == "failed":
            raise BenchmarkError(f"{process.name}: {state.get('error')}")
        if until_done and state.get("state") == "done":
            return state
        if not process.running():
            return read_state(out)
        if time.monotonic() > deadline:
            process.kill()
            raise BenchmarkError(f"{process.name} did not finish within {timeout:.0f}s (log: {process.stderr_path})")
        time.sleep(POLL_SECONDS)


class ConnectionSampler:
    """The most TCP connections to etcd a child held while its window was open."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.most: int | None = None

    def __call__(self, process: Child) -> None:
        count = connections_to(process.pid, self.port)
        self.most = count if self.most is None else max(self.most, count)


@contextlib.contextmanager
def local_etcd() -> Iterator[LocalCluster]:
    """A 1-member etcd on 127.0.0.1, stopped however the block is left; it compacts only when ``Compactor`` asks,
    between runs (etcd's own periodic compaction could land inside a window, and on a revision it already
    compacted, answer the Compactor 400)."""
    cluster = LocalCluster(1, name="locust-etcd-bench", auto_compaction_retention=None)
    try:
        cluster.start(timeout=30)
    except ClusterError as error:
        raise BenchmarkError(f"cannot start a local etcd: {error}") from None
    try:
        yield cluster
    finally:
        cluster.stop()


def client_port(cluster: LocalCluster) -> int:
    return urlsplit(cluster.endpoints[0]).port


class Compactor:
    """Compacts the local etcd to its newest revision between runs.

    Puts at full speed would otherwise fill etcd's 2 GiB quota over a long harness run ("mvcc: database space
    exceeded"); etcd's own periodic compaction could land inside a window and add noise.
    """

    def __init__(self, cluster: LocalCluster) -> None:
        self.base = cluster.endpoints[0]
        self.compacted = 0
        self._direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy

    def _post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"{self.base}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with self._direct.open(request, timeout=60) as response:
            return json.loads(response.read() or b"{}")

    def __call__(self) -> None:
        try:
            # the key "\0" is never written: the answer is the header with the current revision
            revision = int(self._post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
            if revision > self.compacted:
                self._post("/v3/kv/compaction", {"revision": revision, "physical": True})
                self.compacted = revision
        except (urllib.error.URLError, OSError, ValueError, KeyError) as error:
            raise BenchmarkError(f"cannot compact the local etcd at {self.base}: {error}") from None


def machine() -> dict:
    cpu_model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    try:
        binary = find_etcd_binary()
        first = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.splitlines()
        etcd_version = first[0].split(":", 1)[1].strip() if first else "unknown"
    except (ClusterError, OSError, IndexError, subprocess.TimeoutExpired):
        etcd_version = "unknown"

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "absent"

    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "cpu_model": cpu_model,
        "load_average": list(os.getloadavg()),
        "etcd_version": etcd_version,
        "python": platform.python_version(),
        "packages": {name: version(name) for name in ("locust", "grpcio", "protobuf", "uvloop", "gevent")},
    }


def machine_lines(info: dict) -> list[str]:
    packages = ", ".join(f"{name} {number}" for name, number in info["packages"].items())
    load = " ".join(f"{value:.2f}" for value in info["load_average"])
    return [
        f"date: {info['date']}",
        f"machine: {info['host']}, {info['cores']} cores ({info['usable_cores']} usable), {info['cpu_model']}; "
        f"load average at start {load}",
        f"etcd {info['etcd_version']} (1 member on 127.0.0.1); Python {info['python']}, {packages}",
    ]


def log_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def run_and_report(program: str, args: argparse.Namespace, run, report) -> int:
    """``run(args, logs)`` in a log folder of its own, ``report(result)`` printed, then ``finish``; a benchmark's
    failure or an interrupt ends it with its one line and the logs kept."""
    logs = log_dir(f"locust-etcd-{program.removeprefix('benchmarks.').replace('_', '-')}-")
    try:
        with stop_signals_interrupt():
            result = run(args, logs)
    except KeyboardInterrupt:
        sys.stderr.write(f"{program}: interrupted; logs in {logs}\n")
        return 130
    except BenchmarkError as error:
        sys.stderr.write(fail_line(program, error) + "\n")
        return 1
    sys.stdout.write(report(result) + "\n")
    return finish(program, args, result, logs)


def finish(program: str, args: argparse.Namespace, result: dict, logs: Path) -> int:
    """Write ``--json`` and keep the runs' logs only with ``--keep-logs``; the exit status."""
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        except OSError as error:
            sys.stderr.write(f"{program}: error: cannot write --json {args.json}: {error.strerror}\n")
            return 1
    if args.keep_logs:
        sys.stderr.write(f"{program}: logs in {logs}\n")
    else:
        shutil.rmtree(logs, ignore_errors=True)
    return 0
