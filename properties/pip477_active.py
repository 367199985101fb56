"""PIP-477's active cluster, for any number of brokers and clusters: I6 (a broker that has applied the current
switch state, or restarted since, has the active cluster Broker-ZK records: the directive's target, or the ACTIVE
cluster before any switch) with the fix ``recover-from-directive``; I2 for the reads of a record without
attribution (a ledger written before the plugin, on the old cluster: every broker reads it from there) with
``fallback-to-source-cluster``; and, once the operator closed the old cluster's client, no broker has it as its
active cluster (what no-publish-pause needs of the owner: the cluster it creates ledgers on is open) with
``close-after-brokers-switched`` and ``recover-from-directive``.

Brokers and clusters are uninterpreted sorts (``old`` and ``new`` two distinct clusters). The encoding keeps the
registry's statuses, the switch directive (whether written, its target, epoch and source cluster), each broker's
``activeClusterName`` and applied epoch, and whether the old client is closed. Its steps, from ``models/pip477``:
the new cluster registers as STANDBY; the switch writes the directive (target ``new``, epoch 1, source the ACTIVE
cluster) once; a broker's directive watch applies it; the operator closes the old client after the switch (with
``close-after-brokers-switched``, once every broker applied the directive; the model's other conditions, no open
handle and CLEANUP done, are left out); a broker restarts and ``initialize()`` takes the ACTIVE cluster (tier 1),
or registers ``old`` as ACTIVE and takes it (tier 3), with its epoch the directive's (with
``recover-from-directive``, an existing directive decides its cluster); CLEANUP's status CASes rewrite ``old``'s
and ``new``'s statuses once the directive exists (here to any statuses). Everything else of the model writes none
of these, which ``simulation`` checks on every reachable state, each model step being one of these steps or a
stutter; it also checks that each broker's legacy fallback in the model (``routing.resolve`` of a record without
attribution) is the encoding's.

The claims are strengthened by ``switch_facts``. As written the counterexamples to induction are a restart once
the directive exists, the broker taking ``old`` at the directive's epoch (the finding
``restarted-broker-reverts-to-old-cluster``); a watch that moves a broker to ``new``, whose legacy fallback then
reads the old ledger from there (``legacy-ledger-read-from-new-cluster``); and the close while a broker still has
``old`` (``lagging-broker-stalls-after-close-client``; with ``close-after-brokers-switched`` alone, a restart after
the close: ``restarted-broker-stalls-after-close-client``).
"""
from __future__ import annotations

from typing import Callable

import z3

from .obligations import (Obligation, Verdict, _decide, distinct_changes, inductive as induction, not_simulated, one_of,
                          universe, with_fix)
from .pip477_registry import ABSENT, ACTIVE, NEW, OLD, STATUS, STANDBY, Cluster, Status
from .pip477_schema import Broker

RECOVER, SOURCE, SWITCHED = "recover-from-directive", "fallback-to-source-cluster", "close-after-brokers-switched"
LEGACY_SECTION = ("PIP-477 I2; Read-Path Routing: 'resolve(LedgerInfo li)' with the 'legacy fallback' for ledgers "
                  "without the stamp")
CLOSE_SECTION = ("PIP-477 Safety Guarantees: 'No publish/consume pause'; Phase 6.3 close-client; Wiring on Broker "
                 "Start 2")
SECTION = ("PIP-477 I6; Wiring on Broker Start 2: 'tier-1 -> Broker-ZK status=ACTIVE cluster ... tier-3 -> derive "
           "from bookkeeperMetadataServiceUri and auto-register as ACTIVE'; Phase 3: the watcher hot-swaps "
           "activeClusterName")


