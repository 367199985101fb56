"""PIP-477's active cluster and routing, for any number of brokers, clusters and records: I6 (a broker that has
applied the current switch state, or restarted since, has the active cluster Broker-ZK records: the directive's
target, or the ACTIVE cluster before any switch) with the fix ``recover-from-directive``; I2 for the reads of a
record without attribution (a ledger written before the plugin, on the old cluster: every broker reads it from
there) with ``fallback-to-source-cluster``; once the operator closed the old cluster's client, no broker has it as
its active cluster (what no-publish-pause needs of the owner: the cluster it creates ledgers on is open) with
``close-after-brokers-switched`` and ``recover-from-directive``; and once it is closed no record routes a read to
it, whichever broker reads (I2 for the reads after the close) with ``close-after-data-expires`` and
``fallback-to-source-cluster``.

Brokers, clusters and records (a Broker-ZK record's (kind, ledger)) are uninterpreted sorts (``old`` and ``new``
two distinct clusters). The encoding keeps the registry's statuses, the switch directive (whether written, its
target, epoch and source cluster), each broker's ``activeClusterName`` and applied epoch, whether the orchestrator
is DONE and whether ROLLBACK started, whether the old client is closed, and each record's stamp. Its steps, from
``models/pip477``: the new cluster registers as STANDBY; the switch writes the directive (target ``new``, epoch 1,
source the ACTIVE cluster) once; a broker's directive watch applies it; a broker restarts and ``initialize()``
takes the ACTIVE cluster (tier 1), or registers ``old`` as ACTIVE and takes it (tier 3), with its epoch the
directive's (with ``recover-from-directive``, an existing directive decides its cluster); CLEANUP's status CASes
rewrite ``old``'s and ``new``'s statuses and may end in DONE; the operator starts ROLLBACK before DONE; the
operator closes the old client after DONE (with ``close-after-brokers-switched``, once every broker applied the
directive; with ``close-after-data-expires``, once no record routes to it as broker 0 resolves them; the model's
other condition, no open handle on it, is left out); records are dropped (trimming, rollover) and created stamped
with the creating broker's active cluster, which it can create on (not the old one once closed); PROMOTE re-stamps
records ``new`` and ROLLBACK ``old``. Everything else of the model writes none of these, which ``simulation``
checks on every reachable state, each model step being one of these steps or a stutter; it also checks that each
broker's legacy fallback in the model (``routing.resolve`` of a record without attribution) is the encoding's.

The claims are strengthened by ``switch_facts``. As written the counterexamples to induction are a restart once
the directive exists, the broker taking ``old`` at the directive's epoch (the finding
``restarted-broker-reverts-to-old-cluster``); a watch that moves a broker to ``new``, whose legacy fallback then
reads the old ledger from there (``legacy-ledger-read-from-new-cluster``); the close while a broker still has
``old`` (``lagging-broker-stalls-after-close-client``; with ``close-after-brokers-switched`` alone, a restart after
the close: ``restarted-broker-stalls-after-close-client``); and the close while a record stamped ``old`` is still
listed (``close-client-strands-unexpired-data``; with ``close-after-data-expires`` alone, the close while a record
without attribution routes to ``new`` for broker 0 and to ``old`` for another, which only the source-cluster
fallback makes every broker resolve alike).
"""
from __future__ import annotations

from typing import Callable

import z3

from .obligations import (Obligation, Verdict, _decide, distinct_changes, fixes_of, inductive as induction,
                          not_simulated, one_of, universe, with_fix)
from .pip477_registry import ABSENT, ACTIVE, NEW, OLD, STATUS, STANDBY, Cluster, Status
from .pip477_schema import Broker
from .pip477_stamps import STAMP, STAMP_NEW, STAMP_OLD, UNSTAMPED, Ledger, Stamp

