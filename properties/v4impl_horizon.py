"""v4-impl: what a topic's ``maxReadPosition`` lets readers and consumers see, for any length of log and any number
of txns, snapshots, crashes and reloads. Two claims over one encoding:
- ``last-id-within-horizon`` (the fixes ``pr-21466`` and ``pr-22610``: apache/pulsar PR #21466 and #22610): a
  reader is never told a message is available when the only newer entries are those of a txn not yet ended on the
  topic;
- the part of ``plain-message-delivered`` that ``first-snapshot-catches-up`` is about: a ready buffer with no
  ongoing txn, not taking its first snapshot, has every plain message at or before ``maxReadPosition``.

The encoding keeps one topic: its log (positions are integers; each entry's kind and txn, 0 for a plain message),
which txns have a marker in it, whether the topic is loaded and its buffer ready, the buffer's phase (Ready,
NoSnapshot, FirstSnapshotting), its ongoing txns with the position of each one's first entry (-1: not ongoing) and
its aborted set, the stored ``maxReadPosition``, and the snapshot (its position and aborted set). Its steps, from
``models/v4impl`` (``recovery``, ``first_snapshot``, ``low_water``, ``reader``) and ``models/v4txn/buffer.py``:
the topic load, the buffer's recovery (from the snapshot and the log after it, or to NoSnapshot), a plain publish,
a transactional append, a marker (END_TXN_ON_PARTITION and the low water mark's abort), a crash, a snapshot, the
first snapshot's start and completion, and the broker's answer to ``getLastMessageId``. Where the buffer moves
``maxReadPosition`` (before its first ongoing txn, else the last entry) the step admits any position at or before
every ongoing txn's first, and the last entry when none is ongoing; where it takes a snapshot, any position at or
before every ongoing txn's first; the recovery's rebuilt buffer is admitted when every txn with an entry after the
snapshot, in neither the snapshot's aborted set nor marked, is ongoing from at most its first such entry, every
ongoing txn's first position is after the snapshot, and its aborted txns are the snapshot's or marked. Each admits
the model's step and more, so a proof over the steps holds for the model; ``simulation`` checks on every reachable
state, for each topic, that each model step is one of them.

The first claim, the ``get_last_id`` step's: every entry at or before the answer that is of a txn is of a marked
one. Strengthened to be inductive: ``maxReadPosition`` is at most the last entry; in a ready buffer every entry of an
unmarked txn is of an ongoing one, at or after its first position, and ``maxReadPosition`` is before every ongoing
txn's first position; the aborted sets hold marked txns only; without a snapshot the log holds no txn's entry, and
with one, every txn entry at or before its position is of a marked txn; the buffer's phase is Ready whenever there
is a snapshot. Inductive with either fix. As written, the answer is the last entry whatever the buffer holds, and the
counterexample to induction is an answer at an open txn's entry while the buffer recovers (the finding
``reader-told-available-for-open-txn``). The second claim is inductive with the bounds and phases above and the
fix; as written, the first snapshot's completion leaves the plain messages published meanwhile beyond
``maxReadPosition`` (the second path of ``late-send-after-markerless-abort-blocks-topic``).
"""
from __future__ import annotations

import z3

from pulsar_verify.models.v4impl.first_snapshot import FIRST_SNAPSHOTTING, FIX_CATCH_UP, NO_SNAPSHOT, READY
from pulsar_verify.models.v4impl.model import BASELINE, V4Impl
from pulsar_verify.models.v4impl.reader import last_id
from pulsar_verify.models.v4txn.state import ABORT_MARKER, COMMIT_MARKER, DATA

from .obligations import (Obligation, Verdict, all_of, fixes_of, inductive, not_simulated, one_of, simulated,
                          with_fix)

