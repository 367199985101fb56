"""The operator and the brokers' plugin: registration, the switch request (its inline precheck,
then the directive's write), directive watches, broker restarts, closing the old client, and the
old cluster going down (PIP-477 "Switch Phases", "Wiring on Broker Start", Phases 1-3 and 6.3,
Rollout "Scenario A")."""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import put, replace

from .routing import records, resolve
from .state import ACTIVE, NEW, OLD, STANDBY, Broker, Progress, State, with_broker


def spend(s: State, what: str) -> State:
    return replace(s, budget=s.budget.set(what, s.budget[what] - 1))


def left(s: State, what: str) -> bool:
    return s.budget.get(what, 0) > 0


def open_handles(s: State) -> set:
    """Clusters some open ledger handle is bound to."""
    o = s.own
    if o is None:
        return set()
    return {h[1] for h in (o.write, o.cursor, o.read) if h is not None}


def actions(m, s: State):
    if NEW not in s.registry:
        yield act("register")
    serving = any(x.request is not None for x in s.brokers)  # the operator's one switch request
    fence = "fence-old-idgen" in m.fixes
    for b, x in enumerate(s.brokers):
        if not x.up:
            continue
        if s.directive is None and s.registry.get(NEW) == STANDBY:
            if fence and not serving:
                yield act("fence_idgen", broker=b)
            if (x.request == "fenced") if fence else (not serving and idgen_advanced(m, s)):
                yield act("precheck", broker=b)
            if x.request == "checked":
                yield act("switch", broker=b)
        if s.directive is not None and x.epoch < s.directive[2]:
            yield act("watch", broker=b)
        if left(s, "restart"):
            yield act("restart", broker=b)
    if s.progress is not None and s.progress.phase == "done" and OLD not in s.closed and left(s, "close_client"):
        if close_allowed(m, s):
            yield act("close_client", cluster=OLD)
    if OLD in s.alive and left(s, "old_down"):
        yield act("old_down")


def idgen_advanced(m, s: State) -> bool:
    """Phase 2 (I11): "the new cluster's ``/ledgers/idgen-long`` is advanced beyond
    ``max(ledgerId)`` of the source cluster"."""
    if m.config.variant == "mutant:no-precheck":
        return True
    return s.idgen[NEW] > max(s.bk[OLD].keys(), default=0)


def close_allowed(m, s: State) -> bool:
    """Phase 6.3 / I5: "Old BK client closure must be preceded by confirmation of no active
    reads". Variant close-after-data-expires: also no ledger record still routes to the old
    cluster (its topic data has not aged out); close-after-brokers-switched: also every running
    broker has applied the directive (its watch fired, or it restarted since)."""
    if m.config.variant == "mutant:close-without-drain":
        return True
    if OLD in open_handles(s):
        return False
    if "close-after-brokers-switched" in m.fixes and any(x.up and x.epoch < s.directive[2] for x in s.brokers):
        return False
    if "close-after-data-expires" in m.fixes:
        return all(resolve(m, s, attr, 0) != OLD for _, _, attr in records(s))
    return True


def register(m, s: State, a):
    """Phase 1: ``bookie-clusters register --name new-cluster ... --status STANDBY`` (a znode create)."""
    return replace(s, registry=s.registry.set(NEW, STANDBY))


def fence_idgen(m, s: State, a):
    """Fix fence-old-idgen, the switch request's first step: the receiving broker fences the old
    cluster's ``/ledgers/idgen-long`` at its next id. From then on a ledger created on the old cluster
    takes its id from the new cluster's idgen, past the fence (``asyncCreateLedgerAdv`` with it), so
    the old cluster's ids are final. The fence is durable; a restart loses only the request."""
    return with_broker(replace(s, fenced=s.idgen[OLD] if s.fenced is None else s.fenced), a.param("broker"),
                       request="fenced")