class Vars:
    NAMES = ("status", "directive", "target", "depoch", "source", "active", "epoch", "closed")

    def __init__(self, tag: str):
        self.status = z3.Array(f"i6_status{tag}", Cluster, Status)
        self.directive = z3.Bool(f"i6_directive{tag}")
        self.target = z3.Const(f"i6_target{tag}", Cluster)
        self.depoch = z3.Int(f"i6_depoch{tag}")
        self.source = z3.Const(f"i6_source{tag}", Cluster)  # the cluster ACTIVE when the directive was written
        self.active = z3.Array(f"i6_active{tag}", Broker, Cluster)
        self.epoch = z3.Array(f"i6_epoch{tag}", Broker, z3.IntSort())
        self.closed = z3.Bool(f"i6_closed{tag}")  # the operator closed the old cluster's client

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, b, c) -> dict:
    """Each step from ``v`` to ``w`` for the broker ``b``; ``c`` is the ACTIVE cluster a restart or the switch
    finds."""
    d = z3.Const("d", Cluster)
    no_active = z3.ForAll([d], v.status[d] != ACTIVE)
    recovered = z3.If(v.directive, v.target, c) if RECOVER in fixes else c
    return {
        "register": z3.And(v.status[NEW] == ABSENT, w.status == z3.Store(v.status, NEW, STANDBY),
                           *v.keep(w, "status")),
        "switch": z3.And(z3.Not(v.directive), v.status[c] == ACTIVE, w.directive, w.target == NEW, w.depoch == 1,
                         w.source == c, *v.keep(w, "directive", "target", "depoch", "source")),
        "watch": z3.And(v.directive, w.active == z3.Store(v.active, b, v.target),
                        w.epoch == z3.Store(v.epoch, b, v.depoch), *v.keep(w, "active", "epoch")),
        "close_client": z3.And(v.directive, z3.Not(v.closed), w.closed, *v.keep(w, "closed"),
                               *([z3.ForAll([b], v.epoch[b] == v.depoch)] if SWITCHED in fixes else [])),
        "restart": z3.And(z3.If(no_active, z3.And(c == OLD, w.status == z3.Store(v.status, OLD, ACTIVE)),
                                z3.And(v.status[c] == ACTIVE, w.status == v.status)),
                          w.active == z3.Store(v.active, b, recovered),
                          w.epoch == z3.Store(v.epoch, b, z3.If(v.directive, v.depoch, 0)),
                          *v.keep(w, "status", "active", "epoch")),
        "cleanup_status": z3.And(v.directive, z3.ForAll([d], z3.Or(d == OLD, d == NEW, w.status[d] == v.status[d])),
                                 *v.keep(w, "status")),
    }


def fallback(v: Vars, fixes, b):
    """The cluster broker ``b`` reads a record without attribution from (``resolve``'s legacy fallback): its
    active cluster, or with ``fallback-to-source-cluster`` once the directive exists, its source."""
    return z3.If(v.directive, v.source, v.active[b]) if SOURCE in fixes else v.active[b]


def i6(v: Vars, fixes) -> z3.BoolRef:
    """I6: before the switch a broker's cluster is an ACTIVE one; after it, a broker at the directive's epoch has
    its target."""
    b = z3.Const("b", Broker)
    return z3.ForAll([b], z3.And(z3.Implies(z3.Not(v.directive), v.status[v.active[b]] == ACTIVE),
                                 z3.Implies(z3.And(v.directive, v.epoch[b] == v.depoch), v.active[b] == v.target)))


def legacy_from_old(v: Vars, fixes) -> z3.BoolRef:
    """Every broker reads a record without attribution (a ledger written before the plugin, on the old cluster,
    its only home) from the old cluster."""
    b = z3.Const("b", Broker)
    return z3.ForAll([b], fallback(v, fixes, b) == OLD)


def old_client_unused(v: Vars, fixes) -> z3.BoolRef:
    """I6, and once the old cluster's client is closed no broker creates ledgers with it (what no-publish-pause
    needs of the owner: the cluster it creates on is open)."""
    b = z3.Const("b", Broker)
    return z3.And(i6(v, fixes), z3.Implies(v.closed, z3.ForAll([b], v.active[b] != OLD)))


