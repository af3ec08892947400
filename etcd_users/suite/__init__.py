"""Benchmark suites: a grid of settings × repeats, each cell a separate headless Locust run, one command per table.

    python -m etcd_users.suite run suites/single-vs-three-members.yaml [--out DIR] [--quick] [--dry-run]
    python -m etcd_users.suite check suites/*.yaml

A suite file (YAML, schema in ``suites/README.md``) names fixed ``--etcd-*`` options and axes of values; every
combination of the axes, repeated ``repeats`` times, is one Locust process against the given endpoints or a fresh
local etcd started for that run alone. ``DIR/suite.json`` (its keys in `etcd_users.files`) records the plan and
each run's status for the analysis (`analysis.suite`).

Each module imports only those listed before it:

- ``schema``: what a suite is (`Suite`, `Axis`, `SuiteError`) and the names a suite file may use;
- ``plan``: the combinations of the axes, the planned runs (`PlannedRun`), the Locust command of each run;
- ``loader``: reading and checking a suite file (`load_suite`);
- ``execute``: running the plan (`SuiteRunner`), judging each run from its files (`RunOutcome`), ``suite.json``;
- ``cli``: the command line (`main`), run by ``__main__``.

None imports Locust: every run is a Locust process of its own.
"""