def precheck(m, s: State, a):
    """Phase 2, Phase 3: "``POST /switch`` invokes precheck inline": the receiving broker reads the
    new cluster's idgen and ``max(ledgerId)`` of the source cluster and finds the idgen advanced (a
    failure returns HTTP 409 and changes nothing: not a step). The directive is written in a later
    step; ledgers the old cluster creates in between are not in what it read, and a restart in
    between loses the request (the operator's call fails). Fix fence-old-idgen: instead of only
    checking, the broker advances the new cluster's idgen to the fence (a write of that cluster's
    metadata store; mutant no-precheck skips it)."""
    if s.fenced is not None and m.config.variant != "mutant:no-precheck":
        s = replace(s, idgen=s.idgen.set(NEW, max(s.idgen[NEW], s.fenced)))
    return with_broker(s, a.param("broker"), request="checked")


def switch(m, s: State, a):
    """Phase 3: the receiving broker (origin) writes ``/admin/bookie-clusters/switch-target``
    ``{target, origin, epoch}`` and answers the operator; the cluster active before is kept as
    the switch's source."""
    b = a.param("broker")
    source = next(c for c, st in s.registry.items() if st == ACTIVE)
    return replace(with_broker(s, b, request=None), directive=(NEW, b, 1, source))


def watch(m, s: State, a):
    """Phase 3, each broker's ``BookieClusterConfigWatcher`` fires (delivery is per broker and
    may lag): 1. hot-swap ``activeClusterName``; 2. enable dual read; 4. the origin broker only
    starts the orchestrator (mutant every-broker-orchestrates: every broker does)."""
    b = a.param("broker")
    target, origin, epoch, _ = s.directive
    runs = b == origin or m.config.variant == "mutant:every-broker-orchestrates"
    x = replace(s.brokers[b], active=target, epoch=epoch, orchestrator=runs)
    s = replace(s, brokers=put(s.brokers, b, x))
    if runs and s.progress is None:
        s = replace(s, progress=Progress())
    return s


def restart(m, s: State, a):
    """A broker restarts: its memory is lost and ``initialize()`` runs (Wiring on Broker Start
    2): "tier-1 -> Broker-ZK status=ACTIVE cluster; tier-2 -> optional currentClusterName hint
    (unset); tier-3 -> derive from bookkeeperMetadataServiceUri [the old cluster] and
    auto-register as ACTIVE"; step 6, the origin broker restarts its orchestrator. The watcher
    registered at start fires on the next change, not for a directive already there. Variant
    recover-from-directive: an existing directive decides the active cluster."""
    b = a.param("broker")
    active = next((c for c, st in s.registry.items() if st == ACTIVE), None)
    if active is None:  # tier 3
        active = OLD
        s = replace(s, registry=s.registry.set(OLD, ACTIVE))
    d = s.directive
    if d is not None and "recover-from-directive" in m.fixes:
        active = d[0]
    runs = (d is not None and d[1] == b and (s.progress is None or s.progress.phase in ("build", "cleanup", "rollback"))
            and m.config.variant != "mutant:orchestrator-not-resumed")
    x = Broker(active=active, epoch=d[2] if d is not None else 0, orchestrator=runs)
    s = spend(replace(s, brokers=put(s.brokers, b, x)), "restart")
    if runs and s.progress is None:
        s = replace(s, progress=Progress())
    if s.owner == b:
        s = replace(s, owner=None, own=None)
    return s


def close_client(m, s: State, a):
    """Phase 6.3: ``bookie-clusters close-client --name oldCluster`` ("Safely close old BK client")."""
    return spend(replace(s, closed=s.closed | {a.param("cluster")}), "close_client")


def old_down(m, s: State, a):
    """Rollout P5, Scenario A: the old cluster goes down."""
    return spend(replace(s, alive=s.alive - {OLD}), "old_down")


APPLY = {"register": register, "fence_idgen": fence_idgen, "precheck": precheck, "switch": switch, "watch": watch,
         "restart": restart, "close_client": close_client, "old_down": old_down}
