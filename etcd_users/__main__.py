"""``python -m etcd_users``: print every option of the tool (``locust --help`` cannot list a locustfile's own).

The option reference, generated from the declarations: what this command and the documentation's reference page
print (``docs/hooks/reference.py`` imports ``markdown`` from here)."""

import re

from etcd_users.core.features import option_groups


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def shown_default(value: object) -> str:
    """A default as a user types it: ``l``, ``5``, ``0.05``; an empty text is "none" and a switch "off" or "on"."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "":
        return "none"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def anchor(flag: str) -> str:
    """The id of an option's row on the reference page: the flag without its dashes (``#etcd-endpoints``)."""
    return flag.lstrip("-")


def markdown(heading_level: int = 2, anchors: bool = False) -> str:
    """Each feature's group as a heading, its description and a table: option, environment variable, default,
    meaning. With ``anchors`` (the site's page; a terminal gets neither) the groups are listed first, linked, and each
    option is a link to itself with an id of its own, ``options.md#etcd-endpoints``."""
    parts = []
    if anchors:  # the groups, linked: the page's own table of contents
        slug = {group.TITLE: re.sub(r"[^\w]+", "-", group.TITLE.lower()) for group in option_groups()}
        parts.append(" · ".join(f"[{title}](#{anchor})" for title, anchor in slug.items()) + "\n")
    for group in option_groups():
        parts.append(f"{'#' * heading_level} {group.TITLE}\n\n{group.DESCRIPTION}.\n")
        lines = ["| option | environment variable | default | meaning |", "|---|---|---|---|"]
        for declared in group.options():
            choices = f" One of: {', '.join(map(str, declared.choices))}." if declared.choices else ""
            flag = f"`{declared.flag}`"
            if anchors:
                flag = f"[{flag}](#{anchor(declared.flag)}){{#{anchor(declared.flag)}}}"
            default = shown_default(declared.default)
            lines.append(f"| {flag} | `{declared.env_var}` | {default} | {_cell(declared.help)}{choices} |")
        parts.append("\n".join(lines) + "\n")
        if group.REFERENCE:
            parts.append(group.REFERENCE)
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown())