Kind, (K_DATA, K_COMMIT, K_ABORT) = z3.EnumSort("HorizonKind", ("data", "commit", "abort"))
Phase, (P_READY, P_NO_SNAPSHOT, P_FIRST) = z3.EnumSort("HorizonPhase", ("Ready", "NoSnapshot", "FirstSnapshotting"))
KIND = {DATA: K_DATA, COMMIT_MARKER: K_COMMIT, ABORT_MARKER: K_ABORT}
PHASE = {READY: P_READY, NO_SNAPSHOT: P_NO_SNAPSHOT, FIRST_SNAPSHOTTING: P_FIRST}
FIX_LAST_ID = "pr-21466"  # the answer is maxReadPosition (reader.last_id)
FIX_DISPATCHABLE = "pr-22610"  # the last dispatchable position at or before it
FIXED = tuple(v for v in V4Impl.variant_names()
              if v in with_fix("v4-impl", FIX_LAST_ID) + with_fix("v4-impl", FIX_DISPATCHABLE))  # the model's order
SECTION = ("apache/pulsar PR #21466: getLastMessageIds 'should return the max read position instead of "
           "lastConfirmedEntry'; PR #22610; TopicTransactionBuffer's maxReadPosition")
CATCH_UP = with_fix("v4-impl", FIX_CATCH_UP)
SECTION_CATCH_UP = ("TopicTransactionBuffer: updateMaxReadPositionAfterRecovery; the first snapshot's "
                    "changeToReadyStateFromNoSnapshot (this model's finding "
                    "late-send-after-markerless-abort-blocks-topic, its second path)")
INT = z3.IntSort()


class Vars:
    NAMES = ("n", "kind", "txn", "marked", "loaded", "ready", "phase", "opos", "aborted", "max_read", "snap",
             "snap_pos", "snap_aborted")

    def __init__(self, tag: str):
        self.n = z3.Int(f"hz_n{tag}")  # the log's length
        self.kind = z3.Array(f"hz_kind{tag}", INT, Kind)  # position -> its entry's kind
        self.txn = z3.Array(f"hz_txn{tag}", INT, INT)  # position -> its entry's txn (0: a plain message)
        self.marked = z3.Array(f"hz_marked{tag}", INT, z3.BoolSort())  # txn -> a marker of it is in the log
        self.loaded = z3.Bool(f"hz_loaded{tag}")
        self.ready = z3.Bool(f"hz_ready{tag}")
        self.phase = z3.Const(f"hz_phase{tag}", Phase)
        self.opos = z3.Array(f"hz_opos{tag}", INT, INT)  # txn -> the buffer's first position of it, ongoing; -1
        self.aborted = z3.Array(f"hz_aborted{tag}", INT, z3.BoolSort())
        self.max_read = z3.Int(f"hz_max_read{tag}")  # the stored maxReadPosition
        self.snap = z3.Bool(f"hz_snap{tag}")  # a snapshot exists
        self.snap_pos = z3.Int(f"hz_snap_pos{tag}")
        self.snap_aborted = z3.Array(f"hz_snap_aborted{tag}", INT, z3.BoolSort())

    def keep(self, w, *changed) -> list:
        return [getattr(w, k) == getattr(self, k) for k in self.NAMES if k not in changed]


def _x() -> z3.ArithRef:
    return z3.Int("x")


def below_ongoing(v: Vars, position) -> z3.BoolRef:
    """``position`` is at most the last entry and before every ongoing txn's first position: where the model's
    ``max_read_position`` is, or below it."""
    x = _x()
    return z3.And(position <= v.n - 1, z3.ForAll([x], z3.Implies(v.opos[x] >= 0, position < v.opos[x])))


def moved(w: Vars) -> z3.BoolRef:
    """The buffer's ``updateMaxReadPosition`` has put ``maxReadPosition`` at or before its first ongoing txn's
    first position, and at the last entry when none is ongoing (the model's ``moved``)."""
    return z3.And(below_ongoing(w, w.max_read), z3.Implies(no_ongoing(w), w.max_read == w.n - 1))


def no_ongoing(v: Vars) -> z3.BoolRef:
    x = _x()
    return z3.ForAll([x], v.opos[x] < 0)


