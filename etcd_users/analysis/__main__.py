"""Command line: ``python -m analysis`` compares runs (and tabulates each level of a load shape's run, see
``analysis.levels``), ``compare`` tells a regression from noise between a baseline and a candidate (exit status 3 for
a regression), ``calibrate`` measures the machine's run-to-run noise for it, ``summary`` prints etcd's benchmark
report, ``errors`` prints the error distribution, ``suite`` tabulates a benchmark suite's repeats, ``memory`` fits
etcd's memory model to the members' RSS. Input problems end with one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pandas as pd

from etcd_users.analysis.audit import measure as measure_audits
from etcd_users.analysis.benchmark_report import summary
from etcd_users.analysis.breach import capture_lines
from etcd_users.analysis.client import ADVICE, add_client_columns
from etcd_users.analysis.compare import BASELINE, CANDIDATE, calibrate, compare, load_side
from etcd_users.analysis.compare_noise import read_calibration
from etcd_users.analysis.compare_report import text as compare_text
from etcd_users.analysis.compare_report import write_csv as write_compare_csv
from etcd_users.analysis.compare_report import write_json as write_compare_json
from etcd_users.analysis.compare_report import write_junit, write_report_section
from etcd_users.analysis.compare_report import write_markdown as write_compare_markdown
from etcd_users.analysis.disruptions import DECIMALS as DISRUPTION_DECIMALS
from etcd_users.analysis.disruptions import NOTES as DISRUPTION_NOTES
from etcd_users.analysis.disruptions import measure as measure_disruptions
from etcd_users.analysis.fairness import parse_changed, unfair_lines, unknown_changed
from etcd_users.analysis.levels import CSV_DECIMALS as LEVEL_CSV_DECIMALS
from etcd_users.analysis.levels import DISPLAY_DECIMALS as LEVEL_DISPLAY_DECIMALS
from etcd_users.analysis.levels import advice as levels_advice
from etcd_users.analysis.levels import json_document, measure_levels, parse_sla, sentences
from etcd_users.analysis.levels import notes as levels_notes
from etcd_users.analysis.levels import table as levels_table
from etcd_users.analysis.load import AnalysisError, Run, load_run, normalize_prefix
from etcd_users.analysis.measure import measure_run
from etcd_users.analysis.memory_model import RUN_RECIPES, format_report, memory_report
from etcd_users.analysis.memory_model import write_files as write_memory_files
from etcd_users.analysis.phases import DECIMALS as PHASE_DECIMALS
from etcd_users.analysis.phases import NOTES as PHASE_NOTES
from etcd_users.analysis.phases import measure as measure_phases
from etcd_users.analysis.report import markdown_notes, markdown_table, write_csv, write_html, write_markdown
from etcd_users.analysis.report_sections import report_sections
from etcd_users.analysis.server import add_server_columns
from etcd_users.analysis.skew import skew_note
from etcd_users.analysis.staleness import staleness_note
from etcd_users.analysis.suite import METRIC_KEYS, measure_suite, parse_metrics
from etcd_users.analysis.suite import markdown as suite_markdown
from etcd_users.analysis.suite import write_files as write_suite_files
from etcd_users.analysis.tables import comparison_table, errors_table
from etcd_users.analysis.tail import precondition_note, show_tail
from etcd_users.analysis.tolerance import ToleranceError, defaults_text, parse_tolerances
from etcd_users.analysis.ycsb import DECIMALS as YCSB_DECIMALS
from etcd_users.analysis.ycsb import is_ycsb_suite, ycsb_table
from etcd_users.analysis.ycsb import markdown as ycsb_markdown
from etcd_users.files import INTENDED, SERVICE

PROG = "python -m analysis"
TITLE = "etcd load test comparison"

WARMUP_HELP = (
    "drop the first SECONDS of each run (from the shape's started_at, else the first history row); "
    "with no value (or 'auto'), cut at the warmup_end the load shape recorded. "
    "Put it after the prefixes or write --warmup=SECONDS"
)
SERIES_HELP = "latency series of the exact files: service time (default) or from the intended send time"
SLA_HELP = (
    "gates that judge each level of a shape's run, in the grammar of --etcd-sla, e.g. 'put:p99<15ms,errors<0.1%%' "
    "(default: the gates the run was given, from PREFIX_shape.json; '' for none)"
)
LEVELS_TITLE = "etcd load test per level"
DISRUPTIONS_TITLE = "etcd disruptions and their cost"
PHASES_TITLE = "the run by the etcd versions its members ran"


def _warmup(value: str) -> float | str:
    if value == "auto":
        return "auto"
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or 'auto', got {value!r}") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError("seconds must not be negative")
    return seconds


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warmup", nargs="?", const="auto", type=_warmup, metavar="SECONDS", help=WARMUP_HELP)
    parser.add_argument("--series", choices=(SERVICE, INTENDED), default=SERVICE, help=SERIES_HELP)


def compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Compare load-test runs of etcd by QPS, P50/P90/P99/P99.9 and errors. "
        f"Other commands: '{PROG} compare BASELINE CANDIDATE' (a regression or noise?), "
        f"'{PROG} calibrate RUNS --out FILE' (the machine's run-to-run noise, for compare --noise), "
        f"'{PROG} summary PREFIX' (etcd benchmark report), '{PROG} errors PREFIX...', "
        f"'{PROG} suite DIR' (a benchmark suite's table), '{PROG} memory PREFIX...' (etcd's memory model).",
        epilog="QPS = requests / measured duration: from the start of the first to the end of the last second with "
        "requests in the run's history, after the warm-up cut. A run with PREFIX_etcd_metrics.csv adds the server "
        "columns fsync P99 (ms) (the worst poll interval of any member), leader changes (the most any member "
        "counted), RSS growth (MB) and db growth (MB) (last minus first poll, the largest member), over the polls "
        "after the warm-up cut, and with --out the chart server_metrics.png/.svg. A run with PREFIX_client_cpu.csv "
        "adds client CPU (%) (the busiest Locust process) and bound: client when a process used or waited for 90 % "
        "of a core or more, so that the figures measure the load generator, not etcd. A run with PREFIX_shape.json (a "
        "load shape) adds a table per level, each measured from the moment its users were all running to its end, "
        "judged by --sla and by achieved >= 95%% of planned QPS, and a last line with the capacity and the first "
        "breach; with --out levels.md, levels.csv, levels.json and the chart levels.png/.svg.",
    )
    parser.add_argument("prefixes", nargs="+", metavar="PREFIX", help="what was passed to locust --csv")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write tables, charts and report.html here")
    parser.add_argument("--baseline", metavar="PREFIX", help="add ratio columns against this run")
    parser.add_argument("--names", help="comma-separated request names to show, e.g. put,range/serializable")
    parser.add_argument("--labels", help="comma-separated run labels, one per PREFIX (default: basenames)")
    parser.add_argument("--sla", metavar="GATES", help=SLA_HELP)
    _add_common(parser)
    return parser


COMPARE_DESCRIPTION = (
    "Before and after a change: per request name (per level of a shape's run, per combination of a suite) and per "
    "metric (QPS, P50, P99, P99.9, error rate), the baseline's and the candidate's figures, the difference, its 95 % "
    "interval from the data (the exact Mann-Whitney U interval of the shift over repeats when both sides have two "
    "or more, which needs 4 a side to decide; else a seeded moving-block bootstrap over the runs' seconds and their "
    "exact HDR histograms) and a verdict: worse when the whole interval lies beyond the tolerance on the bad side, "
    "better when beyond it on the good side, inconclusive when the data cannot vouch for either, else same. Exit "
    "status 3 when a row is worse, 2 for bad input, 0 otherwise."
)
SIDE_HELP = (
    "a run prefix (what was passed to locust --csv), its repeats comma-separated (out/a1,out/a2) or as a quoted "
    "glob ('out/a-*'), or a suite directory (with suite.json)"
)


def compare_runs_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{PROG} compare", description=COMPARE_DESCRIPTION)
    parser.add_argument("baseline", metavar="BASELINE", help=SIDE_HELP)
    parser.add_argument("candidate", metavar="CANDIDATE", help=SIDE_HELP)
    parser.add_argument(
        "--max-regress",
        metavar="TOLERANCES",
        help="how much worse a figure may get, e.g. 'p99:+15%%,qps:-10%%,errors:+0.1pp' (metrics qps, p50, p99, "
        f"p99.9, errors; the others keep their default); default {defaults_text().replace('%', '%%')}",
    )
    parser.add_argument(
        "--changed",
        metavar="OPTIONS",
        help="comma-separated options or facts that differ on purpose, e.g. etcd-val-size,etcd_version: no unfair "
        "line for them (facts: cluster_size, etcd_version, cores, processes, workers, python, locust, grpcio)",
    )
    parser.add_argument(
        "--noise",
        type=Path,
        metavar="FILE",
        help="the run-to-run noise of this machine, from 'python -m analysis calibrate' over A/A runs: with it one "
        "run a side can be called worse",
    )
    parser.add_argument("--names", help="comma-separated request names to compare, e.g. put,range/serializable")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write compare.md, .csv, .json, .xml and report.html")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="the JUnit file (default DIR/compare.xml)")
    _add_common(parser)
    return parser


def run_compare_runs(args: argparse.Namespace) -> int:
    try:
        tolerances = parse_tolerances(args.max_regress)
    except ToleranceError as error:
        raise AnalysisError(str(error)) from None
    baseline, candidate = load_side(args.baseline, BASELINE), load_side(args.candidate, CANDIDATE)
    calibration = read_calibration(args.noise) if args.noise else None
    comparison = compare(baseline, candidate, tolerances, _split(args.names), args.warmup, args.series, calibration)
    changed = parse_changed(args.changed)
    unfair = unfair_lines(baseline.runs, candidate.runs, changed) + comparison.load
    unknown = unknown_changed(baseline.runs, candidate.runs, changed)
    if unknown:
        comparison.notes.append(f"--changed names what no summary knows: {', '.join(unknown)}.")
    exit_code = 3 if comparison.worse else 0
    print(compare_text(comparison, unfair))
    written = []
    try:
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            write_compare_markdown(comparison, unfair, args.out / "compare.md")
            write_compare_csv(comparison, args.out / "compare.csv")
            write_compare_json(comparison, unfair, exit_code, args.out / "compare.json")
            write_report_section(comparison, unfair, args.out / "report.html")
            written += [str(args.out / name) for name in ("compare.md", "compare.csv", "compare.json", "report.html")]
        junit = args.junit or (args.out / "compare.xml" if args.out else None)
        if junit:
            write_junit(comparison, junit)
            written.append(str(junit))
    except OSError as error:
        raise AnalysisError(f"cannot write the comparison's files: {error}") from None
    if written:
        print(f"wrote {', '.join(written)}", file=sys.stderr)
    return exit_code


def calibrate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} calibrate",
        description="The run-to-run noise of this machine for 'compare --noise FILE': from three or more runs of "
        "the same settings (six or more for a tighter figure), per request name and metric, the standard deviation "
        "of one run's figure (of its logarithm for QPS and latencies, in percentage points for errors).",
    )
    parser.add_argument("runs", metavar="RUNS", help="the A/A runs: comma-separated prefixes or a quoted glob")
    parser.add_argument("--out", type=Path, metavar="FILE", required=True, help="the calibration file to write")
    _add_common(parser)
    return parser


def run_calibrate(args: argparse.Namespace) -> int:
    document = calibrate(load_side(args.runs, "runs"), args.warmup, args.series)
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise AnalysisError(f"cannot write {args.out}: {error}") from None
    runs = len(document["runs"])
    for name, spreads in document["spreads"].items():
        figures = ", ".join(
            f"{metric} {'n/a' if value is None else _spread_text(metric, value)}" for metric, value in spreads.items()
        )
        print(f"{name}: from run to run, {figures} (over {runs} runs)")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _spread_text(metric: str, value: float) -> str:
    """A log spread as the factor it is (geometric standard deviation), the error rate's in pp."""
    return f"±{value:.3f} pp" if metric == "errors" else f"×/{math.exp(value):.2f}"