def switch_facts(v: Vars) -> z3.BoolRef:
    """Before the switch ``old`` is the one ACTIVE cluster and every broker's, at epoch 0; after it, the directive
    is to ``new`` at epoch 1, from ``old``, and a broker's epoch is 0 or the directive's; only ``old`` or ``new`` is
    ever ACTIVE."""
    b, d = z3.Const("b", Broker), z3.Const("d", Cluster)
    return z3.And(z3.Distinct(OLD, NEW),
                  z3.Implies(v.directive, z3.And(v.target == NEW, v.depoch == 1, v.source == OLD)),
                  z3.Implies(z3.Not(v.directive), z3.ForAll([d], (v.status[d] == ACTIVE) == (d == OLD))),
                  z3.ForAll([d], z3.Implies(v.status[d] == ACTIVE, z3.Or(d == OLD, d == NEW))),
                  z3.ForAll([b], z3.And(z3.Or(v.epoch[b] == 0, z3.And(v.directive, v.epoch[b] == v.depoch)),
                                        z3.Implies(z3.Not(v.directive), v.active[b] == OLD))))


def init(v: Vars) -> z3.BoolRef:
    b, d = z3.Const("b", Broker), z3.Const("d", Cluster)
    return z3.And(z3.Distinct(OLD, NEW), v.status[OLD] == ACTIVE,
                  z3.ForAll([d], z3.Implies(d != OLD, v.status[d] == ABSENT)),
                  z3.Not(v.directive), z3.Not(v.closed), z3.ForAll([b], z3.And(v.active[b] == OLD, v.epoch[b] == 0)))


CLAIMS = {"I6": i6, "legacy-reads-from-old": legacy_from_old, "old-client-unused": old_client_unused}


def inductive(claim: str, fixes) -> Verdict:
    """The claim, strengthened by ``switch_facts``."""
    v, w = Vars(""), Vars("'")
    b, c = z3.Const("broker", Broker), z3.Const("found", Cluster)
    state = lambda x: z3.And(switch_facts(x), CLAIMS[claim](x, fixes))  # noqa: E731
    return induction(init(v), state(v), state(w), steps(v, w, fixes, b, c), before=lambda m: describe(m, v),
                     after=lambda m: describe(m, w, b))


def describe(m: z3.ModelRef, v: Vars, step=None) -> str:
    """The statuses, the directive and each broker's cluster and epoch, brokers named b0, b1, ...; with ``step``
    (its broker), which broker took it."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    clusters = m.get_universe(Cluster) or []
    cn = {str(e(OLD)): "old", str(e(NEW)): "new"}
    cn.update({str(x): f"cluster{i}" for i, x in enumerate(clusters) if str(x) not in cn})
    brokers, bn = universe(m, Broker, "b", 0)
    statuses = ", ".join(f"{cn[str(x)]} {e(v.status[x])}" for x in clusters if str(e(v.status[x])) != "ABSENT")
    directive = (f"directive to {cn[str(e(v.target))]} at epoch {e(v.depoch)}" if z3.is_true(e(v.directive))
                 else "no directive") + ("; old client closed" if z3.is_true(e(v.closed)) else "")
    held = ", ".join(f"{bn[str(x)]} on {cn[str(e(v.active[x]))]} at epoch {e(v.epoch[x])}" for x in brokers)
    took = "" if step is None else f" (taken by {bn.get(str(e(step)), 'a broker')})"
    return f"{{registry {statuses}; {directive}; {held}}}{took}"


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: the two clusters' statuses, the directive's (target,
    epoch, source) or None, each broker's (cluster, epoch), and whether the old cluster's client is closed."""
    d = s.directive
    return (s.registry.get("old", "ABSENT"), s.registry.get("new", "ABSENT"),
            None if d is None else (d[0], d[2], d[3]), tuple((x.active, x.epoch) for x in s.brokers), "old" in s.closed)


CLUSTER = {"old": OLD, "new": NEW}


def _concrete(v: Vars, projection, bs: list) -> z3.BoolRef:
    old, new, directive, brokers, closed = projection
    status = lambda name: ABSENT if name == "ABSENT" else STATUS[name]  # noqa: E731
    out = [v.status == z3.Store(z3.Store(z3.K(Cluster, ABSENT), OLD, status(old)), NEW, status(new)),
           v.directive == (directive is not None), v.closed == closed]
    if directive is not None:
        out += [v.target == CLUSTER[directive[0]], v.depoch == directive[1], v.source == CLUSTER[directive[2]]]
    for b, (active, epoch) in zip(bs, brokers):
        out += [v.active[b] == CLUSTER[active], v.epoch[b] == epoch]
    return z3.And(*out)


