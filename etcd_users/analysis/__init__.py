"""Post-run analysis of etcd load tests: comparison tables, charts, results per level of a load shape (``levels``),
and etcd benchmark's text report.

Run it as ``python -m analysis PREFIX [PREFIX ...]`` (see ``--help``). Each PREFIX is what was passed to
``locust --csv``; the tool's exact latency files written beside Locust's CSVs are preferred when present.
"""

from etcd_users.analysis.benchmark_report import format_report, summary
from etcd_users.analysis.levels import RunLevels, measure_levels
from etcd_users.analysis.load import AnalysisError, Run, load_run
from etcd_users.analysis.measure import Measurement, RunMeasurement, measure_run
from etcd_users.analysis.tables import comparison_table, errors_table

__all__ = [
    "AnalysisError",
    "Measurement",
    "Run",
    "RunLevels",
    "RunMeasurement",
    "comparison_table",
    "errors_table",
    "format_report",
    "load_run",
    "measure_levels",
    "measure_run",
    "summary",
]