def summary_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} summary", description="Print etcd benchmark's text report for a run, one per request name."
    )
    parser.add_argument("prefix", metavar="PREFIX")
    parser.add_argument("--name", help="one request name, or Aggregated for all names together")
    _add_common(parser)
    return parser


def errors_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"{PROG} errors", description="Error distribution by label per run.")
    parser.add_argument("prefixes", nargs="+", metavar="PREFIX")
    parser.add_argument("--labels", help="comma-separated run labels, one per PREFIX")
    return parser


def suite_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} suite",
        description="Mean ± standard deviation over the repeats of a benchmark suite, one row per combination of "
        "its axes and request name. Runs that failed or did not complete are named in the notes and left out.",
    )
    parser.add_argument("directory", type=Path, metavar="DIR", help="the --out directory of python -m etcd_users.suite")
    parser.add_argument("--out", type=Path, metavar="OUTDIR", help="where to write the files (default DIR/analysis)")
    parser.add_argument("--metrics", help=f"comma-separated columns to show (default all): {','.join(METRIC_KEYS)}")
    parser.add_argument("--names", help="comma-separated request names to show, e.g. put,range/serializable")
    _add_common(parser)
    return parser


def memory_parser() -> argparse.ArgumentParser:
    description = textwrap.fill(
        "Fit etcd's memory model to the RSS of the members polled during runs (PREFIX_etcd_metrics.csv), by least "
        "squares over every answered poll, each member with its own base: RSS = base + c1*keys + c2*revisions "
        "(keys: the Keys column, else the successful puts so far; revisions: ProposalsApplied, the applied raft "
        "index), or RSS = base + c_stream*WatchStreams + c_watcher*Watchers (+ c_conn*OpenFds when the members' "
        "connections grow within a run, + c2*revisions when the watch users' puts grow them, so that their cost is "
        "not put on the watchers). Prints the slopes in bytes with their standard errors and R², beside etcd's "
        "benchmark figures (120 B/key, 30 B/revision, 17 KB/connection, 18 KB/stream, 350 B/watcher).",
        width=100,
    )
    parser = argparse.ArgumentParser(
        prog=f"{PROG} memory",
        description=description,
        epilog=RUN_RECIPES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("prefixes", nargs="+", metavar="PREFIX", help="what was passed to locust --csv")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write memory.md and memory.csv here")
    parser.add_argument(
        "--model",
        choices=("auto", "keys", "watch"),
        default="auto",
        help="auto (default): watch when watchers vary within a member, else keys",
    )
    parser.add_argument("--labels", help="comma-separated run labels, one per PREFIX (default: basenames)")
    return parser


def _split(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _labels(prefixes: list[str], given: str | None) -> list[str]:
    labels = _split(given)
    if labels is not None:
        if len(labels) != len(prefixes):
            raise AnalysisError(f"--labels gives {len(labels)} label(s) for {len(prefixes)} run(s)")
        return labels
    paths = [Path(normalize_prefix(prefix)) for prefix in prefixes]
    labels = [path.name for path in paths]
    repeated = {label for label, count in Counter(labels).items() if count > 1}
    # Same basename in different directories (out/a/run, out/b/run): keep the parent to tell them apart.
    return [f"{path.parent.name}/{path.name}" if path.name in repeated else path.name for path in paths]


def load_runs(prefixes: list[str], labels: str | None) -> list[Run]:
    return [load_run(prefix, label) for prefix, label in zip(prefixes, _labels(prefixes, labels), strict=True)]


def run_compare(args: argparse.Namespace) -> int:
    runs = load_runs(args.prefixes, args.labels)
    baseline = None
    if args.baseline:
        wanted = Path(normalize_prefix(args.baseline)).resolve()
        baseline = next((run for run in runs if Path(run.prefix).resolve() == wanted), None)
        if baseline is None:
            baseline = load_run(args.baseline)
            runs.insert(0, baseline)
    names = _split(args.names)
    if args.sla is not None:
        parse_sla(args.sla)  # a bad gate is refused before anything is read
    measured = [measure_run(run, names, args.warmup, args.series) for run in runs]
    if not any(run.measurements for run in measured):
        raise AnalysisError(f"none of the runs has requests named {', '.join(names or [])}")
    table = comparison_table(measured, baseline.label if baseline else None)
    table, server_notes = add_server_columns(table, measured)
    table, client_notes, client_bound_runs = add_client_columns(table, measured)
    notes = [run.window_note for run in measured] + [note for run in measured for note in run.notes] + server_notes
    notes += client_notes + [note for run in measured if (note := skew_note(run.run))]
    notes += [note for run in measured if (note := staleness_note(run.run))]
    notes += [note for run in measured if (note := precondition_note(run.run))]
    print(markdown_table(table))
    if notes:
        print()
        print(markdown_notes(notes))
    show_tail(runs, args.out)  # before the levels: a shape's answer (its capacity sentence) stays the last line
    level_runs = [found for run in measured if (found := measure_levels(run, names, args.series, args.sla))]
    if level_runs:
        level_table, level_notes = levels_table(level_runs), levels_notes(level_runs)
        print()
        print(markdown_table(level_table, LEVEL_DISPLAY_DECIMALS))
        print()
        print(markdown_notes(level_notes))
        print()
        print("\n".join(sentences(level_runs)))
    disruptions = _printed_table(runs, measure_disruptions, DISRUPTION_DECIMALS, DISRUPTION_NOTES)
    phases = _printed_table(runs, measure_phases, PHASE_DECIMALS, PHASE_NOTES)
    audit = measure_audits(runs)
    # beside the first breach: what the members gave when a gate first failed (--etcd-profile-on-breach)
    captures = [line for run in runs for line in capture_lines(run.prefix, run.label if len(runs) > 1 else None)]
    if captures:
        print()
        print("\n".join(captures))
    # the load generator, not etcd, set the figures of a run or a level: say what to do, once, last
    advice = [ADVICE] if client_bound_runs else levels_advice(level_runs)
    if advice:
        print()
        print("\n".join(advice))
    if args.out:
        # matplotlib is only needed here; the other commands start faster without it.
        from etcd_users.analysis.charts import level_chart, write_charts

        args.out.mkdir(parents=True, exist_ok=True)
        errors = errors_table(runs)
        charts = write_charts(measured, table, args.out)
        write_markdown(table, notes + advice, args.out / "comparison.md", TITLE)
        write_csv(table, args.out / "comparison.csv")
        write_csv(errors, args.out / "errors.csv")
        if disruptions is not None:
            _write_table(disruptions, args.out, "disruptions", DISRUPTIONS_TITLE, DISRUPTION_DECIMALS, DISRUPTION_NOTES)
        if phases is not None:
            _write_table(phases, args.out, "phases", PHASES_TITLE, PHASE_DECIMALS, PHASE_NOTES)
        levels_svg = None
        if level_runs:
            extra = ([""] + captures if captures else []) + ([""] + advice if advice else [])
            closing = "\n".join(sentences(level_runs) + extra)
            level_markdown = [markdown_table(level_table, LEVEL_DISPLAY_DECIMALS), markdown_notes(level_notes), closing]
            (args.out / "levels.md").write_text(
                "\n\n".join([f"# {LEVELS_TITLE}", *level_markdown]) + "\n", encoding="utf-8"
            )
            write_csv(level_table, args.out / "levels.csv", LEVEL_CSV_DECIMALS)
            document = json_document(level_runs, level_table, level_notes)
            (args.out / "levels.json").write_text(json.dumps(document, indent=2, default=_plain) + "\n", "utf-8")
            levels_svg = level_chart(level_runs, args.out / "levels")[1]
            print(f"wrote levels.md, levels.csv, levels.json, levels.png and levels.svg to {args.out}", file=sys.stderr)
        sections = report_sections(
            table,
            notes,
            errors,
            charts,
            advice=advice,
            levels=level_runs,
            level_table=level_table if level_runs else None,
            level_notes=level_notes if level_runs else (),
            level_chart=levels_svg,
            captures=captures,
            disruptions=disruptions,
            phases=phases,
            audit=audit,
        )
        write_html(args.out / "report.html", TITLE, sections)
        print(f"wrote comparison.md, comparison.csv, errors.csv, report.html and charts to {args.out}", file=sys.stderr)
    return 0


def _printed_table(runs: list, measure, decimals: dict, notes: list[str]) -> pd.DataFrame | None:
    """One of the runs' tables (``measure`` of each run that has it, together), printed with its notes; None when no
    run has it."""
    tables = [found for run in runs if (found := measure(run)) is not None]
    if not tables:
        return None
    table = pd.concat(tables, ignore_index=True)
    print()
    print(markdown_table(table, decimals))
    print()
    print(markdown_notes(notes))
    return table


def _write_table(table: pd.DataFrame, out: Path, name: str, title: str, decimals: dict, notes: list[str]) -> None:
    """``NAME.md``, ``.csv`` and ``.json`` of one of the run's tables."""
    markdown = [f"# {title}", markdown_table(table, decimals), markdown_notes(notes)]
    (out / f"{name}.md").write_text("\n\n".join(markdown) + "\n", encoding="utf-8")
    write_csv(table, out / f"{name}.csv", {column: 3 for column in decimals})
    rows = table.astype(object).where(table.notna(), None).to_dict(orient="records")
    document = {"columns": list(table.columns), "rows": rows, "notes": notes}
    (out / f"{name}.json").write_text(json.dumps(document, indent=2, default=_plain) + "\n", "utf-8")
    print(f"wrote {name}.md, {name}.csv and {name}.json to {out}", file=sys.stderr)


def _plain(value: object) -> object:
    """numpy and pandas scalars as JSON values."""
    if hasattr(value, "item"):
        return value.item()
    return None if value is pd.NA else str(value)


def run_summary(args: argparse.Namespace) -> int:
    run = load_run(args.prefix)
    print(summary(run, args.name, args.warmup, args.series))
    return 0


def run_errors(args: argparse.Namespace) -> int:
    runs = load_runs(args.prefixes, args.labels)
    table = errors_table(runs)
    print(markdown_table(table) if len(table) else "No failures.")
    return 0


def run_suite(args: argparse.Namespace) -> int:
    metrics = parse_metrics(args.metrics)
    suite = measure_suite(args.directory, _split(args.names), args.warmup, args.series)
    print(suite_markdown(suite, metrics))
    if suite.notes:
        print()
        print(markdown_notes(suite.notes))
    ycsb = ycsb_table(suite.directory, args.warmup, args.series) if is_ycsb_suite(suite.axis_names) else None
    if ycsb is not None:  # YCSB's workloads: also the table in YCSB's terms
        print()
        print(ycsb_markdown(ycsb))
    out = args.out or suite.directory / "analysis"
    try:
        written = write_suite_files(suite, metrics, out)
        if ycsb is not None:
            (out / "ycsb.md").write_text(f"# YCSB core workloads on etcd\n\n{ycsb_markdown(ycsb)}\n", encoding="utf-8")
            write_csv(ycsb, out / "ycsb.csv", YCSB_DECIMALS)
            written += ["ycsb.md", "ycsb.csv"]
    except OSError as error:  # an --out that cannot be written: a full disk, a read-only suite directory
        raise AnalysisError(f"cannot write the files to {out}: {error}") from None
    print(f"wrote {', '.join(written)} to {out}", file=sys.stderr)
    return 0


def run_memory(args: argparse.Namespace) -> int:
    report = memory_report(args.prefixes, _labels(args.prefixes, args.labels), args.model)
    print(format_report(report))
    if args.out:
        written = write_memory_files(report, args.out)
        print(f"wrote {', '.join(written)} to {args.out}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands = {
        "compare": (compare_runs_parser, run_compare_runs),
        "calibrate": (calibrate_parser, run_calibrate),
        "summary": (summary_parser, run_summary),
        "errors": (errors_parser, run_errors),
        "suite": (suite_parser, run_suite),
        "memory": (memory_parser, run_memory),
    }
    try:
        if argv and argv[0] in commands:
            parser, command = commands[argv[0]]
            return command(parser().parse_args(argv[1:]))
        return run_compare(compare_parser().parse_args(argv))
    except AnalysisError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of the output went away (| head): what was left unprinted is not wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that the exit's flush finds no pipe
        return 0


if __name__ == "__main__":
    sys.exit(main())
