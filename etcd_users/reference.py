"""The option reference, generated from the declarations: what the documentation's reference page and
``python -m etcd_users`` print (``locust --help`` answers before it loads a locustfile, so it never lists them)."""

from etcd_users.features import FEATURES


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(heading_level: int = 2) -> str:
    """Each feature's group as a heading, its description and a table: option, environment variable, default,
    meaning."""
    parts = []
    for feature in FEATURES:
        group = feature.options
        parts.append(f"{'#' * heading_level} {group.TITLE}\n\n{group.DESCRIPTION}.\n")
        lines = ["| option | environment variable | default | meaning |", "|---|---|---|---|"]
        for declared in group.options():
            choices = f" One of: {', '.join(map(str, declared.choices))}." if declared.choices else ""
            default = f"`{declared.default!r}`"
            lines.append(f"| `{declared.flag}` | `{declared.env_var}` | {default} | {_cell(declared.help)}{choices} |")
        parts.append("\n".join(lines) + "\n")
        if group.REFERENCE:
            parts.append(group.REFERENCE)
    return "\n".join(parts)
