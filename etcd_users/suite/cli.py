"""The command line of benchmark suites (``python -m etcd_users.suite``): ``run`` a suite file, or print its plan
with ``--dry-run``; ``check`` suite files. Exit status: 0 all runs done, 1 some failed, 2 a bad suite file, output
directory or no etcd binary, 3 the suite's ``compare:`` found a row worse, 130 (143 for SIGTERM) interrupted."""

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from etcd_users.files import SUITE_JSON
from etcd_users.local import ClusterError
from etcd_users.suite.execute import Signals, SuiteRunner, clock
from etcd_users.suite.fit import check_fit, connections_per_process, hard_limit, limit_text
from etcd_users.suite.loader import load_suite, read_document, renamed
from etcd_users.suite.plan import combinations, compare_command, grid, locust_command, plan
from etcd_users.suite.schema import LOCAL_CLUSTER_OPTIONS, Suite, SuiteError

PROG = "python -m etcd_users.suite"
RENAMED_PREFIX = "locust-etcd: error: "


def _check_out_dir(out: Path, suite: Suite) -> None:
    """Refuse an output directory that holds another suite's suite.json."""
    existing = out / SUITE_JSON
    if not existing.is_file():
        return
    try:
        name = json.loads(existing.read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        raise SuiteError(f"{existing}: unreadable; delete it or choose another --out") from None
    if name != suite.name:
        raise SuiteError(f"--out: {out} holds suite {name!r}, not {suite.name!r}; choose another --out")


def dry_run(suite: Suite, out: Path) -> None:
    """Print the grid, each combination with its id and the command of its runs, and how many runs ``out`` holds
    done already; write nothing."""
    runner = SuiteRunner(suite, out, Signals())
    runner.prepare()
    runs = plan(suite)
    todo = [run for run in runs if not runner.is_done(run)]
    combos = combinations(suite)
    limit = hard_limit()
    size = "1- or 3-member (members axis)" if "members" in suite.axis_names else f"{suite.members}-member"
    target = suite.endpoints or f"a fresh {size} local etcd per run"
    if suite.etcd_args and not suite.endpoints:
        target += f" (etcd {' '.join(suite.etcd_args)})"
    print(
        f"suite {suite.name}{' (quick)' if suite.quick else ''} from {suite.path}: {grid(suite, len(runs))} "
        f"against {target}; "
        f"{len(runs) - len(todo)} done earlier; about {clock(runner.estimate(todo))}; output in {out}"
    )
    for combo in combos:
        done = sum(runner.is_done(run) for run in runs if run.combination.id == combo.id)
        first = next(run for run in runs if run.combination.id == combo.id)
        local = [f"--etcd-{name} {combo.options[name]}" for name in LOCAL_CLUSTER_OPTIONS if combo.options.get(name)]
        shaped = f" ({', '.join(local)})" if local else ""
        endpoints = suite.endpoints or f"<local {combo.members}-member etcd{shaped}>"
        command = locust_command(suite, first, out / combo.id / "rep{k}", endpoints, mask=True, master_port="PORT")
        print(f"  {combo.id}: {combo.label}  ({done}/{suite.repeats} done)")
        print(
            f"    {combo.users} users over {combo.processes} process{'es' if combo.processes != 1 else ''}, "
            f"{connections_per_process(suite, combo)} connections each (open-file limit {limit_text(limit)})"
        )
        print(f"    {' '.join(_quote(part) for part in command)}")
    if suite.compare is not None:
        command = compare_command(suite, out)
        print(f"then compare: python {' '.join(_quote(part) for part in command[1:])}")


def _quote(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z0-9_./:=,+{}<>*@-]+", part) else "'" + part.replace("'", "'\\''") + "'"


def default_out(suite: Suite) -> Path:
    return Path("out") / "suites" / f"{suite.name}{'-quick' if suite.quick else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Run a benchmark suite: a grid of settings × repeats.")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run every combination of a suite file (resumable)")
    run_parser.add_argument(
        "suite", type=Path, metavar="SUITE", help="suite file (YAML), e.g. suites/single-vs-three-members.yaml"
    )
    run_parser.add_argument("--out", type=Path, metavar="DIR", help="output directory (default out/suites/NAME)")
    run_parser.add_argument("--quick", action="store_true", help="apply the suite's quick: section (a short run)")
    run_parser.add_argument("--dry-run", action="store_true", help="print the plan and the commands, run nothing")
    check_parser = commands.add_parser("check", help="validate suite files (with and without their quick section)")
    check_parser.add_argument("suites", type=Path, nargs="+", metavar="SUITE")
    args = parser.parse_args(argv)
    for path in args.suites if args.command == "check" else [args.suite]:
        new_path = renamed(path)
        if new_path is not None:
            print(f"{RENAMED_PREFIX}{path} was renamed: use {new_path}", file=sys.stderr)
            return 2
    try:
        if args.command == "check":
            return _check(args.suites)
        suite = load_suite(args.suite, quick=args.quick)
        out = args.out or default_out(suite)
        _check_out_dir(out, suite)
        check_fit(suite, combinations(suite), hard_limit())
        if args.dry_run:
            dry_run(suite, out)
            return 0
        with Signals() as signals:
            runner = SuiteRunner(suite, out, signals)
            runner.prepare()
            return runner.execute()
    except (SuiteError, ClusterError) as error:
        print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into head: not an error
        sys.stdout = open(os.devnull, "w")  # Python flushes stdout at exit
        return 0
    except OSError as error:  # an output directory that cannot be written, a full disk
        print(f"error: {error}; check --out", file=sys.stderr)
        return 2


def _check(paths: Sequence[Path]) -> int:
    status = 0
    for path in paths:
        try:
            suite = load_suite(path)
            quick = ""
            if "quick" in read_document(path):
                quick_suite = load_suite(path, quick=True)
                quick = f"; quick: {grid(quick_suite, len(plan(quick_suite)))}"
            print(f"{path}: ok ({grid(suite, len(plan(suite)))}{quick})")
        except SuiteError as error:
            print(f"error: {error}", file=sys.stderr)
            status = 2
    return status