def steps(v: Vars, w: Vars, fixes, t, answer) -> dict:
    """Each step from ``v`` to ``w``; ``t`` the txn of an append or a marker, ``answer`` the broker's answer to
    ``getLastMessageId`` (free constants in a proof). The labels are the model's."""
    x = _x()

    def appended(kind, txn):
        return [w.n == v.n + 1, w.kind == z3.Store(v.kind, v.n, kind), w.txn == z3.Store(v.txn, v.n, txn)]

    def marker(kind):  # a marker of ``t``: the txn no longer ongoing, aborted if it is an abort
        return z3.And(t != 0, *appended(kind, t), w.marked == z3.Store(v.marked, t, True),
                      w.opos == z3.Store(v.opos, t, -1),
                      w.aborted == (z3.Store(v.aborted, t, True) if z3.eq(kind, K_ABORT) else v.aborted),
                      moved(w), *v.keep(w, "n", "kind", "txn", "marked", "opos", "aborted",
                                                            "max_read"))
    moves = z3.And(v.ready, no_ongoing(v), v.phase != P_FIRST)
    rebuilt = z3.ForAll([x], z3.Implies(
        z3.And(x > v.snap_pos, x < v.n, v.kind[x] == K_DATA, v.txn[x] != 0, z3.Not(v.snap_aborted[v.txn[x]]),
               z3.Not(v.marked[v.txn[x]])), z3.And(w.opos[v.txn[x]] >= 0, w.opos[v.txn[x]] <= x)))
    aborted_from = z3.ForAll([x], z3.Implies(w.aborted[x], z3.Or(v.snap_aborted[x], v.marked[x])))
    after_snapshot = z3.ForAll([x], z3.Implies(w.opos[x] >= 0, z3.And(w.opos[x] > v.snap_pos, w.opos[x] < v.n)))
    readable = z3.If(v.phase == P_FIRST, -1, v.max_read)
    if FIX_DISPATCHABLE in fixes:
        answered = z3.And(v.ready, answer >= -1, answer <= readable)
    elif FIX_LAST_ID in fixes:
        answered = z3.And(v.ready, answer == readable)
    else:
        answered = answer == v.n - 1
    return {
        "topic_load": z3.And(z3.Not(v.loaded), w.loaded, w.max_read == v.n - 1, *v.keep(w, "loaded", "max_read")),
        "tb_recover": z3.And(v.loaded, z3.Not(v.ready), w.ready, z3.If(
            v.snap,
            z3.And(rebuilt, aborted_from, after_snapshot, moved(w), w.phase == v.phase,
                   *v.keep(w, "ready", "opos", "aborted", "max_read", "phase")),
            z3.And(w.phase == P_NO_SNAPSHOT, w.opos == z3.K(INT, z3.IntVal(-1)), w.aborted == z3.K(INT, False),
                   w.max_read == v.n - 1, *v.keep(w, "ready", "phase", "opos", "aborted", "max_read")))),
        "send_nontxn": z3.And(v.loaded, *appended(K_DATA, 0), w.max_read == z3.If(moves, v.n, v.max_read),
                              *v.keep(w, "n", "kind", "txn", "max_read")),
        "append": z3.And(v.ready, v.phase == P_READY, t != 0, *appended(K_DATA, t), z3.If(
            z3.Or(v.aborted[t], v.opos[t] >= 0), z3.And(*v.keep(w, "n", "kind", "txn")),
            z3.And(w.opos == z3.Store(v.opos, t, v.n), moved(w),
                   *v.keep(w, "n", "kind", "txn", "opos", "max_read")))),
        "end_on_partition": z3.And(v.ready, z3.Or(marker(K_COMMIT), marker(K_ABORT))),
        "lwm_abort": z3.And(v.ready, v.opos[t] >= 0, marker(K_ABORT)),
        "crash": z3.And(v.loaded, z3.Not(w.loaded), z3.Not(w.ready), w.phase == P_READY,
                        w.opos == z3.K(INT, z3.IntVal(-1)), w.aborted == z3.K(INT, False), w.max_read == -1,
                        *v.keep(w, "loaded", "ready", "phase", "opos", "aborted", "max_read")),
        "take_snapshot": z3.And(v.ready, v.phase == P_READY, w.snap, below_ongoing(v, w.snap_pos),
                                w.snap_aborted == v.aborted, *v.keep(w, "snap", "snap_pos", "snap_aborted")),
        "first_snapshot_start": z3.And(v.phase == P_NO_SNAPSHOT, w.phase == P_FIRST, *v.keep(w, "phase")),
        "first_snapshot_written": z3.And(
            v.phase == P_FIRST, w.phase == P_READY, w.snap, w.snap_pos == v.max_read, w.snap_aborted == v.aborted,
            w.max_read == (v.n - 1 if FIX_CATCH_UP in fixes else v.max_read),
            *v.keep(w, "phase", "snap", "snap_pos", "snap_aborted", "max_read")),
        "get_last_id": z3.And(v.loaded, answered, *v.keep(w)),
    }


