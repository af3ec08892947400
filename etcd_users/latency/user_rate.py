"""The users that send at ``--etcd-user-rate`` and the whole seconds of a window: what the rate's judges count by
(whether the rate was held, whether the load generator was the limit). Pure."""

import math

# a User class's attribute: True when it sends at --etcd-user-rate; False for one that does not (watchers, the
# kubelets' heartbeats)
FOLLOWS_USER_RATE = "follows_user_rate"


def users_at_rate(environment, runner) -> int:
    """The users that send at ``--etcd-user-rate``, as the runner counts them once spawned."""
    classes = {user_class.__name__: user_class for user_class in environment.user_classes or ()}
    counts = getattr(runner, "target_user_classes_count", {}) or {}
    return sum(count for name, count in counts.items() if getattr(classes.get(name), FOLLOWS_USER_RATE, False))


def whole_seconds(start: float, end: float) -> range:
    """The whole unix seconds [T, T+1) inside [start, end)."""
    first = math.ceil(start)
    return range(first, max(first, math.floor(end)))
