"""The questions a run asks of its variant, so that another variant's run can be known without running it.

A model reads its variant in two ways only: ``fix in m.fixes`` (is this fix applied?) and
``m.config.variant == name`` (is this the variant named?). A model is a deterministic function of
its state, its bounds and the answers to those questions, so two variants that answer every question
a run asked in the same way have the same run, state for state: same counts, verdicts and
counterexamples. A run made with ``Questions`` records them: ``m.fixes`` is then an ``AskedFixes`` and
``config.variant`` an ``AskedName``, which answer as the set and the string would and note each
question. Any other use of them (iterating the fixes, hashing the name, a string method, printing)
notes that the run may depend on the whole variant, and then no other variant can reuse it.
Neither is a subclass of ``frozenset`` or ``str``: C code that reads a set's or a string's contents
directly, unseen, would take them as such; with neither it must go through a method, which notes it.
"""
from __future__ import annotations

from typing import Any, Iterable


class Questions:
    """What one run asked: ``("fix", name)`` and ``("variant", name)`` questions, or ``whole`` when it
    used the variant some other way."""

    def __init__(self):
        self.asked: set[tuple[str, Any]] = set()
        self.whole = False

    def frozen(self) -> frozenset | None:
        """The questions asked, or None when the run may depend on the whole variant."""
        return None if self.whole else frozenset(self.asked)


def answers(variant, questions: Iterable[tuple[str, Any]]) -> dict:
    """How ``variant`` (a ``model.Variant``) answers each question."""
    return {q: (q[1] in variant.fixes if q[0] == "fix" else variant.name == q[1]) for q in questions}


def same_run(source, other, questions: frozenset | None) -> bool:
    """Whether ``other``'s run is ``source``'s: every question the source's run asked (``questions``,
    None for the whole variant) has the same answer under both variants."""
    return questions is not None and answers(source, questions) == answers(other, questions)


def _whole(name: str):
    """A method of ``AskedFixes``/``AskedName`` that uses the whole variant: noted, then done on the value."""
    def method(self, *args, **kw):
        self._q.whole = True
        return bool(self._value) if name == "__bool__" else getattr(self._value, name)(*args, **kw)
    method.__name__ = name
    return method


class _Asked:
    """A variant's fixes or name in a recorded run: the value, and the run's ``Questions``."""

    __slots__ = ("_value", "_q")

    def __init__(self, value, questions: Questions):
        self._value, self._q = value, questions


class AskedFixes(_Asked):
    """``m.fixes`` of a recorded run: membership and intersection note the fixes asked about."""

    __slots__ = ()

    def __contains__(self, fix) -> bool:
        self._q.asked.add(("fix", fix))
        return fix in self._value

    def __and__(self, other) -> frozenset:
        other = frozenset(other)
        self._q.asked.update(("fix", f) for f in other)
        return self._value & other

    __rand__ = __and__


class AskedName(_Asked):
    """``config.variant`` of a recorded run: ``==`` and ``!=`` note the name compared with."""

    __slots__ = ()

    def __eq__(self, other) -> bool:
        self._q.asked.add(("variant", other))
        return self._value == other

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = _whole("__hash__")

    def __radd__(self, other):
        self._q.whole = True
        return other + self._value

    def __getattr__(self, name: str):  # a string method (startswith, split, ...)
        self._q.whole = True
        return getattr(self._value, name)


for _name in ("__iter__", "__len__", "__bool__", "__eq__", "__ne__", "__hash__", "__or__", "__ror__", "__sub__",
              "__rsub__", "__xor__", "__rxor__", "__le__", "__lt__", "__ge__", "__gt__", "__repr__", "__str__",
              "__format__", "__reduce__", "__reduce_ex__", "union", "difference", "symmetric_difference",
              "issubset", "issuperset", "copy"):
    setattr(AskedFixes, _name, _whole(_name))
for _name in ("__str__", "__repr__", "__format__", "__len__", "__iter__", "__getitem__", "__contains__", "__add__",
              "__mul__", "__mod__", "__lt__", "__le__", "__gt__", "__ge__", "__reduce__", "__reduce_ex__"):
    setattr(AskedName, _name, _whole(_name))
