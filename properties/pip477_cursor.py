"""PIP-477 I9: cursor PROMOTE (and its ROLLBACK) never changes the cursor's business fields.

The owner's handler rewrites ``cursorProperties`` "with the attribution entry replaced" and
CASes the znode at its version. Keys are an uninterpreted sort (any number of user and
system properties), the properties an array over it; cursorsLedgerId and the markDelete
position are integers. The claim is one step: for every cursor and every target cluster,
the rewrite leaves every key but the attribution key, the ledger and the position as they
were. The mutant that keeps only the attribution entry (``mutant:promote-clears-cursor-props``)
breaks it.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, agreement, valid

Key = z3.DeclareSort("CursorKey")
PValue = z3.StringSort()  # a property's value; "" when the key is absent
P_ABSENT, P_OLD, P_NEW = z3.StringVal(""), z3.StringVal("old"), z3.StringVal("new")


def value(text) -> z3.SeqRef:
    return z3.StringVal(text or "")

ATTR = z3.Const("attribution", Key)
SECTION = "PIP-477 I9; Cursor PROMOTE (forwarded to topic owner): 'cursorProperties ... with the attribution replaced'"


class Cursor:
    def __init__(self, tag: str):
        self.ledger = z3.Int(f"ledger{tag}")
        self.md = z3.Int(f"md{tag}")
        self.props = z3.Array(f"props{tag}", Key, PValue)
        self.version = z3.Int(f"version{tag}")


def handle(c: Cursor, d: Cursor, target, variant: str = "as-written"):
    """The handler's write of cursor ``c`` as ``d``, stamping ``target``."""
    base = z3.K(Key, P_ABSENT) if variant == "mutant:promote-clears-cursor-props" else c.props
    return z3.And(d.ledger == c.ledger, d.md == c.md, d.version == c.version + 1,
                  d.props == z3.Store(base, ATTR, target))


def i9(variant: str = "as-written") -> Verdict:
    c, d = Cursor(""), Cursor("'")
    target, k = z3.String("target"), z3.Const("k", Key)
    business = z3.And(d.ledger == c.ledger, d.md == c.md,
                      z3.ForAll([k], z3.Implies(k != ATTR, d.props[k] == c.props[k])))
    return valid(z3.Implies(z3.And(z3.Or(target == P_OLD, target == P_NEW), handle(c, d, target, variant)),
                            business),
                 show=lambda m: "the rewrite changes a key other than the attribution key")


def concrete(c: Cursor, info, keys: dict):
    """``c`` fixed to a Python ``CursorInfo``; ``keys`` maps property names to Key constants."""
    out = [c.ledger == info.ledger, c.md == info.md, c.version == info.version]
    out += [c.props[k] == value(info.props.get(name)) for name, k in keys.items()]
    return z3.And(*out)


def disagreements(model, pairs, handle_of=handle) -> list[str]:
    """For each Python ``promote_cursor_handle`` that writes the cursor, the formula admits the
    written cursor and no other (on the keys the model uses)."""
    from pulsar_verify.models.pip477.state import ATTR_KEY
    out = []
    for s, a, t in pairs:
        if a.name != "promote_cursor_handle" or t.cursor == s.cursor:
            continue
        names = set(s.cursor.props.keys()) | set(t.cursor.props.keys()) | {ATTR_KEY}
        others = sorted(names - {ATTR_KEY})
        keys = {ATTR_KEY: ATTR, **{n: z3.Const(f"key_{n}", Key) for n in others}}
        c, d = Cursor(""), Cursor("'")
        pre = z3.And(z3.Distinct(*keys.values()) if len(keys) > 1 else z3.BoolVal(True), concrete(c, s.cursor, keys))
        step = handle_of(c, d, value(a.param("target")), model.config.variant)
        out += [f"{a}: {problem}" for problem in agreement(pre, step, concrete(d, t.cursor, keys))]
    return out


OBLIGATIONS = [
    Obligation("pip-477", "I9", "Cursor PROMOTE and ROLLBACK keep cursorsLedgerId, the markDelete position and "
               "every property but the attribution, for any set of properties", SECTION, i9, ("as-written",)),
    Obligation("pip-477", "I9", "Cursor PROMOTE and ROLLBACK keep cursorsLedgerId, the markDelete position and "
               "every property but the attribution, for any set of properties", SECTION,
               lambda: i9("mutant:promote-clears-cursor-props"), ("mutant:promote-clears-cursor-props",)),
]