RECOVER = "recover-from-directive"
SOURCE = "fallback-to-source-cluster"
SWITCHED = "close-after-brokers-switched"
EXPIRES = "close-after-data-expires"
LEGACY_SECTION = ("PIP-477 I2; Read-Path Routing: 'resolve(LedgerInfo li)' with the 'legacy fallback' for ledgers "
                  "without the stamp")
EXPIRE_SECTION = ("PIP-477 I2; Phase 6.3 close-client: 'Old BK client closure must be preceded by confirmation of "
                  "no active reads'; Read-Path Routing")
CLOSE_SECTION = ("PIP-477 Safety Guarantees: 'No publish/consume pause'; Phase 6.3 close-client; Wiring on Broker "
                 "Start 2")
SECTION = ("PIP-477 I6; Wiring on Broker Start 2: 'tier-1 -> Broker-ZK status=ACTIVE cluster ... tier-3 -> derive "
           "from bookkeeperMetadataServiceUri and auto-register as ACTIVE'; Phase 3: the watcher hot-swaps "
           "activeClusterName")


class Vars:
    NAMES = ("status", "directive", "target", "depoch", "source", "active", "epoch", "closed", "done", "rolling",
             "listed", "stamp")

    def __init__(self, tag: str):
        self.status = z3.Array(f"i6_status{tag}", Cluster, Status)
        self.directive = z3.Bool(f"i6_directive{tag}")
        self.target = z3.Const(f"i6_target{tag}", Cluster)
        self.depoch = z3.Int(f"i6_depoch{tag}")
        self.source = z3.Const(f"i6_source{tag}", Cluster)  # the cluster ACTIVE when the directive was written
        self.active = z3.Array(f"i6_active{tag}", Broker, Cluster)
        self.epoch = z3.Array(f"i6_epoch{tag}", Broker, z3.IntSort())
        self.closed = z3.Bool(f"i6_closed{tag}")  # the operator closed the old cluster's client
        self.done = z3.Bool(f"i6_done{tag}")  # the orchestrator is DONE
        self.rolling = z3.Bool(f"i6_rolling{tag}")  # the operator started ROLLBACK
        self.listed = z3.Array(f"i6_listed{tag}", Ledger, z3.BoolSort())  # a Broker-ZK record names the ledger
        self.stamp = z3.Array(f"i6_stamp{tag}", Ledger, Stamp)  # its attribution

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def steps(v: Vars, w: Vars, fixes, b, c) -> dict:
    """Each step from ``v`` to ``w`` for the broker ``b`` (a ledger's creator, in ``records``: records dropped, and
    new ones stamped with its active cluster, which it can create on); ``c`` is the ACTIVE cluster a restart or the
    switch finds."""
    d, x, y = z3.Const("d", Cluster), z3.Const("x", Broker), z3.Const("y", Ledger)
    unrouted = z3.ForAll([y], z3.Implies(v.listed[y], route(v, fixes, y, b) != OLD))  # as broker b resolves them

    def restamp(before, after):  # some records stamped ``before`` re-stamped ``after``
        return z3.And(z3.ForAll([y], z3.Or(w.stamp[y] == v.stamp[y], z3.And(v.stamp[y] == before,
                                                                             w.stamp[y] == after))),
                      *v.keep(w, "stamp"))
    no_active = z3.ForAll([d], v.status[d] != ACTIVE)
    recovered = z3.If(v.directive, v.target, c) if RECOVER in fixes else c
    return {
        "register": z3.And(v.status[NEW] == ABSENT, w.status == z3.Store(v.status, NEW, STANDBY),
                           *v.keep(w, "status")),
        "switch": z3.And(z3.Not(v.directive), v.status[c] == ACTIVE, w.directive, w.target == NEW, w.depoch == 1,
                         w.source == c, *v.keep(w, "directive", "target", "depoch", "source")),
        "watch": z3.And(v.directive, w.active == z3.Store(v.active, b, v.target),
                        w.epoch == z3.Store(v.epoch, b, v.depoch), *v.keep(w, "active", "epoch")),
        "close_client": z3.And(v.done, z3.Not(v.closed), w.closed, *v.keep(w, "closed"),
                               *([z3.ForAll([x], v.epoch[x] == v.depoch)] if SWITCHED in fixes else []),
                               *([unrouted] if EXPIRES in fixes else [])),
        "restart": z3.And(z3.If(no_active, z3.And(c == OLD, w.status == z3.Store(v.status, OLD, ACTIVE)),
                                z3.And(v.status[c] == ACTIVE, w.status == v.status)),
                          w.active == z3.Store(v.active, b, recovered),
                          w.epoch == z3.Store(v.epoch, b, z3.If(v.directive, v.depoch, 0)),
                          *v.keep(w, "status", "active", "epoch")),
        "cleanup_status": z3.And(v.directive, z3.ForAll([d], z3.Or(d == OLD, d == NEW, w.status[d] == v.status[d])),
                                 z3.Or(w.done == v.done, z3.And(z3.Not(v.rolling), w.done)),
                                 *v.keep(w, "status", "done")),
        "start_rollback": z3.And(v.directive, z3.Not(v.done), w.rolling, *v.keep(w, "rolling")),
        "records": z3.And(z3.ForAll([y], z3.Implies(w.listed[y], z3.If(v.listed[y], w.stamp[y] == v.stamp[y], z3.And(
                              z3.Not(z3.And(v.closed, v.active[b] == OLD)),
                              w.stamp[y] == z3.If(v.active[b] == NEW, STAMP_NEW, STAMP_OLD))))),
                          *v.keep(w, "listed", "stamp")),
        "promote": restamp(STAMP_OLD, STAMP_NEW),
        "rollback": z3.And(v.rolling, restamp(STAMP_NEW, STAMP_OLD)),
    }


