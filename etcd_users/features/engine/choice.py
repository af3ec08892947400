"""Which way each User class of a run sends its requests, and the line at the run's start that says so.

A ready workload's task (marked ``@ready``: put, the range users, delete, txn-put, txn-mixed, mixed, YCSB) runs its
user's requests as a coroutine on the transport's loop thread with ``--etcd-engine loop``, the default; with
``--etcd-engine greenlet`` it runs them from its greenlet, one hand-off to the loop thread per request, as every class
with tasks of its own (a workload of one's own, the watch, lease and Kubernetes users) always does.
"""

from collections.abc import Callable, Iterable

LOOP = "loop"
GREENLET = "greenlet"
_READY = "etcd_ready_workload"


def ready(task_function: Callable) -> Callable:
    """Mark a ready workload's task: it runs on the loop thread where ``--etcd-engine`` allows."""
    setattr(task_function, _READY, True)
    return task_function


def runs_on_loop(user_class, engine: str) -> bool:
    """``user_class``'s requests run on the loop thread: ``--etcd-engine loop`` and every task of it a ready one."""
    tasks = getattr(user_class, "tasks", None) or []
    return engine == LOOP and bool(tasks) and all(getattr(task, _READY, False) for task in tasks)


def engine_line(user_classes: Iterable[type], engine: str) -> str:
    """``engine: EtcdPutUser on the loop thread; MyUser on greenlets (tasks of its own)``."""
    on_loop, own, chosen = [], [], []
    for user_class in user_classes:
        if runs_on_loop(user_class, engine):
            on_loop.append(user_class.__name__)
        elif all(getattr(task, _READY, False) for task in getattr(user_class, "tasks", None) or []):
            chosen.append(user_class.__name__)
        else:
            own.append(user_class.__name__)
    parts = []
    if on_loop:
        parts.append(f"{', '.join(on_loop)} on the loop thread (a coroutine per user, results in batches)")
    if chosen:
        parts.append(f"{', '.join(chosen)} on greenlets (--etcd-engine greenlet)")
    if own:
        parts.append(f"{', '.join(own)} on greenlets (tasks of its own)")
    return "engine: " + "; ".join(parts)
