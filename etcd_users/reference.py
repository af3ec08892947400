"""The option reference, generated from the declarations: what the documentation's reference page and
``python -m etcd_users`` print (``locust --help`` answers before it loads a locustfile, so it never lists them)."""

from collections.abc import Iterator
from dataclasses import dataclass

from etcd_users.arguments import Option


@dataclass(frozen=True)
class OptionGroupDoc:
    title: str
    description: str
    options: tuple[Option, ...]


def option_groups() -> Iterator[OptionGroupDoc]:
    """Every option group of the tool, in the order the reference lists them."""
    from etcd_users.settings import OPTIONS
    from etcd_users.shapes.options import GROUP_TITLE
    from etcd_users.shapes.options import OPTIONS as SHAPE_OPTIONS

    yield OptionGroupDoc("etcd", "Connection, workload, gates and monitoring.", tuple(o for o in OPTIONS))
    yield OptionGroupDoc(GROUP_TITLE, "Load profiles of the shapes.", SHAPE_OPTIONS)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(heading_level: int = 2) -> str:
    """Each group as a heading, its description and a table: option, environment variable, default, meaning."""
    parts = []
    for group in option_groups():
        parts.append(f"{'#' * heading_level} {group.title}\n\n{group.description}\n")
        lines = ["| option | environment variable | default | meaning |", "|---|---|---|---|"]
        for option in group.options:
            choices = f" One of: {', '.join(map(str, option.choices))}." if option.choices else ""
            lines.append(
                f"| `{option.flag}` | `{option.env_var}` | `{option.default!r}` | {_cell(option.help)}{choices} |"
            )
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)