def route(v: Vars, fixes, lid, b):
    """The cluster broker ``b`` reads ledger ``lid``'s record from: its stamp, else the legacy fallback."""
    return z3.If(v.stamp[lid] == STAMP_NEW, NEW, z3.If(v.stamp[lid] == STAMP_OLD, OLD, fallback(v, fixes, b)))


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


def old_records_unrouted(v: Vars, fixes) -> z3.BoolRef:
    """Once the old cluster's client is closed, no record routes a read to the old cluster, whichever broker reads
    it (what I2 needs of the reads after the close: the old cluster may still be up, with the data)."""
    b, y = z3.Const("b", Broker), z3.Const("y", Ledger)
    return z3.Implies(v.closed, z3.And(v.done, z3.Not(v.rolling), z3.ForAll(
        [b, y], z3.Implies(v.listed[y], route(v, fixes, y, b) != OLD))))


def switch_facts(v: Vars) -> z3.BoolRef:
    """Before the switch ``old`` is the one ACTIVE cluster and every broker's, at epoch 0; after it, the directive
    is to ``new`` at epoch 1, from ``old``, and a broker's epoch is 0 or the directive's; only ``old`` or ``new`` is
    ever ACTIVE or a broker's; DONE and ROLLBACK each come after the switch and exclude the other; the close comes
    after DONE."""
    b, d = z3.Const("b", Broker), z3.Const("d", Cluster)
    return z3.And(z3.Distinct(OLD, NEW), z3.Implies(v.done, z3.And(v.directive, z3.Not(v.rolling))),
                  z3.Implies(v.rolling, v.directive), z3.Implies(v.closed, v.done),
                  z3.Implies(v.directive, z3.And(v.target == NEW, v.depoch == 1, v.source == OLD)),
                  z3.Implies(z3.Not(v.directive), z3.ForAll([d], (v.status[d] == ACTIVE) == (d == OLD))),
                  z3.ForAll([d], z3.Implies(v.status[d] == ACTIVE, z3.Or(d == OLD, d == NEW))),
                  z3.ForAll([b], z3.And(z3.Or(v.epoch[b] == 0, z3.And(v.directive, v.epoch[b] == v.depoch)),
                                        z3.Or(v.active[b] == OLD, v.active[b] == NEW),
                                        z3.Implies(v.epoch[b] == 0, v.active[b] == OLD),
                                        z3.Implies(z3.Not(v.directive), v.active[b] == OLD))))


