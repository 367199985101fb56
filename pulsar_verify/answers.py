"""``answers-true``: every answer of the ``answer`` kind judged against what the system decided.

A model lists, per answering action, what makes its answer true (``judges``), or the property of its own that
judges it (``judged_by``); together they must be the model's whole ``answer`` kind, or loading the model's
properties fails. The property constrains every action of the kind, so an answer added to the kind later is
constrained at once, and ``tests/test_declarations.py`` checks that every step that answers is of the kind."""
from __future__ import annotations

from typing import Callable

from .model import ModelDefinitionError, PropertySet

ANSWERS_TRUE = "answers-true"


def says_nothing(m, s, a, t) -> bool:
    """An answer that tells the application nothing false: a timeout, or a send failed by a lost connection (the
    outcome is unknown to the application, which may only abort)."""
    return True


def declare(props: PropertySet, model: type, judges: dict[str, Callable], judged_by: dict[str, str],
            statement: str, section: str) -> None:
    """Declare ``answers-true`` in ``props`` for ``model``: each answering action's judge, the others named in
    ``judged_by`` (action -> the property that judges it)."""
    kind = set(model.action_kinds.get("answer", ()))
    if set(judges) | set(judged_by) != kind or set(judges) & set(judged_by):
        raise ModelDefinitionError(f"model {model.name}: {ANSWERS_TRUE} judges other answers than the model's "
                                   f"answer kind declares")

    def answers_true(m, s, a, t):
        judge = judges.get(a.name)
        return judge is None or judge(m, s, a, t)
    props.action_property(ANSWERS_TRUE, statement, section, about=("answer",))(answers_true)