def within_horizon(v: Vars, answer) -> z3.BoolRef:
    """The claim: every entry at or before ``answer`` that is of a txn is of a marked one (the model's
    ``readable_horizon`` is at least the answer)."""
    x = _x()
    return z3.ForAll([x], z3.Implies(z3.And(x >= 0, x <= answer, x < v.n, v.kind[x] == K_DATA, v.txn[x] != 0),
                                     v.marked[v.txn[x]]))


def strengthening(v: Vars) -> dict:
    """What makes the claim inductive, by name (the module's docstring)."""
    x = _x()
    txn_entry = z3.And(x >= 0, x < v.n, v.kind[x] == K_DATA, v.txn[x] != 0)
    return {
        "bounds": z3.And(v.n >= 0, v.max_read <= v.n - 1, z3.Implies(z3.Not(v.loaded), z3.Not(v.ready)),
                         z3.ForAll([x], z3.Implies(v.opos[x] >= 0, v.opos[x] < v.n))),
        "open txns ongoing": z3.Implies(v.ready, z3.ForAll([x], z3.Implies(
            z3.And(txn_entry, z3.Not(v.marked[v.txn[x]])), z3.And(v.opos[v.txn[x]] >= 0, v.opos[v.txn[x]] <= x)))),
        "maxReadPosition before them": z3.Implies(v.ready, below_ongoing(v, v.max_read)),
        "aborted are marked": z3.ForAll([x], z3.Implies(z3.Or(v.aborted[x], v.snap_aborted[x]), v.marked[x])),
        "no txn before a snapshot": z3.Implies(z3.Not(v.snap), z3.ForAll([x], z3.Not(txn_entry))),
        "the snapshot's position": z3.Implies(v.snap, z3.And(
            z3.ForAll([x], z3.Implies(z3.And(txn_entry, x <= v.snap_pos), v.marked[v.txn[x]])),
            v.snap_pos <= v.n - 1)),
        "phases": z3.And(z3.Implies(v.snap, v.phase == P_READY),
                         z3.Implies(z3.And(v.ready, v.phase == P_READY), v.snap),
                         z3.Implies(v.phase != P_READY, no_ongoing(v))),
    }


def invariant(v: Vars) -> z3.BoolRef:
    """Every part of the strengthening (the claim follows from it at each ``get_last_id``)."""
    return z3.And(*strengthening(v).values())


def plain_readable(v: Vars) -> z3.BoolRef:
    """The claim of ``first-snapshot-catches-up``: a ready buffer with nothing ongoing, not taking its first
    snapshot, lets every plain message be read (each is at or before ``maxReadPosition``)."""
    x = _x()
    return z3.Implies(z3.And(v.ready, v.phase != P_FIRST, no_ongoing(v)), z3.ForAll([x], z3.Implies(
        z3.And(x >= 0, x < v.n, v.kind[x] == K_DATA, v.txn[x] == 0), x <= v.max_read)))