def init(v: Vars) -> z3.BoolRef:
    b, d, y = z3.Const("b", Broker), z3.Const("d", Cluster), z3.Const("y", Ledger)
    return z3.And(z3.Distinct(OLD, NEW), v.status[OLD] == ACTIVE,
                  z3.ForAll([d], z3.Implies(d != OLD, v.status[d] == ABSENT)),
                  z3.Not(v.directive), z3.Not(v.closed), z3.Not(v.done), z3.Not(v.rolling),
                  z3.ForAll([b], z3.And(v.active[b] == OLD, v.epoch[b] == 0)),
                  z3.ForAll([y], z3.Implies(v.listed[y], z3.Or(v.stamp[y] == STAMP_OLD, v.stamp[y] == UNSTAMPED))))


CLAIMS = {"I6": i6, "legacy-reads-from-old": legacy_from_old, "old-client-unused": old_client_unused,
          "old-records-unrouted": old_records_unrouted}


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
    ledgers, ln = universe(m, Ledger, "l")
    records = ", ".join(f"{ln[str(y)]} stamped {e(v.stamp[y])}" for y in ledgers if z3.is_true(e(v.listed[y])))
    phase = ", ".join(f for f, x in (("DONE", v.done), ("rolling back", v.rolling)) if z3.is_true(e(x)))
    took = "" if step is None else f" (taken by {bn.get(str(e(step)), 'a broker')})"
    return (f"{{registry {statuses}; {directive}{'; ' + phase if phase else ''}; {held}"
            f"{'; records ' + records if records else ''}}}{took}")


def _projection(s) -> tuple:
    """The model state's values of the encoding's variables: the two clusters' statuses, the directive's (target,
    epoch, source) or None, each broker's (cluster, epoch), whether the old cluster's client is closed, whether the
    orchestrator is DONE and whether ROLLBACK started, and each Broker-ZK record's ((kind, ledger), stamp)."""
    from pulsar_verify.models.pip477.routing import records
    d, p = s.directive, s.progress
    phase = p.phase if p is not None else None
    recorded = tuple(sorted({((kind, lid), attr) for kind, lid, attr in records(s)}, key=str))
    return (s.registry.get("old", "ABSENT"), s.registry.get("new", "ABSENT"), None if d is None else (d[0], d[2], d[3]),
            tuple((x.active, x.epoch) for x in s.brokers), "old" in s.closed, phase == "done",
            phase in ("rollback", "rolled-back"), recorded)


CLUSTER = {"old": OLD, "new": NEW}


class Named:
    """Z3 constants for the brokers and the records of a model state (or of a change: both sides'), each record by
    its (kind, ledger): a ledger id two clusters handed out (an I11 violation) is two records."""

    def __init__(self, brokers: int, ledgers):
        self.bs = [z3.Const(f"B{i}", Broker) for i in range(brokers)]
        self.ls = {key: z3.Const("L{}_{}".format(*key), Ledger) for key in sorted(ledgers)}
        groups = (self.bs, list(self.ls.values()))
        self.facts = [z3.Distinct(OLD, NEW), *[z3.Distinct(*g) for g in groups if len(g) > 1]]

    def state(self, v: Vars, projection) -> z3.BoolRef:
        old, new, directive, brokers, closed, done, rolling, recorded = projection
        status = lambda name: ABSENT if name == "ABSENT" else STATUS[name]  # noqa: E731
        out = [v.status == z3.Store(z3.Store(z3.K(Cluster, ABSENT), OLD, status(old)), NEW, status(new)),
               v.directive == (directive is not None), v.closed == closed, v.done == done, v.rolling == rolling]
        if directive is not None:
            out += [v.target == CLUSTER[directive[0]], v.depoch == directive[1], v.source == CLUSTER[directive[2]]]
        for b, (active, epoch) in zip(self.bs, brokers):
            out += [v.active[b] == CLUSTER[active], v.epoch[b] == epoch]
        listed, stamp = z3.K(Ledger, z3.BoolVal(False)), z3.K(Ledger, UNSTAMPED)
        for lid, attr in recorded:
            listed, stamp = z3.Store(listed, self.ls[lid], True), z3.Store(stamp, self.ls[lid], STAMP[attr])
        return z3.And(*out, v.listed == listed, v.stamp == stamp)


