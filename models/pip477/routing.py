"""Where a broker creates a ledger and where it reads one ("Write-Path Stamping", "Read-Path
Routing"), and what a failed read leaves behind for the properties."""
from __future__ import annotations

from pulsar_verify.values import replace

from .state import NEW, OLD, State


def create_cluster(m, s: State, b: int) -> str:
    """S1 ``activeBookKeeperSupplier``: the broker's ``activeClusterName``."""
    return s.brokers[b].active


def creatable(m, s: State, b: int) -> bool:
    """The cluster the broker creates ledgers on is up and its client open."""
    c = create_cluster(m, s, b)
    return c in s.alive and c not in s.closed


def resolve(m, s: State, attr: str | None, b: int) -> str:
    """``resolve(LedgerInfo li)``: the attribution stamp, else "legacy fallback" to the broker's
    active cluster. Variant fallback-to-source-cluster: the cluster that was active before the
    first switch, which the directive records."""
    if attr is not None:
        return attr
    if "fallback-to-source-cluster" in m.fixes and s.directive is not None:
        return s.directive[3]
    return s.brokers[b].active


def reachable(s: State, cluster: str) -> bool:
    return cluster in s.alive and cluster not in s.closed


def readable(s: State, cluster: str, ledger: int, entries: int = 1) -> bool:
    """The cluster is up, its client open, and it holds at least ``entries`` entries of the ledger."""
    if not reachable(s, cluster):
        return False
    data = s.bk.get(cluster)
    return data is not None and ledger in data and len(data[ledger]) >= entries


def homes(s: State, ledger: int) -> set:
    """The clusters a ledger belongs to: the one it was created on, and the new cluster once
    PROMOTE re-stamped it, until ROLLBACK re-stamps it old (a BUILD copy not yet promoted, or one
    rolled back and "scheduled for delayed deletion", is dormant, not a home)."""
    out = {OLD} if ledger in s.borrowed else {c for c, ids in s.allocated.items() if ledger in ids}
    p = s.progress
    if p is not None and ledger in p.promoted and ledger not in p.reverted:
        out.add(NEW)
    return out


def on_live_cluster(s: State, ledger: int, entries: int = 1) -> bool:
    """A home cluster of the ledger is up and holds the data: a read that fails then is a lost
    read ("every historical read succeeds while its cluster is alive")."""
    return any(c in s.alive and ledger in s.bk[c] and len(s.bk[c][ledger]) >= entries for c in homes(s, ledger))


def failed_read(s: State, what: str, ledger: int, entries: int = 1) -> State:
    if on_live_cluster(s, ledger, entries):
        return replace(s, failures=s.failures | {(what, ledger)})
    return s


def bk_put(s: State, cluster: str, ledger: int, entries: tuple) -> State:
    return replace(s, bk=s.bk.set(cluster, s.bk[cluster].set(ledger, entries)))


def bk_delete(s: State, cluster: str, ledger: int) -> State:
    return replace(s, bk=s.bk.set(cluster, s.bk[cluster].remove(ledger)))


def allocate(s: State, cluster: str) -> tuple[State, int]:
    """``asyncCreateLedger``: the next id of the cluster's ``/ledgers/idgen-long`` (an id that a
    BUILD copy already took is skipped, as BookKeeper retries a generated id that exists). Fix
    fence-old-idgen: once the old cluster's idgen is fenced, the new cluster's idgen gives the id, past
    the fence (the creating broker advances it there first if it is behind)."""
    source = NEW if cluster == OLD and s.fenced is not None else cluster
    lid = s.idgen[source] if source == cluster else max(s.idgen[source], s.fenced)
    while lid in s.bk[cluster]:
        lid += 1
    s = replace(s, idgen=s.idgen.set(source, lid + 1), allocated=s.allocated.set(source, s.allocated[source] | {lid}),
                borrowed=s.borrowed | ({lid} if source != cluster else set()))
    return bk_put(s, cluster, lid, ()), lid


def source_of(s: State) -> str:
    return s.directive[3] if s.directive is not None else OLD


def startup_cluster(s: State, b: int) -> str:
    """The cluster of the ``BookKeeper`` client a broker captured at start (mutant constructor-bk):
    the switch's source once there is a switch, else the broker's active cluster."""
    return s.directive[3] if s.directive is not None else s.brokers[b].active


def records(s: State) -> list:
    """Every ledger record in Broker-ZK: (kind, ledger id, attribution)."""
    return ([("data", lid, attr) for lid, attr in s.ml] + [("cursor", s.cursor.ledger, s.cursor.attr)]
            + [("schema", e.ledger, e.attr) for e in s.schema])
