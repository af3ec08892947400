"""The registry: the tool's features, one package each under ``etcd_users/features/``, named in one list.

``FEATURES`` names packages only. Each package says what it brings in its ``FEATURE`` (a ``Feature``): its option
group, its hooks, its users, its docs page. The list's order is the order of the help, of the option reference and of
the web UI's form (``OPTIONS``); the hooks' order on every event (``etcd_users.core.plugin`` makes them when Locust
builds its parser) is declared apart, where it matters (``FIRST``, ``LAST``, ``BEFORE``: ``hook_order``). What one
feature leaves for another goes on the run's context as a slot the first one owns (``etcd_users.core.run_context``):
no feature looks another's hooks up.

Pure: a package's ``__init__`` imports its options only; its hooks and users are named, not imported, so that the
reference and the suite runner read this list without Locust.
"""

import importlib
from dataclasses import dataclass, replace

from etcd_users.core.arguments import add_option_group
from etcd_users.core.declare import OptionGroup

PACKAGE = "etcd_users.features"

FEATURES = (
    "engine",
    "latency",
    "target_cluster",
    "connection",
    "key_space",
    "gates",
    "workload",
    "watchers",
    "exporter",
    "monitoring",
    "webui",
    "kubernetes",
    "disruptions",
    "shapes",
    "audit",
    "tail",
    "summary",
    "client_bound",
    "empty_run",
    "rate_held",
)

# The order of the features' hooks on every event, where it matters: declared here, with the reason, and honoured by
# ``hook_order`` whatever the order of ``FEATURES`` (which orders the help and the form).
FIRST = (
    # the loop thread's batched results applied before anything reads the run's figures
    "engine",
    # the exact latencies: every run's, also for a locustfile whose users are not etcd's; reset at a run's start
    # before any other feature's start sends a request
    "latency",
    # the endpoints given or the local etcd started: the run's settings, resolved before any other feature uses them
    "target_cluster",
    # the reads' key space, written before the measured window: its test_start before the others' own
    "key_space",
    # the gates judge at quitting on what the later features still hold; their hooks watch the workers
    "gates",
)
LAST = (
    # whether the load generator was the limit: its line after every verdict
    "client_bound",
    # a run that measured no request: its line printed last but one
    "empty_run",
    # an --etcd-user-rate the users did not hold: the run's last line
    "rate_held",
)
BEFORE = (  # (earlier, later, why) among the others
    ("exporter", "monitoring", "a port taken is refused at init, before the pre-flight's burst reaches the members"),
    ("tail", "summary", "the tail's file is written before the summary reads it"),
    ("disruptions", "summary", "the summary gathers what the disruptions left at quit"),
    ("audit", "summary", "the summary gathers the audit's verdict at quit"),
)


@dataclass(frozen=True)
class Feature:
    """What a feature's package brings a run, in its ``__init__`` as ``FEATURE``."""

    title: str
    options: type[OptionGroup] | None = None  # its option group; None: a feature without options of its own
    # "module:Class" of its FeatureHooks, the module inside the package; named, not imported (see above)
    hooks: str = ""
    users: tuple[str, ...] = ()  # "module:Class" of the User classes it offers a run, inside the package
    docs: str = ""  # its page under docs/
    # its modules the top may import (its users, a load shape, the engine's loop); no feature imports another's, and
    # the rest is its own (tests/unit/test_house.py)
    public: tuple[str, ...] = ()
    etcd_only: bool = True  # False: also for a locustfile whose users are not etcd's (plugin.install(etcd=False))
    package: str = ""  # the package it was found in (set by ``load``)


def has_etcd_options(environment) -> bool:
    """The environment's parsed options carry the tool's ``--etcd-*`` ones (a locustfile with the etcd users)."""
    return hasattr(environment.parsed_options, "etcd_endpoints")


def load(name: str) -> Feature:
    """A feature by its name in ``FEATURES`` (a package of ``etcd_users.features``), or by a package's full name."""
    package = name if "." in name else f"{PACKAGE}.{name}"
    return replace(importlib.import_module(package).FEATURE, package=package)


def features(etcd: bool = True, names: tuple[str, ...] = FEATURES) -> tuple[Feature, ...]:
    """The features of a locustfile with the etcd users (``etcd``), or of one whose users are not etcd's."""
    return tuple(feature for feature in map(load, names) if etcd or not feature.etcd_only)


def hook_order(loaded: tuple[Feature, ...]) -> tuple[Feature, ...]:
    """``loaded`` in the order their hooks run: ``FIRST`` in its order, the others in theirs but each ``BEFORE`` pair
    kept, then ``LAST`` in its order."""
    by_name = {feature.package.rpartition(".")[2]: feature for feature in loaded}
    middle = [name for name in by_name if name not in FIRST and name not in LAST]
    ordered: list[str] = []
    while middle:  # the first in the list whose earlier ones have all been placed (a stable topological order)
        ready = next(
            (name for name in middle if not any(later == name and earlier in middle for earlier, later, _ in BEFORE)),
            None,
        )
        if ready is None:
            raise ValueError(f"the features' BEFORE rules go in a circle among {middle}")
        ordered.append(ready)
        middle.remove(ready)
    names = [name for name in FIRST if name in by_name] + ordered + [name for name in LAST if name in by_name]
    return tuple(by_name[name] for name in names)


def named(feature: Feature, member: str):
    """A ``module:Name`` of ``feature``'s package, imported (its hooks, one of its users)."""
    module, _, name = member.partition(":")
    return getattr(importlib.import_module(f"{feature.package}.{module}"), name)


def feature_users(etcd: bool = True) -> dict[str, type]:
    """The User classes the features offer a run, by name (the packaged locustfile collects them)."""
    return {
        user.__name__: user
        for feature in features(etcd)
        for user in (named(feature, member) for member in feature.users)
    }


def option_groups(etcd: bool = True) -> tuple[type[OptionGroup], ...]:
    """The features' option groups, in their order."""
    return tuple(feature.options for feature in features(etcd) if feature.options is not None)


def add_option_groups(parser, etcd: bool = True) -> None:
    """Every feature's group on Locust's parser, once per parser."""
    for group in option_groups(etcd):
        add_option_group(parser, group.TITLE, group.DESCRIPTION, group.options())


def etcd_options() -> tuple:
    """The --etcd-* options in the order of the help and the web UI's form: every feature's but those a locustfile
    without etcd's users has too (the shapes')."""
    groups = (feature.options for feature in features() if feature.etcd_only and feature.options is not None)
    return tuple(declared for group in groups for declared in group.options())


def __getattr__(name: str):
    # OPTIONS on first use: the feature packages import this module for ``Feature``, so the list cannot be read
    # while this module is being imported
    if name == "OPTIONS":
        globals()["OPTIONS"] = options = etcd_options()
        return options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