def simulation(model, pairs, steps_of=steps, fallback_of=fallback) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables is one of its steps (decided
    once per distinct change), taken by a named broker; and in each state, each broker's legacy
    fallback (``routing.resolve`` of a record without attribution) is the encoding's ``fallback``."""
    from pulsar_verify.models.pip477.routing import resolve
    pairs = list(pairs)  # read twice: the changes, then the states
    out, fell = [], set()
    for s, a, t, change in distinct_changes(pairs, _projection):
        named = Named(len(s.brokers), {lid for side in change for lid, _ in side[-1]})
        v, w = Vars(""), Vars("'")
        b, c = z3.Const("broker", Broker), z3.Const("found", Cluster)
        facts = [*named.facts, z3.Or(*[b == x for x in named.bs]), named.state(v, change[0]), named.state(w, change[1])]
        out += not_simulated(a, f"no step of the encoding takes {change[0]} to {change[1]}",
                             one_of(facts, steps_of(v, w, model.fixes, b, c).values()))
    for s in dict.fromkeys(s for s, _, _ in pairs):  # each state once, not once per transition out of it
        routes = tuple(resolve(model, s, None, i) for i in range(len(s.brokers)))
        key = (_projection(s), routes)
        if key in fell:
            continue
        fell.add(key)
        named, v = Named(len(s.brokers), {lid for lid, _ in key[0][-1]}), Vars("")
        differs = z3.Or(*[fallback_of(v, model.fixes, x) != CLUSTER[r] for x, r in zip(named.bs, routes)])
        if _decide(*named.facts, named.state(v, key[0]), differs)[0] != z3.unsat:
            out.append(f"in {key[0]} the model's legacy fallback is {routes}, not the encoding's")
    return out


def _claim(name: str, fixes) -> Callable[[], Verdict]:
    return lambda: inductive(name, frozenset(fixes))


def _each_variant(name: str, claim: str, statement: str, section: str, hows: tuple) -> list:
    """One obligation per (variant, how its close is guarded), the claim checked with that variant's fixes."""
    return [Obligation("pip-477", name, f"{statement} ({how})", section, _claim(claim, fixes_of("pip-477", variant)),
                       (variant,)) for variant, how in hows]


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
    *_each_variant("old-client-unused-inductive", "old-client-unused", "I6, and once the old cluster's client is "
                   "closed no broker has it as its active cluster, for any number of brokers and clusters",
                   CLOSE_SECTION, (("as-written", "closed once no handle is open"),
                                   (SWITCHED, "closed once every broker applied the directive"),
                                   ("all-fixes", "closed once every broker applied the directive, a restart taking the "
                                                 "directive's target"))),
    *_each_variant("old-records-unrouted-inductive", "old-records-unrouted", "Once the old cluster's client is closed "
                   "no record routes a read to the old cluster, whichever broker reads it, for any number of brokers, "
                   "clusters and records; I2 for the reads after the close", EXPIRE_SECTION,
                   (("as-written", "closed once no handle is open"),
                    (EXPIRES, "closed once no record routes to it as broker 0 resolves them"),
                    ("all-fixes", "closed once no record routes to it, a record without attribution read from the "
                                  "source cluster"))),
]
