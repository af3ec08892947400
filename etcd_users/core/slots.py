"""Typed slots: the state a feature owns on the process's plugin or on a run's context, one instance per type, made on
first use (``run_context(environment).get(MembersSeen)``). Core knows none of the types: each is its feature's."""

from typing import TypeVar

T = TypeVar("T")


class Slots:
    def __init__(self) -> None:
        self._slots: dict[type, object] = {}

    def get(self, kind: type[T]) -> T:
        """The instance of ``kind`` here, made with ``kind()`` on first use."""
        found = self._slots.get(kind)
        if found is None:
            found = self._slots[kind] = kind()
        return found  # type: ignore[return-value]

    def put(self, value: object) -> None:
        """``value`` as its type's instance here (one made elsewhere, or a fresh one for a new run)."""
        self._slots[type(value)] = value
