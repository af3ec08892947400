"""``python -m analysis memory PREFIX [PREFIX ...]``: etcd's memory model fitted to the RSS its members had during
runs, next to the figures of etcd's memory benchmarks (the official etcd benchmark index: memory of the index and
of watches).

That document measured the in-memory index at about c1 = 120 B per key plus c2 = 30 B per revision, and for watches
about 17 KB per gRPC connection, 18 KB per watch stream and 350 B per watcher. Two models are fitted here by least
squares over every answered poll of every member in ``PREFIX_etcd_metrics.csv``:

- ``keys``: RSS = base + c1 * keys + c2 * revisions. keys is the ``Keys`` column (etcd_debugging_mvcc_keys_total,
  the keys in the store); a run without it uses its successful ``put`` requests so far, which equal the distinct
  keys written only while sequential puts have not wrapped the key space. revisions is ``ProposalsApplied``, the
  member's applied raft index: one entry per put, delete or transaction plus a few internal ones, and no revision
  is dropped while nothing compacts (the local members here never auto-compact).
- ``watch``: RSS = base + c_stream * WatchStreams + c_watcher * Watchers, + c_conn * connections when the member's
  open files (``OpenFds``, its client connections plus a constant) grow within a run: users that each open their
  own connection (``--etcd-conns`` at least the users) add connections as they start. The watch users
  also put their keys in a loop, so when revisions grow, c2 * revisions is fitted beside the two terms; otherwise
  what those revisions cost would be put on the streams and watchers that grew at the same time.

Every member of every run has its own base (and a restarted member a new one): members hold different things
besides the index, and only the slopes are shared. R² is the share of the RSS variation within each member that the
model explains. The standard errors are the textbook ones and assume independent residuals; consecutive polls are
not independent, so read them as a lower bound.

RSS is more than the index: the key itself (the document's formula is N·(c1 + key size)), the raft log entries a
member keeps in memory until its next snapshot (each holds the whole request), the Go heap's slack and the pages of
the bbolt db file that the member touched through its mmap count too. Expect the slopes well above the document's
figures, the more so with long keys and large values (``--etcd-key-size 64 --etcd-val-size 16`` keep them small).

The runs must move the two terms of a model independently, in steps or ramps:

- keys: sequential puts create a key each, so keys and revisions grow together; add a run (or a later part of the
  same run) whose puts overwrite a small key space, so revisions grow while keys stay::

    locust -f locustfile.py,shapes/ladder.py --headless --csv out/mem-keys EtcdPutUser --shape-ladder 4,8,16 \\
      --shape-step-time 60 --etcd-key-space-size 200000 --etcd-sequential-keys --etcd-key-size 64 --etcd-val-size 16 \\
      --etcd-metrics-interval 1
    locust -f locustfile.py --headless -u 8 -r 8 -t 120s --csv out/mem-revs EtcdPutUser --etcd-prefix /mem-revs/ \\
      --etcd-key-space-size 1000 --etcd-sequential-keys --etcd-key-size 64 --etcd-val-size 16 --etcd-metrics-interval 1
    python -m analysis memory out/mem-keys out/mem-revs --out out/memory

- watch: a ladder of EtcdWatchUser adds streams and watchers in proportion, so give two runs with different
  watchers per stream::

    locust -f locustfile.py,shapes/ladder.py --headless --csv out/mem-watch1 EtcdWatchUser \\
      --shape-ladder 50,100,200,400 --shape-step-time 30 --etcd-watchers-per-stream 1 --etcd-user-rate 1 \\
      --etcd-metrics-interval 1
    (the same with --etcd-watchers-per-stream 20 and --csv out/mem-watch20)
    python -m analysis memory out/mem-watch1 out/mem-watch20 --model watch

  With each user on its own connection (``--etcd-conns`` at least the users) connections grow too, in proportion
  to the streams: a third run with another ``--etcd-watch-streams`` tells them apart (docs/analysis.md has the
  ladder to 10,000 connections, 100,000 streams and 1,000,000 watchers).

Runs that do not vary the terms enough (a constant key count, keys and revisions in lockstep, too few polls) end
with one line saying so and exit status 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from etcd_users.analysis.load import AnalysisError, load_run, normalize_prefix, read_etcd_metrics
from etcd_users.analysis.report import markdown_notes, markdown_table, write_csv
from etcd_users.analysis.server import MB, member_series
from etcd_users.analysis.timeseries import timeline
from etcd_users.files import SUFFIXES

# the how-to of this docstring is also the epilog of `python -m analysis memory --help`
RUN_RECIPES = __doc__[__doc__.index("The runs must move") :]

# Above this correlation of two terms (within members) their slopes are not told apart: the variance of each
# estimate is inflated 1 / (1 - r²) = 50 times.
MAX_CORRELATION = 0.99
MAX_INFLATION = 1 / (1 - MAX_CORRELATION**2)
# Slopes whose standard error is above this share of their value are flagged as not determined by the runs.
LOOSE_SE = 0.5


@dataclass(frozen=True)
class Term:
    column: str  # in the points frame
    what: str  # in sentences
    label: str  # table column of the estimate
    document: float  # bytes, from the source document


@dataclass(frozen=True)
class Model:
    name: str
    formula: str
    terms: tuple[Term, ...]
    hint: str  # what run to add when the terms move together
    # fitted too when it varies, so that what it costs is not put on the terms (the watch users' own puts)
    control: Term | None = None
    # fitted too when it varies within a member's run (connections opened as the users grow)
    optional: tuple[Term, ...] = ()


KEYS = Model(
    "keys",
    "RSS ≈ base + c1·keys + c2·revisions",
    (
        Term("keys", "keys", "c1 (B/key)", 120.0),
        Term("revisions", "revisions", "c2 (B/revision)", 30.0),
    ),
    "add a run whose puts overwrite a small key space (revisions grow while keys stay), see --help",
)
WATCH = Model(
    "watch",
    "RSS ≈ base + c_stream·streams + c_watcher·watchers",
    (
        Term("streams", "watch streams", "c_stream (B/stream)", 18 * 1024.0),
        Term("watchers", "watchers", "c_watcher (B/watcher)", 350.0),
    ),
    "add a run with another --etcd-watchers-per-stream (and, when connections grow too, another --etcd-watch-streams), "
    "see --help",
    control=KEYS.terms[1],
    optional=(Term("connections", "connections", "c_conn (B/connection)", 17 * 1024.0),),
)
MODELS = {"keys": KEYS, "watch": WATCH}
DOCUMENT = "source document"
DECIMALS = {"base (MB)": 2, "R²": 4}


@dataclass
class Fit:
    label: str
    polls: int
    base_mb: float
    coefficients: list[float]
    errors: list[float]
    r2: float


@dataclass
class MemoryReport:
    model: Model
    table: pd.DataFrame
    notes: list[str]
    title: str


def load_points(prefix: str, label: str, notes: list[str]) -> pd.DataFrame:
    """One row per answered poll of each member: its RSS and the terms of both models, and its ``group`` (run,
    member, restarts so far)."""
    prefix = normalize_prefix(prefix)
    path = Path(prefix + SUFFIXES["etcd_metrics"])
    frame = read_etcd_metrics(path)
    if frame is None:
        raise AnalysisError(
            f"no {path}: the memory model needs the members' RSS, polled with --csv and --etcd-metrics-interval"
        )
    parts = []
    for member in member_series(frame):
        rows = member.rows
        if rows.empty:
            continue
        segment = rows["restart"].astype(int).cumsum()
        parts.append(
            pd.DataFrame(
                {
                    "run": label,
                    "member": member.member,
                    "group": [f"{label} · {member.member}" + (f" (after restart {s})" if s else "") for s in segment],
                    "timestamp": rows["Timestamp"],
                    "rss": rows["RssBytes"],
                    "keys": _optional(rows, "Keys"),
                    "revisions": rows["ProposalsApplied"],
                    "streams": _optional(rows, "WatchStreams"),
                    "watchers": _optional(rows, "Watchers"),
                    # a member's open files: its client connections plus a constant that the base takes
                    "connections": _optional(rows, "OpenFds"),
                }
            )
        )
    if not parts:
        raise AnalysisError(f"{path} has no poll that a member answered")
    points = pd.concat(parts, ignore_index=True)
    if points["keys"].isna().all():
        points["keys"] = _puts_so_far(prefix, points["timestamp"], path)
        notes.append(
            f"{label}: {path.name} has no Keys (etcd_debugging_mvcc_keys_total), so keys = successful puts so far, "
            "the distinct keys written only while sequential puts have not wrapped the key space."
        )
    return points


def _optional(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column] if column in rows.columns else pd.Series(float("nan"), index=rows.index)


def _puts_so_far(prefix: str, timestamps: pd.Series, path: Path) -> pd.Series:
    try:
        run = load_run(prefix)
    except AnalysisError as error:
        raise AnalysisError(f"{path} has no Keys and the run's request counts cannot stand in: {error}") from None
    line = timeline(run)
    if line is None or not (line.frame["name"] == "put").any():
        raise AnalysisError(f"{path} has no Keys and the run has no per-second history of 'put' requests to count")
    rows = line.rows_for("put").sort_values("end")
    done = (rows["requests"] - rows["failures"]).cumsum().to_numpy()
    # The puts of the intervals that had ended by each poll.
    index = np.searchsorted(rows["end"].to_numpy(), timestamps.to_numpy(), side="right")
    return pd.Series(np.where(index > 0, done[np.maximum(index - 1, 0)], 0), index=timestamps.index, dtype=float)


def choose_model(points: pd.DataFrame, name: str) -> Model:
    """``auto``: the watch model when watchers vary within some member, else the keys model."""
    if name != "auto":
        return MODELS[name]
    for column in ("watchers", "streams"):
        spread = points.groupby("group")[column].agg(lambda values: values.max() - values.min())
        if (spread.fillna(0) > 0).any():
            return WATCH
    return KEYS


def _varies(points: pd.DataFrame, column: str) -> bool:
    """Whether the column changes within at least one member series (a change across series is the base's)."""
    values = points.dropna(subset=[column])
    return bool(len(values)) and values.groupby("group")[column].agg(lambda v: v.max() - v.min()).max() > 0


def fitted_terms(points: pd.DataFrame, model: Model) -> list[Term]:
    """The model's terms, and its control term when that varies."""
    control = model.control
    optional = [term for term in model.optional if _varies(points, term.column)]
    return [*model.terms, *optional, *([control] if control is not None and _varies(points, control.column) else [])]


def why_not_identified(points: pd.DataFrame, model: Model, terms: list[Term]) -> str | None:
    """Why the runs cannot give the slopes of ``terms``, or None when they can."""
    for term in terms:
        if points[term.column].isna().all():
            return f"the runs' metrics have no {term.what} (an etcd without etcd_debugging_mvcc metrics?)"
    used = points.dropna(subset=["rss", *(term.column for term in terms)])
    groups = used["group"].nunique()
    if len(used) - groups - len(terms) < 2:
        return (
            f"{len(used)} answered polls in {groups} member series are too few for a base each and {len(terms)} "
            "slopes; run longer or poll more often (--etcd-metrics-interval 1)"
        )
    for term in terms:
        if not _varies(used, term.column):
            values = list(dict.fromkeys(used[term.column]))
            shown = ", ".join(f"{value:g}" for value in values[:3]) + (", …" if len(values) > 3 else "")
            return f"{term.what} do not vary within any member's run (constant at {shown}); grow them in steps"
    within = np.column_stack([_within(used, term.column).to_numpy(dtype=float) for term in terms])
    correlations = np.corrcoef(within, rowvar=False)
    pairs = [(abs(correlations[i, j]), i, j) for i in range(len(terms)) for j in range(i + 1, len(terms))]
    strongest, i, j = max(pairs)
    if strongest > MAX_CORRELATION:
        return (
            f"{terms[i].what} and {terms[j].what} moved together (correlation {correlations[i, j]:.4f}), so "
            f"their costs cannot be told apart; {model.hint}"
        )
    # With three terms, one can follow a mix of the other two without following either closely.
    inflation = np.diag(np.linalg.pinv(correlations))
    if inflation.max() > MAX_INFLATION:
        worst = terms[int(inflation.argmax())]
        return f"{worst.what} moved with a mix of the other terms, so its cost cannot be told apart; {model.hint}"
    return None


def _within(points: pd.DataFrame, column: str) -> pd.Series:
    """The column minus each group's mean: what is left once every member has its own base."""
    return points[column] - points.groupby("group")[column].transform("mean")


def fit(points: pd.DataFrame, terms: list[Term], label: str) -> Fit:
    """Least squares with a base per group and the slopes of ``terms`` shared (the within estimator)."""
    columns = [term.column for term in terms]
    used = points.dropna(subset=["rss", *columns])
    y = _within(used, "rss").to_numpy(dtype=float)
    x = np.column_stack([_within(used, column).to_numpy(dtype=float) for column in columns])
    slopes, *_ = np.linalg.lstsq(x, y, rcond=None)
    residuals = y - x @ slopes
    groups = used["group"].nunique()
    dof = len(used) - groups - len(columns)
    sse, sst = float(residuals @ residuals), float(y @ y)
    covariance = sse / dof * np.linalg.inv(x.T @ x)
    means = used.groupby("group")[["rss", *columns]].mean()
    bases = means["rss"] - means[columns].to_numpy(dtype=float) @ slopes
    return Fit(
        label=label,
        polls=len(used),
        base_mb=float(bases.mean()) / MB,
        coefficients=[float(value) for value in slopes],
        errors=[float(value) for value in np.sqrt(np.diag(covariance))],
        r2=1.0 - sse / sst if sst > 0 else float("nan"),
    )


def memory_report(prefixes: list[str], labels: list[str], model_name: str = "auto") -> MemoryReport:
    notes: list[str] = []
    points = pd.concat(
        [load_points(prefix, label, notes) for prefix, label in zip(prefixes, labels, strict=True)], ignore_index=True
    )
    model = choose_model(points, model_name)
    terms = fitted_terms(points, model)
    added = [term for term in terms if term not in model.terms]
    formula = model.formula + "".join(f" + {_symbol(term)}·{term.column}" for term in added)
    reason = why_not_identified(points, model, terms)
    if reason is not None:
        raise AnalysisError(f"not enough variation to fit {formula}: {reason}")

    groups = list(dict.fromkeys(points["group"]))
    fits = [fit(points, terms, f"all {len(groups)} member series" if len(groups) > 1 else groups[0])]
    for group in groups if len(groups) > 1 else []:
        alone = points[points["group"] == group]
        why = why_not_identified(alone, model, terms)
        if why is None:
            fits.append(fit(alone, terms, group))
        else:
            notes.append(f"{group}: no fit of its own ({why}).")

    rows = []
    for one in fits:
        row = {"fit": one.label, "polls": one.polls, "base (MB)": one.base_mb}
        for term, value, error in zip(terms, one.coefficients, one.errors, strict=True):
            row[term.label] = value
            row[f"{_symbol(term)} SE (B)"] = error
        rows.append({**row, "R²": one.r2})
    rows.append({"fit": DOCUMENT, **{term.label: term.document for term in terms}})
    table = pd.DataFrame(rows)
    table["polls"] = table["polls"].astype("Int64")

    pooled = fits[0]
    for term, value, error in zip(terms, pooled.coefficients, pooled.errors, strict=True):
        if not abs(error) <= LOOSE_SE * abs(value):
            notes.append(
                f"{_symbol(term)} is not determined by these runs: its standard error {error:.1f} B is "
                f"more than {LOOSE_SE:.0%} of its value {value:.1f} B; vary the {term.what} more."
            )
    notes += _model_notes(model, terms, points)
    runs = points["run"].nunique()
    title = (
        f"etcd memory model ({model.name}): {formula}, least squares over {pooled.polls} polls of "
        f"{len(groups)} member series in {runs} run{'s' * (runs > 1)}, each member with its own base"
    )
    return MemoryReport(model, table, notes, title)


def _symbol(term: Term) -> str:
    return term.label.split(" ")[0]


def _model_notes(model: Model, terms: list[Term], points: pd.DataFrame) -> list[str]:
    spans = ", ".join(f"{term.what} {points[term.column].min():g} to {points[term.column].max():g}" for term in terms)
    rss = f"RSS {points['rss'].min() / MB:.1f} to {points['rss'].max() / MB:.1f} MB"
    notes = [f"Ranges over the polls: {spans}; {rss}."]
    if model is KEYS:
        notes.append(
            "revisions = ProposalsApplied (the applied raft index: one per put, delete or txn, plus a few internal "
            "entries); keys = Keys (etcd_debugging_mvcc_keys_total). The document's 120 B and 30 B are the Go heap "
            "of the in-memory index alone, the key itself not included (N·(c1 + key size)). RSS also holds the key, "
            "the raft log entries kept in memory until the next snapshot (each the whole request, every "
            "--snapshot-count entries, 100 000 by default), the Go heap's slack and the db pages touched through "
            "bbolt's mmap, so expect slopes well above the document's."
        )
    else:
        notes.append(
            "streams = WatchStreams, watchers = Watchers (etcd_debugging_mvcc_watch_stream_total, "
            "etcd_debugging_mvcc_watcher_total). Document figures: 17 KB per connection, 18 KB per stream, 350 B "
            "per watcher, from RSS."
        )
        if any(term in terms for term in model.optional):
            notes.append(
                "connections = OpenFds (process_open_fds: the member's client connections plus a constant its base "
                "takes); fitted because they grew within a run (users on their own connections, --etcd-conns)."
            )
        else:
            notes.append(
                "Connections are not fitted: they did not vary within any run (the users share --etcd-conns "
                "connections, or the runs have no OpenFds)."
            )
        if model.control in terms:
            notes.append(
                "Revisions (ProposalsApplied) grew during the runs (the watch users' own puts, the tool's own "
                "writes): c2·revisions is fitted beside them so that their memory is not put on the streams and "
                "watchers."
            )
    notes.append(
        "Standard errors assume independent residuals; consecutive polls are not, so they are a lower bound. "
        "R² is within members (each member's own base removed); base is RSS extrapolated to zero of every term, "
        "the mean over the member series."
    )
    return notes


def _display_decimals(table: pd.DataFrame) -> dict[str, int]:
    return {**{column: 1 for column in table.columns if "(B" in column}, **DECIMALS}


def format_report(report: MemoryReport) -> str:
    parts = [report.title, markdown_table(report.table, _display_decimals(report.table)), markdown_notes(report.notes)]
    return "\n\n".join(part for part in parts if part)


def write_files(report: MemoryReport, out: Path) -> list[str]:
    """``memory.md`` (the printed report) and ``memory.csv`` (the table, 3 decimals) in ``out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "memory.md").write_text(f"# {format_report(report)}\n", encoding="utf-8")
        decimals = {column: 3 for column in report.table.columns if column != "polls"} | {"R²": 6}
        write_csv(report.table, out / "memory.csv", decimals)
    except OSError as error:
        raise AnalysisError(f"cannot write the files to {out}: {error}") from None
    return ["memory.md", "memory.csv"]
