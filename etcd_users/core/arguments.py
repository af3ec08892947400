"""Command-line options as Locust plugins declare them: one argument group, an environment variable and a typed
default for each option, shown in the web UI's start form (secrets masked), and a Markdown reference table.

The web UI casts the form's strings to the default's type, so every option has a default of the right type; an
option with choices is a drop-down there.

Bad input is told as the rest of the tool tells it: argparse's own errors about these options (a value that is not a
number, a choice not offered, a missing value, a misspelt ``--etcd-*`` flag) come out as one line
``locust-etcd: error: --FLAG: …`` with exit code 2, not as Locust's ``locust: error: argument --FLAG: …``.
"""

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

ERROR_PREFIX = "locust-etcd: error: "
SHOWN_MATCHES = 4
"""Flags named in the error for an ambiguous abbreviation; the rest are counted."""
_NUMBER_WORDS = {int: "a whole number", float: "a number"}


@dataclass(frozen=True)
class Option:
    """One command-line option: its flag, typed default, help and choices, and the parser that turns its value into
    the settings' value (``parse(flag, value)``; None: the value as it is)."""

    flag: str
    default: object
    help: str
    secret: bool = False
    choices: tuple | None = None
    parse: Callable[[str, object], object] | None = field(default=None, compare=False)
    repeatable: bool = False  # given once per value: the values are a list (the default, no value, is empty)

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env_var(self) -> str:
        """Locust's convention: LOCUST_ and the option's name (``ETCD_*`` is etcd's own: it reads them as flags)."""
        return f"LOCUST_{self.dest.upper()}"

    @property
    def retired_env_var(self) -> str:
        """The variable that set the option before it followed Locust's convention."""
        return self.dest.upper()


def add_option_group(parser: argparse.ArgumentParser, title: str, description: str, options: Sequence[Option]) -> None:
    """Add ``options`` to Locust's parser in one group, once per parser (a module may be imported twice)."""
    if options[0].flag in getattr(parser, "_option_string_actions", {}):
        return
    group = parser.add_argument_group(title, description)
    for option in options:
        kwargs: dict = {
            "dest": option.dest,
            "default": option.default,
            "env_var": option.env_var,
            "help": f"{option.help} [env {option.env_var}, default {option.default!r}]",
        }
        if isinstance(option.default, bool):
            kwargs["action"] = "store_true"
        elif option.repeatable:  # argparse appends to a list of its own: the default must be None, not a tuple
            kwargs.update(action="append", default=None, type=str, metavar=option.dest.split("_")[-1].upper())
        else:
            kwargs["type"] = option_type(option)
            kwargs["metavar"] = option.dest.split("_", 1)[-1].upper()
            if option.choices:
                kwargs["choices"] = option.choices  # Locust's form renders an action's choices as a select
        action = group.add_argument(option.flag, **kwargs)
        # what LocustArgumentParser.add_argument sets; an argument group's add_argument does not know these
        action.include_in_web_ui = not option.repeatable  # the form has one field per option, not a list
        action.is_secret = option.secret
        action.is_required = False
        action.is_multiple = False
    route_errors(parser, {option.flag: option.flag for option in options})
    warn_retired_env_vars(options)


def warn_retired_env_vars(options: Sequence[Option], environ: Mapping[str, str] = os.environ) -> None:
    """One line for each variable the tool no longer reads, naming the one it reads now."""
    for option in options:
        if option.retired_env_var in environ and option.env_var not in environ:
            sys.stderr.write(
                f"locust-etcd: warning: {option.retired_env_var} is no longer read; set {option.env_var} instead\n"
            )


SHOWN_CHARACTERS = 60
SHOWN_PATH_CHARACTERS = 200  # a path's end names the file: long temporary directories stay whole


def shown(value: object, limit: int = SHOWN_CHARACTERS) -> str:
    """An input as a message quotes it: its repr, or for a long one the repr of its start and its length.

    A pasted file or a runaway variable must not turn a one-line error into 30 kB of echo.
    """
    if isinstance(value, str | bytes) and len(value) > limit:
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:limit]!r}… ({len(value)} {unit})"
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's digit limit for str()
        return f"a number of {value.bit_length()} bits"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def option_type(option: Option) -> Callable[[str], object]:
    """argparse's ``type=`` for ``option``: the default's type, and one of the choices when it has some."""
    kind = type(option.default)

    def convert(text: str) -> object:
        try:
            value = kind(text)
        except ValueError:
            what = f"{_NUMBER_WORDS.get(kind, kind.__name__)}; give one such as {option.default!r}"
            raise argparse.ArgumentTypeError(f"{shown(text)} is not {what}") from None
        if option.choices and value not in option.choices:
            raise argparse.ArgumentTypeError(f"{shown(value)} is not one of: {', '.join(map(str, option.choices))}")
        return value

    convert.__name__ = kind.__name__  # how argparse names the type in its own messages
    return convert


def route_errors(parser: argparse.ArgumentParser, arguments: dict[str, str]) -> None:
    """Tell ``parser``'s errors about ``arguments`` in the tool's words: one line, ``locust-etcd: error:``, exit 2.

    ``arguments`` maps how argparse names an argument in its messages (a flag, or a positional's metavar) to what the
    line says before the message ('' when the message says it all). Errors about other arguments stay the parser's.
    """
    routed = getattr(parser, "_locust_etcd_errors", None)
    if routed is None:
        routed = parser._locust_etcd_errors = {}
        parsers_error = parser.error

        def error(message: str):
            line = error_line(message, routed, [flag for action in parser._actions for flag in action.option_strings])
            if line is None:
                return parsers_error(message)
            return parser.exit(2, line + "\n")

        parser.error = error
    routed.update(arguments)


def error_line(message: str, routed: dict[str, str], flags: Sequence[str]) -> str | None:
    """The tool's line for an argparse error about a ``routed`` argument or a misspelt flag of their families (the
    ``--etcd-`` of ``--etcd-key-size``); None for any other error. ``flags``: every flag the parser knows."""
    first = (message.splitlines() or [""])[0]
    for name, label in routed.items():
        if first.startswith(f"argument {name}: "):
            text = first.removeprefix(f"argument {name}: ")
            return f"{ERROR_PREFIX}{label}: {text}" if label else f"{ERROR_PREFIX}{text}"
    families = {_family(name) for name in routed} - {None}
    for kind in ("unrecognized arguments: ", "ambiguous option: "):
        if not first.startswith(kind):
            continue
        rest = first.removeprefix(kind)
        flag = rest.split(" ")[0].split("=")[0][:SHOWN_CHARACTERS]
        if _family(flag) not in families:
            return None
        if kind == "ambiguous option: ":
            matches = rest.partition(" could match ")[2].split(", ")
            more = f" and {len(matches) - SHOWN_MATCHES} more" if len(matches) > SHOWN_MATCHES else ""
            return f"{ERROR_PREFIX}{flag}: could match {', '.join(matches[:SHOWN_MATCHES])}{more}"
        close = difflib.get_close_matches(flag, list(flags), n=1)
        return f"{ERROR_PREFIX}{flag}: no such option{f' (did you mean {close[0]}?)' if close else ''}"
    return None


def _family(flag: str) -> str | None:
    """``--etcd-`` for ``--etcd-key-size``; None for a flag of one word or a positional."""
    word, dash, _ = flag[2:].partition("-") if flag.startswith("--") else ("", "", "")
    return f"--{word}-" if word and dash else None
