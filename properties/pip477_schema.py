"""PIP-477 schema locator: putSchema and schema PROMOTE, each a read and a CAS on the locator's
version, for any number of brokers and any length of index.

I3 (no acknowledged schema write is lost, and no locator write is blind) and I10 (PROMOTE and
ROLLBACK never change an entry's business fields: ledger, entry, schema version, hash) are
proved inductive together, strengthened by the version argument: a read whose version is still
the locator's holds exactly the locator's index. An entry's business fields are one integer
here (what I10 compares), its attribution a cluster name. The mutants that write without the
version (``mutant:blind-schema-promote``) or rebuild entries without their hash
(``mutant:promote-resets-hash``) break it, each with a counterexample to induction.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, Verdict, agreement, inductive as induction

Broker = z3.DeclareSort("Broker")
Attr, (A_NONE, A_OLD, A_NEW) = z3.EnumSort("Attr", ("none", "old", "new"))
ATTR = {None: A_NONE, "old": A_OLD, "new": A_NEW}
SECTION = ("PIP-477 I3 'CAS-serialized'; I10; Schema PROMOTE: brokerZk.put(\"/schemas/<schemaId>\", updated, "
           "version), catch (BadVersionException) { continue; }")
INDEX = z3.ArraySort(z3.IntSort(), z3.IntSort())
ATTRS = z3.ArraySort(z3.IntSort(), Attr)


class Vars:
    def __init__(self, tag: str):
        self.n = z3.Int(f"len{tag}")  # entries in the index
        self.ver = z3.Int(f"ver{tag}")  # the locator znode's version
        self.biz = z3.Array(f"biz{tag}", z3.IntSort(), z3.IntSort())  # entry -> business fields
        self.attr = z3.Array(f"attr{tag}", z3.IntSort(), Attr)
        self.acked = z3.Int(f"acked{tag}")  # schema versions acknowledged to clients (ghost)
        self.blind = z3.Int(f"blind{tag}")  # locator writes made without the version (ghost)
        self.rd = z3.Array(f"rd{tag}", Broker, z3.BoolSort())  # a PROMOTE read is held
        self.rd_ver = z3.Array(f"rd_ver{tag}", Broker, z3.IntSort())
        self.rd_n = z3.Array(f"rd_n{tag}", Broker, z3.IntSort())
        self.rd_biz = z3.Array(f"rd_biz{tag}", Broker, INDEX)
        self.rd_attr = z3.Array(f"rd_attr{tag}", Broker, ATTRS)
        self.put = z3.Array(f"put{tag}", Broker, z3.BoolSort())  # a putSchema holds a read version
        self.put_ver = z3.Array(f"put_ver{tag}", Broker, z3.IntSort())

    NAMES = ("n", "ver", "biz", "attr", "acked", "blind", "rd", "rd_ver", "rd_n", "rd_biz", "rd_attr", "put",
             "put_ver")

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def flipped(attr, n, to, frm):
    """The attribution array with every entry below ``n`` stamped ``frm`` re-stamped ``to``."""
    i = z3.Int("i")
    return z3.Lambda([i], z3.If(z3.And(0 <= i, i < n, attr[i] == frm), to, attr[i]))


def transitions(v: Vars, w: Vars, b, entry, stamp, variant: str = "as-written") -> dict:
    """Action label -> formula, for broker ``b``, a new entry's business value ``entry`` and
    stamp ``stamp`` (the action's parameters, free)."""
    blind = variant == "mutant:blind-schema-promote"
    reset = variant == "mutant:promote-resets-hash"
    i = z3.Int("i")
    matches = v.rd_ver[b] == v.ver
    new_biz = v.rd_biz[b]
    if reset:  # the rebuilt entries lose their hash (``business``: its last three digits) to 0
        new_biz = z3.Lambda([i], z3.If(z3.And(0 <= i, i < v.rd_n[b], v.rd_attr[b][i] == A_OLD),
                                       v.rd_biz[b][i] - v.rd_biz[b][i] % 1000, v.rd_biz[b][i]))
    return {
        "put_schema_start": z3.And(z3.Not(v.put[b]), w.put == z3.Store(v.put, b, True),
                                   w.put_ver == z3.Store(v.put_ver, b, v.ver), *v.keep(w, "put", "put_ver")),
        "put_schema_cas": z3.And(v.put[b], v.put_ver[b] == v.ver, w.biz == z3.Store(v.biz, v.n, entry),
                                 w.attr == z3.Store(v.attr, v.n, stamp), w.n == v.n + 1, w.ver == v.ver + 1,
                                 w.acked == v.acked + 1, w.put == z3.Store(v.put, b, False),
                                 *v.keep(w, "biz", "attr", "n", "ver", "acked", "put")),
        "put_schema_conflict": z3.And(v.put[b], v.put_ver[b] != v.ver, w.put_ver == z3.Store(v.put_ver, b, v.ver),
                                      *v.keep(w, "put_ver")),
        "promote_schema_read": z3.And(z3.Not(v.rd[b]), w.rd == z3.Store(v.rd, b, True),
                                      w.rd_ver == z3.Store(v.rd_ver, b, v.ver), w.rd_n == z3.Store(v.rd_n, b, v.n),
                                      w.rd_biz == z3.Store(v.rd_biz, b, v.biz),
                                      w.rd_attr == z3.Store(v.rd_attr, b, v.attr),
                                      *v.keep(w, "rd", "rd_ver", "rd_n", "rd_biz", "rd_attr")),
        "promote_schema_cas": z3.And(v.rd[b], z3.Or(matches, blind), w.n == v.rd_n[b], w.biz == new_biz,
                                     w.attr == flipped(v.rd_attr[b], v.rd_n[b], A_NEW, A_OLD), w.ver == v.ver + 1,
                                     w.blind == v.blind + z3.If(matches, 0, 1), w.rd == z3.Store(v.rd, b, False),
                                     *v.keep(w, "n", "biz", "attr", "ver", "blind", "rd")),
        "promote_schema_conflict": z3.And(v.rd[b], z3.Not(matches), z3.BoolVal(not blind),
                                          w.rd == z3.Store(v.rd, b, False), *v.keep(w, "rd")),
        "rollback_schema": z3.And(w.attr == flipped(v.attr, v.n, A_OLD, A_NEW), w.ver == v.ver + 1,
                                  *v.keep(w, "attr", "ver")),
    }


def i3(v: Vars):
    return z3.And(v.blind == 0, v.n == v.acked)


def invariant(v: Vars):
    b, i = z3.Const("b", Broker), z3.Int("i")
    return z3.And(i3(v), v.n >= 0, v.ver >= 0, z3.ForAll([b], z3.And(
        z3.Implies(v.rd[b], z3.And(0 <= v.rd_ver[b], v.rd_ver[b] <= v.ver, v.rd_n[b] >= 0)), z3.Implies(v.put[b], v.put_ver[b] <= v.ver),
        z3.Implies(z3.And(v.rd[b], v.rd_ver[b] == v.ver), z3.And(
            v.rd_n[b] == v.n, z3.ForAll([i], z3.Implies(z3.And(0 <= i, i < v.n), z3.And(
                v.rd_biz[b][i] == v.biz[i], v.rd_attr[b][i] == v.attr[i]))))))))


def i10(v: Vars, w: Vars):
    """Every entry there was keeps its business fields."""
    i = z3.Int("i")
    return z3.And(w.n >= v.n, z3.ForAll([i], z3.Implies(z3.And(0 <= i, i < v.n), w.biz[i] == v.biz[i])))


def init(v: Vars):
    b = z3.Const("b", Broker)
    return z3.And(v.n == 0, v.ver == 0, v.acked == 0, v.blind == 0,
                  z3.ForAll([b], z3.And(z3.Not(v.rd[b]), z3.Not(v.put[b]))))


def describe(m, v: Vars, b) -> str:
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    held = (f"PROMOTE read of version {e(v.rd_ver[b])} ({e(v.rd_n[b])} entries)" if z3.is_true(e(v.rd[b]))
            else "no PROMOTE read")
    return (f"{{locator version {e(v.ver)}, {e(v.n)} entries, {e(v.acked)} acknowledged, {e(v.blind)} blind "
            f"writes; the broker holds {held}}}")


def inductive(variant: str = "as-written") -> Verdict:
    """Init implies Inv; Inv and any action imply Inv' and, for PROMOTE and ROLLBACK, I10."""
    v, w = Vars(""), Vars("'")
    b, entry, stamp = z3.Const("broker", Broker), z3.Int("entry"), z3.Const("stamp", Attr)
    return induction(init(v), invariant(v), invariant(w), transitions(v, w, b, entry, stamp, variant),
                     lambda m: describe(m, v, b), lambda m: describe(m, w, b),
                     also=lambda label: i10(v, w) if label in ("promote_schema_cas", "rollback_schema") else True)


def business(e) -> int:
    """The business fields of a Python ``IndexEntry`` as one integer (ledger, entry, schema
    version and hash are small numbers in the model)."""
    return ((e.ledger * 100 + e.entry) * 100 + e.schema_version) * 1000 + e.hash


def concrete(v: Vars, state, brokers: int):
    bs = [z3.Const(f"B{i}", Broker) for i in range(brokers)]
    out = [v.n == len(state.schema), v.ver == state.schema_version, v.acked == state.schemas_acked,
           v.blind == state.zk_writes]
    if brokers > 1:
        out.append(z3.Distinct(*bs))
    for i, e in enumerate(state.schema):
        out += [v.biz[i] == business(e), v.attr[i] == ATTR[e.attr]]
    for c, x in zip(bs, state.brokers):
        out.append(v.rd[c] == (x.promote_read is not None))
        if x.promote_read is not None:
            version, read = x.promote_read
            out += [v.rd_ver[c] == version, v.rd_n[c] == len(read)]
            out += [z3.And(v.rd_biz[c][i] == business(e), v.rd_attr[c][i] == ATTR[e.attr]) for i, e in enumerate(read)]
        out.append(v.put[c] == (x.put_schema is not None))
        if x.put_schema is not None:
            out.append(v.put_ver[c] == x.put_schema[2])
    return z3.And(*out), bs


def disagreements(model, pairs, transitions_of=transitions) -> list[str]:
    """Each Python transition is admitted by its action's formula (an unlisted action leaves the
    encoded variables alone), on the entries and reads that exist; and, for the locator's own
    fields, nothing else is admitted."""
    out = []
    v, w = Vars(""), Vars("'")
    b, entry, stamp = z3.Const("broker", Broker), z3.Int("entry"), z3.Const("stamp", Attr)
    steps = transitions_of(v, w, b, entry, stamp, model.config.variant)
    for s, a, t in pairs:
        pre, bs = concrete(v, s, len(s.brokers))
        post, _ = concrete(w, t, len(t.brokers))
        step = steps.get(a.name, z3.And(*v.keep(w)))
        binding = [b == bs[a.param("broker")]] if "broker" in dict(a.params) else []
        if a.name == "put_schema_cas":
            new = t.schema[-1]
            binding += [entry == business(new), stamp == ATTR[new.attr]]
        locator = z3.And(w.n == len(t.schema), w.ver == t.schema_version, w.acked == t.schemas_acked,
                         w.blind == t.zk_writes, *[w.biz[i] == business(e) for i, e in enumerate(t.schema)])
        out += [f"{a}: {problem}" for problem in agreement(pre, z3.And(step, *binding), post, locator)]
    return out


OBLIGATIONS = [
    Obligation("pip-477", "I3-I10-inductive", "I3 and I10 are inductive, for any number of brokers and entries",
               SECTION, lambda: inductive("as-written"), ("as-written", "all-fixes"), proves=("I3", "I10")),
    Obligation("pip-477", "I3-I10-inductive", "I3 and I10 are inductive, for any number of brokers and entries",
               SECTION, lambda: inductive("mutant:blind-schema-promote"), ("mutant:blind-schema-promote",),
               proves=("I3", "I10")),
    Obligation("pip-477", "I3-I10-inductive", "I3 and I10 are inductive, for any number of brokers and entries",
               SECTION, lambda: inductive("mutant:promote-resets-hash"), ("mutant:promote-resets-hash",),
               proves=("I3", "I10")),
]