def idle_proof(variant: str, invariant_of=plain_readable) -> Verdict:
    """``plain_readable`` holds initially and is kept by every step, for one topic."""
    v, w = Vars(""), Vars("'")
    parts = lambda u: z3.And(invariant_of(u), strengthening(u)["bounds"], strengthening(u)["phases"])  # noqa: E731
    return inductive(_init(v), parts(v), parts(w), steps(v, w, fixes_of("v4-impl", variant), z3.Int("txn"),
                                                         z3.Int("answer")),
                     before=lambda m: describe(m, v), after=lambda m: describe(m, w))


def _init(v: Vars) -> z3.BoolRef:
    return z3.And(v.n == 0, z3.Not(v.loaded), z3.Not(v.ready), v.phase == P_READY, v.opos == z3.K(INT, z3.IntVal(-1)),
                  v.aborted == z3.K(INT, False), v.marked == z3.K(INT, False), v.max_read == -1, z3.Not(v.snap),
                  v.snap_aborted == z3.K(INT, False))


def proof(variant: str, invariant_of=invariant, steps_of=steps) -> Verdict:
    """The claim of every ``get_last_id`` step, from the invariant, which holds initially and is kept by every
    step, for one topic (so for any number of them)."""
    v, w = Vars(""), Vars("'")
    t, answer = z3.Int("txn"), z3.Int("answer")
    return inductive(_init(v), invariant_of(v), invariant_of(w),
                     steps_of(v, w, fixes_of("v4-impl", variant), t, answer), before=lambda m: describe(m, v),
                     after=lambda m: describe(m, w),
                     also=lambda label: within_horizon(v, answer) if label == "get_last_id" else z3.BoolVal(True))


def describe(m: z3.ModelRef, v: Vars) -> str:
    """The log (each entry's kind and txn; a txn is named with ``*`` once marked), the buffer, the snapshot."""
    e = lambda x: m.eval(x, model_completion=True)  # noqa: E731
    n = e(v.n).as_long()

    def entry(p):
        kind, txn = str(e(v.kind[p])), e(v.txn[p]).as_long()
        if kind != "data":
            return f"{kind} {txn}"
        return "plain" if txn == 0 else f"txn {txn}{'*' if z3.is_true(e(v.marked[txn])) else ''}"
    log = ", ".join(f"{p}: {entry(p)}" for p in range(min(n, 8))) + (", ..." if n > 8 else "")
    txns = sorted({e(v.txn[p]).as_long() for p in range(min(n, 8))} - {0})
    ongoing = {x: e(v.opos[x]).as_long() for x in txns if e(v.opos[x]).as_long() >= 0}
    buffer = ("not loaded" if not z3.is_true(e(v.loaded)) else
              f"{f'ready ({e(v.phase)})' if z3.is_true(e(v.ready)) else 'recovering'}, ongoing {ongoing}, "
              f"maxReadPosition {e(v.max_read)}")
    snap = f"snapshot at {e(v.snap_pos)}" if z3.is_true(e(v.snap)) else "no snapshot"
    return f"{{log of {n} [{log}]; buffer {buffer}; {snap}}}"


def _view(s, topic: int) -> tuple:
    """The model state's values of the encoding's variables for ``topic``."""
    log, b = s.logs[topic], s.buffers[topic]
    snap = s.snapshots[topic]
    return (log, frozenset(t for kind, t in log if kind != DATA), s.loaded[topic], b.ready, s.tb_phase[topic],
            tuple(sorted(b.ongoing.items())), b.aborted, s.max_read[topic], snap)


def _shown(view) -> str:
    """A topic's view as a reader reads it: the log, the buffer, the snapshot."""
    log, _, loaded, ready, phase, ongoing, aborted, max_read, snap = view
    entries = ", ".join("plain" if kind == DATA and not t else f"txn {t}" if kind == DATA else f"{kind} {t}"
                        for kind, t in log)
    buffer = "not loaded" if not loaded else (f"ready ({PHASE[phase]})" if ready else "recovering")
    return (f"{{log [{entries}]; buffer {buffer}, ongoing {dict(ongoing)}, aborted {sorted(aborted)}, "
            f"maxReadPosition {max_read}; {f'snapshot at {snap[0]}' if snap else 'no snapshot'}}}")