def simulation(model, pairs, steps_of=steps, fallback_of=fallback) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), taken by a named broker; and in each state, each broker's legacy fallback
    (``routing.resolve`` of a record without attribution) is the encoding's ``fallback``."""
    from pulsar_verify.models.pip477.routing import resolve
    out, fell = [], set()
    for s, a, t, change in distinct_changes(pairs, _projection):
        bs = [z3.Const(f"B{i}", Broker) for i in range(len(s.brokers))]
        v, w = Vars(""), Vars("'")
        b, c = z3.Const("broker", Broker), z3.Const("found", Cluster)
        facts = [z3.Distinct(OLD, NEW), *([z3.Distinct(*bs)] if len(bs) > 1 else []), z3.Or(*[b == x for x in bs]),
                 _concrete(v, change[0], bs), _concrete(w, change[1], bs)]
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}",
                             one_of(facts, steps_of(v, w, model.fixes, b, c).values()))
    for s, _, _ in pairs:
        routes = tuple(resolve(model, s, None, i) for i in range(len(s.brokers)))
        key = (_projection(s), routes)
        if key in fell:
            continue
        fell.add(key)
        bs = [z3.Const(f"B{i}", Broker) for i in range(len(s.brokers))]
        v = Vars("")
        differs = z3.Or(*[fallback_of(v, model.fixes, x) != CLUSTER[r] for x, r in zip(bs, routes)])
        if _decide(z3.Distinct(OLD, NEW), *([z3.Distinct(*bs)] if len(bs) > 1 else []), _concrete(v, key[0], bs),
                   differs)[0] != z3.unsat:
            out.append(f"in {key[0]} the model's legacy fallback is {routes}, not the encoding's")
    return out


def registry_fixes(variant: str) -> frozenset:
    """The fixes the model's variant applies (from the model, not re-typed)."""
    from pulsar_verify import registry
    return registry.model_class("pip-477").variant_named(variant).fixes


def _claim(name: str, fixes) -> Callable[[], Verdict]:
    return lambda: inductive(name, frozenset(fixes))


OBLIGATIONS = [
    Obligation("pip-477", "I6-inductive", "I6 is inductive for any number of brokers and clusters, a restarting broker "
               "taking the ACTIVE cluster", SECTION, _claim("I6", ()), ("as-written",), proves=("I6",)),
    Obligation("pip-477", "I6-inductive", "I6 is inductive for any number of brokers and clusters, a restarting broker "
               "taking an existing directive's target", SECTION, _claim("I6", {RECOVER}), with_fix("pip-477", RECOVER),
               proves=("I6",)),
    Obligation("pip-477", "legacy-reads-from-old-inductive", "Every broker reads a record without attribution (a "
               "ledger from before the plugin, whose only home is the old cluster) from the old cluster, for any "
               "number of brokers and clusters, the fallback being the broker's active cluster (I2 for those reads)",
               LEGACY_SECTION, _claim("legacy-reads-from-old", ()), ("as-written",)),
    Obligation("pip-477", "legacy-reads-from-old-inductive", "Every broker reads a record without attribution from the "
               "old cluster, for any number of brokers and clusters, the fallback being the directive's source "
               "cluster once there is one (I2 for those reads)", LEGACY_SECTION, _claim("legacy-reads-from-old",
                                                                                         {SOURCE}),
               with_fix("pip-477", SOURCE)),
    *[Obligation("pip-477", "old-client-unused-inductive", "I6, and once the old cluster's client is closed no broker "
                 f"has it as its active cluster, for any number of brokers and clusters ({how})", CLOSE_SECTION,
                 _claim("old-client-unused", registry_fixes(variant)), (variant,))
      for variant, how in (("as-written", "closed once no handle is open"),
                           (SWITCHED, "closed once every broker applied the directive"),
                           ("all-fixes", "closed once every broker applied the directive, a restart taking the "
                                         "directive's target"))],
]
