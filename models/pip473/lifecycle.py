"""Segment lifecycle, other traffic and faults around the transaction protocol.

- Sealing (PIP-473 "Scalable topics": segments "get sealed when split or
  merged, after which the segment's managed ledger no longer accepts writes"),
  at any point of a transaction.
- Non-transactional sends, which move LAC.
- A subscription (or reader) created later, reading from the earliest
  retained entry; retention (run by the segment's broker, so not while it is
  down) trimming the oldest entry once every subscription has read past it.
- Broker crash and restart: in-memory state lost, store and logs kept; on
  restart the buffer "opens its index watch and header cache; populate from
  the current snapshot" and the pending-ack store replays its index (PIP-473
  "Recovery"). In-flight sends on the broker fail; the client then may only
  abort (as Pulsar clients do after a failed transactional send).
"""
from __future__ import annotations

from pulsar_verify.model import act
from pulsar_verify.values import FrozenMap, put, replace

from . import store
from .buffer import load_index
from .state import WRITE, Buffer, PendingAck, State


def actions(m, s: State):
    cfg = m.config
    nsubs = cfg.subs + cfg.late_subs
    for seg in range(cfg.segments):
        if s.up[seg] and not s.sealed[seg] and s.nontxn < cfg.nontxn:
            yield act("nontxn_send", seg=seg)
        if not s.sealed[seg] and s.seals < cfg.seals:
            yield act("seal", seg=seg)
        if s.up[seg] and s.crashes < cfg.crashes:
            yield act("crash", seg=seg)
        if not s.up[seg]:
            yield act("restart", seg=seg)
        pos = s.first[seg]
        subs = s.subs[seg * nsubs:(seg + 1) * nsubs]
        up = s.up[seg] or m.config.variant == "mutant:trim-while-down"
        if cfg.trim and up and pos < len(s.logs[seg]) and all(x.read > pos for x in subs if x.exists):
            yield act("trim", seg=seg)
    for sub in range(cfg.subs, nsubs):
        if not s.subs[sub].exists:
            yield act("subscribe", sub=sub)


def nontxn_send(m, s, a):
    seg = a.param("seg")
    return replace(s, logs=put(s.logs, seg, s.logs[seg] + (0,)), nontxn=s.nontxn + 1)


def seal(m, s, a):
    return replace(s, sealed=put(s.sealed, a.param("seg"), True), seals=s.seals + 1)


def crash(m, s, a):
    seg = a.param("seg")
    nsubs = m.config.subs + m.config.late_subs
    clients = list(s.clients)
    for p in s.publishes:
        if p.seg == seg:
            clients[p.txn - 1] = replace(clients[p.txn - 1], failed=True)
    pending = s.pending[:seg * nsubs] + (PendingAck(),) * nsubs + s.pending[(seg + 1) * nsubs:]
    return replace(s, up=put(s.up, seg, False), buffers=put(s.buffers, seg, Buffer()), pending=pending,
                        publishes=tuple(p for p in s.publishes if p.seg != seg), clients=tuple(clients),
                        crashes=s.crashes + 1)


def restart(m, s, a):
    """Topic load: the buffer and pending-ack stores recover from the store; the
    dispatchers restart from the cursors."""
    seg = a.param("seg")
    nsubs = m.config.subs + m.config.late_subs
    s = replace(s, up=put(s.up, seg, True))
    b = load_index(s, seg, Buffer())
    s = replace(s, buffers=put(s.buffers, seg, replace(b, pend_hdr=frozenset(b.hdr.keys()))))
    pending, subs = list(s.pending), list(s.subs)
    for sub in range(nsubs):
        acks = store.acks_by_segment_subscription(s, seg, sub)
        hdr = FrozenMap((t, s.headers[t].state) for t in acks if t in s.headers)
        # The re-registered header watches deliver the current values: the first event
        # (a pending notification here) materializes what was decided meanwhile.
        pending[seg * nsubs + sub] = PendingAck(hdr=hdr, acks=FrozenMap(acks), pend=frozenset(hdr.keys()))
        cursor = subs[seg * nsubs + sub]
        subs[seg * nsubs + sub] = replace(cursor, read=s.first[seg])
    return replace(s, pending=tuple(pending), subs=tuple(subs))


def subscribe(m, s, a):
    sub = a.param("sub")
    nsubs = m.config.subs + m.config.late_subs
    subs = list(s.subs)
    for seg in range(m.config.segments):
        subs[seg * nsubs + sub] = replace(subs[seg * nsubs + sub], exists=True, read=s.first[seg])
    return replace(s, subs=tuple(subs))


def trim(m, s, a):
    seg = a.param("seg")
    pos = s.first[seg]
    s = replace(s, first=put(s.first, seg, pos + 1))
    if "keep-decisions-with-data" in m.fixes:  # the write records go with the data they describe
        s = store.delete_ops(s, [k for k, op in s.ops if op.kind == WRITE and op.seg == seg and op.pos == pos])
    return s


APPLY = {f.__name__: f for f in (nontxn_send, seal, crash, restart, subscribe, trim)}
