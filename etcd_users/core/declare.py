"""One declaration per option: a settings field carries its flag, default, help, choices and parser.

A feature's settings are a frozen dataclass deriving from ``OptionGroup``; each field declared with ``option(...)``
is an option of the feature's group (its environment variable is ``LOCUST_`` and the option's name), and the
settings are built from Locust's parsed options by ``from_options``, which reads, checks and parses every field
once. Checks across fields go in the class's ``build``.

Pure: nothing of Locust, gRPC or the run, so the suite runner, the tests and the analysis can validate options
without gevent's monkey patching.
"""

import argparse
import math
from collections.abc import Callable
from dataclasses import field, fields, replace
from typing import Any, ClassVar, TypeVar

from etcd_users.core.arguments import Option, shown

Group = TypeVar("Group", bound="OptionGroup")
OPTION = "locust_etcd_option"  # the key of a field's metadata that holds its Option


class SettingsError(ValueError):
    """Bad input, told in one line that names the option and the fix."""


def option(
    flag: str,
    default: object,
    help: str,
    *,
    parse: Callable[[str, Any], Any] | None = None,
    choices: tuple | None = None,
    secret: bool = False,
    repeatable: bool = False,
) -> Any:
    """A settings field that is an option; a secret stays out of the settings' repr (and so out of logs); a repeatable
    one is given once per value, and ``parse`` gets their list (empty when none is given)."""
    declared = Option(flag, default, help, secret=secret, choices=choices, parse=parse, repeatable=repeatable)
    return field(metadata={OPTION: declared}, repr=not secret)


class OptionGroup:
    """A feature's settings and, through its fields, its group of options."""

    TITLE: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    REFERENCE: ClassVar[str] = ""  # Markdown the option reference adds after the group's table
    # the group's settings on the run's (``settings.SLICE``, e.g. ``settings.audit``); "" for the groups every request
    # reads, which the run's settings hold flat (the connection, the workload), and for those outside them (shapes)
    SLICE: ClassVar[str] = ""

    @classmethod
    def options(cls) -> tuple[Option, ...]:
        return tuple(f.metadata[OPTION] for f in fields(cls) if OPTION in f.metadata)

    @classmethod
    def from_options(cls: type[Group], namespace: argparse.Namespace, **context) -> Group:
        """The group's settings from Locust's parsed options (the command line, the environment, the web UI's form
        or the master's options on a worker); bad input raises ``SettingsError`` in one line."""
        values = {f.name: read(f.metadata[OPTION], namespace) for f in fields(cls) if OPTION in f.metadata}
        return cls.build(values, namespace, **context)

    @classmethod
    def build(cls: type[Group], values: dict[str, Any], namespace: argparse.Namespace, **context) -> Group:
        """The settings from their parsed values; a group whose fields depend on each other checks them here."""
        return cls(**values)

    @classmethod
    def check_run(cls, settings) -> None:
        """What the group refuses in the run's whole settings (another feature's options with its own); raises
        ``SettingsError`` in one line. Called once every group is built, in the features' order."""

    @classmethod
    def read_one(cls, namespace: argparse.Namespace, name: str) -> Any:
        """The field ``name``'s option from ``namespace``, checked and parsed: for a group that takes another's."""
        return read(cls.__dataclass_fields__[name].metadata[OPTION], namespace)

    @classmethod
    def defaults(cls: type[Group], **overrides) -> Group:
        """The settings every option's default gives, with ``overrides``."""
        return replace(cls.from_options(argparse.Namespace()), **overrides)


def read(declared: Option, namespace: argparse.Namespace) -> Any:
    """One option's value from ``namespace``, checked and parsed.

    A namespace made before an option existed (a saved web UI form, a test's) has no value for it: the default.
    """
    value = vars(namespace).get(declared.dest, declared.default)
    if declared.repeatable:
        value = [] if not value else [value] if isinstance(value, str) else list(value)
        for each in value:
            _check_text(declared, each)
    if isinstance(value, str):
        _check_text(declared, value)
    if isinstance(value, float) and not math.isfinite(value):  # nan passes every comparison a bound makes
        raise SettingsError(f"{declared.flag}: {value!r} is not a finite number; give one such as {declared.default!r}")
    if declared.choices and value not in declared.choices:
        raise SettingsError(f"{declared.flag}: {shown(value)} is not one of: {', '.join(map(str, declared.choices))}")
    return declared.parse(declared.flag, value) if declared.parse else value


def _check_text(declared: Option, value: str) -> None:
    """A text option holds UTF-8 text: argparse turns bytes that are not into surrogate escapes, which no key,
    file name or message sent to the workers can carry."""
    try:
        value.encode()
    except UnicodeEncodeError:
        quoted = "" if declared.secret else f" {shown(value)}"
        raise SettingsError(
            f"{declared.flag}:{quoted} is not UTF-8 text (the shell passed bytes that are not); give it in UTF-8"
        ) from None


# -- parsers shared by the groups --


def positive(flag: str, value):
    if value <= 0:
        raise SettingsError(f"{flag}: {shown(value)} must be greater than zero")
    return value


def zero_or_more(flag: str, value):
    if value < 0:
        raise SettingsError(f"{flag}: {shown(value)} must be zero or more")
    return value


def switch(_flag: str, value) -> bool:
    return bool(value)


def list_items(flag: str, text: str, what: str, empty_means: str) -> list[str]:
    """The comma-separated entries of a list option; empty text, none. An empty entry is refused: ``,`` must not
    quietly mean "none" (for --etcd-endpoints, a local etcd instead of the cluster meant)."""
    if not text.strip():
        return []
    items = [part.strip() for part in text.split(",")]
    if not all(items):
        raise SettingsError(
            f"{flag}: {shown(text)} has an empty entry; give {what} separated by single commas, or nothing at all "
            f"for {empty_means}"
        )
    return items


def parse_weights(flag: str, text: str, names: tuple[str, ...], example: str) -> tuple[tuple[str, float], ...]:
    """``NAME:WEIGHT,…`` of known ``names`` into ((name, weight), …): each name once, at least one weight above zero.

    The one parser of every weights option (--etcd-mix, --etcd-k8s-read-mix, --etcd-k8s-write-mix).
    """
    weights: list[tuple[str, float]] = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        name, _, weight = item.partition(":")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if name.strip() not in names or not math.isfinite(value) or value < 0:
            raise SettingsError(
                f"{flag}: {shown(item)} is not NAME:WEIGHT with a finite weight of zero or more and a name among "
                f"{', '.join(names)}"
            )
        if name.strip() in (known for known, _ in weights):
            raise SettingsError(f"{flag}: {name.strip()!r} is listed twice; give each name once, e.g. {example}")
        weights.append((name.strip(), value))
    total = sum(weight for _, weight in weights)
    if not weights or total <= 0:
        raise SettingsError(f"{flag}: give at least one name with a positive weight, e.g. {example}")
    if not math.isfinite(total):
        raise SettingsError(f"{flag}: the weights add up to more than a number holds; give e.g. {example}")
    return tuple(weights)