def _array(default, items):
    arr = z3.K(INT, default)
    for k, x in items:
        arr = z3.Store(arr, k, x)
    return arr


def _concrete(v: Vars, view) -> list:
    log, marked, loaded, ready, phase, ongoing, aborted, max_read, snap = view
    flags = lambda xs: _array(z3.BoolVal(False), ((x, True) for x in xs))  # noqa: E731
    return [v.n == len(log), v.kind == _array(K_DATA, ((p, KIND[k]) for p, (k, _) in enumerate(log))),
            v.txn == _array(z3.IntVal(0), ((p, t) for p, (_, t) in enumerate(log))), v.marked == flags(marked),
            v.loaded == loaded, v.ready == ready, v.phase == PHASE[phase],
            v.opos == _array(z3.IntVal(-1), ongoing), v.aborted == flags(aborted), v.max_read == max_read,
            v.snap == (snap is not None), v.snap_pos == (snap[0] if snap else -1),
            v.snap_aborted == flags(snap[1] if snap else ())]


def simulation(model, pairs, steps_of=steps) -> list[str]:
    """Each transition of the Python model that changes the encoding's variables of some topic is one of its
    steps, for that topic; each ``get_last_id`` (of topic 0: it changes none of them) is the encoding's, with the
    answer the model gives."""
    v, w = Vars(""), Vars("'")
    t, answer = z3.Int("txn"), z3.Int("answer")
    candidates = steps_of(v, w, model.fixes, t, answer)
    pairs = [((s, k), a, (u, k)) for s, a, u in pairs for k in range(len(s.logs))]
    out = simulated((p for p in pairs if p[1].name != "get_last_id"), lambda sx: _view(*sx),
                    lambda sx, tx, before, after: [*_concrete(v, before), *_concrete(w, after)], candidates, (),
                    lambda sx, before, after: f"topic {sx[1]} from {_shown(before)} to {_shown(after)}")
    seen = set()
    for (s, topic), a, _ in pairs:
        view = _view(s, topic)
        if a.name != "get_last_id" or topic != 0 or view in seen:
            continue
        seen.add(view)
        given = one_of([*_concrete(v, view), *_concrete(w, view), answer == last_id(model, s)],
                       [candidates["get_last_id"]])
        out += not_simulated(a, f"the encoding's answer is not the model's in {_shown(view)}", given)
    return out


OBLIGATIONS = [
    Obligation("v4-impl", "plain-readable-inductive", "A ready buffer with no ongoing txn, not taking its first "
               "snapshot, has every plain message at or before maxReadPosition, for any length of log and any number "
               "of txns, snapshots and crashes: the first snapshot's completion leaves maxReadPosition where it was "
               "(the part of plain-message-delivered the fix is about)", SECTION_CATCH_UP,
               lambda: idle_proof(BASELINE), (BASELINE,)),
    Obligation("v4-impl", "plain-readable-inductive", "A ready buffer with no ongoing txn, not taking its first "
               "snapshot, has every plain message at or before maxReadPosition, for any length of log and any number "
               "of txns, snapshots and crashes, the first snapshot's completion catching maxReadPosition up (the part "
               "of plain-message-delivered the fix is about)", SECTION_CATCH_UP,
               lambda: all_of(idle_proof(x) for x in CATCH_UP), CATCH_UP),
    Obligation("v4-impl", "last-id-within-horizon-inductive", "A reader is never told a message is available when "
               "the only newer entries are an open txn's, for any length of log and any number of txns, snapshots "
               "and crashes: getLastMessageId answering the last confirmed entry", SECTION,
               lambda: proof(BASELINE), (BASELINE,), proves=("last-id-within-horizon",)),
    Obligation("v4-impl", "last-id-within-horizon-inductive", "A reader is never told a message is available when "
               "the only newer entries are an open txn's, for any length of log and any number of txns, snapshots "
               "and crashes: getLastMessageId answering maxReadPosition once the buffer is ready, or a dispatchable "
               "position at or before it", SECTION, lambda: all_of(proof(x) for x in FIXED), FIXED,
               proves=("last-id-within-horizon",)),
]
