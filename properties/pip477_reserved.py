"""PIP-477 I16: a key under the reserved ``_pulsar.`` prefix holds only what Pulsar core wrote, for
any set of subscription properties (the fix ``reserved-keys-rejected``).

Keys are an uninterpreted sort with a predicate ``reserved`` (the ``_pulsar.`` prefix; the attribution
key ``_pulsar.bookieClusterName`` is one of them). A cursor's properties are an array over it twice:
in the cursor znode (``z``) and in the topic owner's ``ManagedCursorInfo`` (``o``), which the owner's
writes start from. A value is a string, "" for an absent key. The steps of ``models/pip477`` that write
properties are each a formula: a user's subscription-property write (refused for a reserved key under
the fix), the cursor rollover's stamp, the owner's PROMOTE/ROLLBACK handler, the coordinator's own CAS
(``mutant:coordinator-promotes-cursor``) and the topic load (the owner reads the znode); every other
step keeps both. The claim, every reserved key holds "", "old" or "new" in both (core writes only
cluster names there), is inductive with the fix; as written, its counterexample to induction is a
user's write of a reserved key (of the attribution key in the finding
``subscription-property-overrides-attribution``, one step).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip477.state import ATTR_KEY, NEW

from .obligations import Obligation, Verdict, agreement, all_of, inductive as induction, with_fix
from .pip477_cursor import ATTR, Key, P_ABSENT, P_NEW, P_OLD, value

SECTION = "PIP-477 I16; Reserved Property Key: 'All keys under this prefix are reserved for Pulsar core/internal use'"
RESERVED = z3.Function("reserved", Key, z3.BoolSort())
USER_VALUE = z3.StringVal("user")
FIXED = with_fix("pip-477", "reserved-keys-rejected")
WRITES = ("set_sub_property", "cursor_rollover", "promote_cursor_handle", "promote_cursor_send", "load_topic")
# Whether these write depends on ledger ids and copies the encoding leaves out: each formula allows the write
# and no write, so the agreement checks a simulation (the formula admits the model's step), which keeps a proof
# over the formulas sound for the model.
GUARDED = ("promote_cursor_handle", "promote_cursor_send")


class Props:
    def __init__(self, tag: str):
        self.z = z3.Array(f"znode_props{tag}", Key, z3.StringSort())
        self.o = z3.Array(f"owner_props{tag}", Key, z3.StringSort())


def cluster_name(x) -> z3.BoolRef:
    return z3.Or(x == P_OLD, x == P_NEW)


def steps(v: Props, w: Props, variant: str, fixes, key, written) -> dict:
    """Each writing step from ``v`` to ``w``; ``key`` the user's key, ``written`` the cluster the step
    stamps (free constants in a proof: every key and every value)."""
    keep = z3.And(w.z == v.z, w.o == v.o)

    def both(props):
        return z3.And(w.z == props, w.o == props)
    refused = RESERVED(key) if "reserved-keys-rejected" in fixes else z3.BoolVal(False)
    stamp = P_ABSENT if variant == "mutant:stamp-after-create" else written
    base = z3.K(Key, P_ABSENT) if variant == "mutant:promote-clears-cursor-props" else v.o
    own_cas = (z3.Or(keep, z3.And(w.z == z3.Store(v.z, ATTR, P_NEW), w.o == v.o))
               if variant == "mutant:coordinator-promotes-cursor" else keep)
    return {
        "set_sub_property": z3.If(refused, keep, both(z3.Store(v.o, key, USER_VALUE))),
        "cursor_rollover": z3.And(cluster_name(written), both(z3.Store(v.o, ATTR, stamp))),
        "promote_cursor_handle": z3.Or(keep, z3.And(cluster_name(written), both(z3.Store(base, ATTR, written)))),
        "promote_cursor_send": own_cas,
        "load_topic": z3.And(w.z == v.z, w.o == v.z),
    }


def core_only(p: Props) -> z3.BoolRef:
    k = z3.Const("k", Key)
    return z3.ForAll([k], z3.Implies(RESERVED(k), z3.And(*[z3.Or(a[k] == P_ABSENT, cluster_name(a[k]))
                                                             for a in (p.z, p.o)])))


def inductive(variant: str) -> Verdict:
    from pulsar_verify import registry
    fixes = registry.model_class("pip-477").variant_named(variant).fixes
    v, w, key, written = Props(""), Props("'"), z3.Const("key", Key), z3.String("written")
    init = z3.And(RESERVED(ATTR), v.z == v.o, v.z[ATTR] == P_OLD, core_only(v))  # the cursor PIP-477 finds
    return induction(init, z3.And(RESERVED(ATTR), core_only(v)), core_only(w),
                     steps(v, w, variant, fixes, key, written),
                     before=lambda m: _show(m, v, key), after=lambda m: _show(m, w, key))


def _show(m: z3.ModelRef, p: Props, key) -> str:
    """The znode's cursorProperties on the attribution key and the user's key (said reserved or not)."""
    def at(k):
        return m.eval(p.z[k], model_completion=True)
    same = z3.is_true(m.eval(key == ATTR, model_completion=True))
    reserved = "reserved" if z3.is_true(m.eval(RESERVED(key), model_completion=True)) else "not reserved"
    user = "" if same else f", the user's key ({reserved}): {at(key)}"
    return f"cursorProperties {{{ATTR_KEY}: {at(ATTR)}{user}}}"


def disagreements(model, pairs, steps_of=steps) -> list[str]:
    """For each transition of the Python model: a writing step's formula admits its successor's
    properties and no other; any other step keeps them (the owner's copy may only be dropped). Decided
    once per distinct step: its name, key and stamp, and the properties before and after."""
    from pulsar_verify.models.pip477.state import USER_KEY
    keys = {ATTR_KEY: ATTR, USER_KEY: z3.Const("key_user", Key)}
    out, seen = [], set()
    for s, a, t in pairs:
        if a.name not in WRITES:
            if t.cursor.props != s.cursor.props or (t.own and s.own and t.own.info.props != s.own.info.props):
                out.append(f"{a}: changes the cursor's properties, which no formula allows")
            continue
        stamp = a.param("target") if a.name == "promote_cursor_handle" else (
            t.own.cursor[1] if a.name == "cursor_rollover" else NEW)
        name = dict(a.params).get("key", USER_KEY)
        step_seen = (a.name, name, stamp, _props(s), _props(t))
        if step_seen in seen:
            continue
        seen.add(step_seen)
        v, w = Props(""), Props("'")
        pre = z3.And(RESERVED(ATTR), z3.Not(RESERVED(keys[USER_KEY])), ATTR != keys[USER_KEY],
                     _concrete(v, s, keys))
        key = keys[name]
        step = steps_of(v, w, model.config.variant, model.fixes, key, value(stamp))[a.name]
        allowed = step if a.name in GUARDED else None
        out += [f"{a}: {problem}" for problem in agreement(pre, step, _concrete(w, t, keys), allowed=allowed)]
    return out


def _props(s) -> tuple:
    """The znode's properties and the owner's (None while no broker owns the topic)."""
    return s.cursor.props, s.own.info.props if s.own is not None else None


def _concrete(p: Props, s, keys: dict) -> z3.BoolRef:
    """``p`` fixed to state ``s``'s properties on ``keys`` (the owner's only while a broker owns the topic)."""
    znode, owner = _props(s)
    out = [p.z[k] == value(znode.get(name)) for name, k in keys.items()]
    if owner is not None:
        out += [p.o[k] == value(owner.get(name)) for name, k in keys.items()]
    return z3.And(*out)


OBLIGATIONS = [
    Obligation("pip-477", "I16-inductive", "I16 (a reserved key holds only a cluster name Pulsar core wrote) is "
               "inductive, for any set of subscription properties", SECTION, lambda: inductive("as-written"),
               ("as-written",), proves=("I16",)),
    Obligation("pip-477", "I16-inductive", "I16, for every reserved key, is inductive with reserved keys refused, "
               "for any set of subscription properties", SECTION, lambda: all_of(inductive(x) for x in FIXED),
               FIXED, proves=("I16",)),
]
