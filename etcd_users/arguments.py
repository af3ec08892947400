"""Command-line options as Locust plugins declare them: one argument group, an environment variable and a typed
default for each option, shown in the web UI's start form (secrets masked), and a Markdown reference table.

The web UI casts the form's strings to the default's type, so every option has a default of the right type.
"""

import argparse
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    flag: str
    default: object
    help: str
    secret: bool = False
    choices: tuple | None = None

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env_var(self) -> str:
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
        else:
            kwargs["type"] = type(option.default)
            kwargs["metavar"] = option.dest.split("_", 1)[-1].upper()
        action = group.add_argument(option.flag, **kwargs)
        # what LocustArgumentParser.add_argument sets; an argument group's add_argument does not know these
        action.include_in_web_ui = True
        action.is_secret = option.secret
        action.is_required = False
        action.is_multiple = False


def reference_table(options: Sequence[Option]) -> str:
    """The options as a Markdown table: ``locust --help`` answers before it loads a locustfile, so never lists them."""
    lines = ["| option | environment variable | default | meaning |", "|---|---|---|---|"]
    for option in options:
        choices = f" One of: {', '.join(map(str, option.choices))}." if option.choices else ""
        lines.append(f"| `{option.flag}` | `{option.env_var}` | `{option.default!r}` | {option.help}{choices} |")
    return "\n".join(lines)
