"""A model in a package of its own: N processes sharing one lock.

It is the kernel's self-test (``tests/test_kernel.py``) and the example of how a team
adds the model of its own PIP: a ``Model`` subclass, its ``PROPERTIES`` declared in its
module, and an entry point in the ``pulsar_verify.models`` group (``pyproject.toml`` here).

Variants:
- ``as-written``: acquire is a non-atomic test-and-set (``check`` reads the lock
  free, a later ``take`` sets it), so two processes can both enter.
- ``atomic-acquire``: the fix; test and set in one step.
- ``all-fixes``: the same as ``atomic-acquire``, the only fix.
- ``no-release`` (mutant: all fixes plus one mistake): processes never release, so a
  waiting process is stuck forever (a deadlock and a liveness violation).

Hand-derived numbers for N=2 (used by tests/test_kernel.py):
- ``atomic-acquire``: a state is the pair of program counters (the lock is the
  process in ``critical``, if any); 3 x 3 pairs minus (critical, critical)
  = 8 states. Enabled actions per state: idle -> request (1); waiting ->
  acquire only when nobody is critical; critical -> release (1). Summing over
  the 8 states: ii 2, iw 2, ic 2, wi 2, ww 2, wc 1, ci 2, cw 1 = 14
  transitions. BFS levels: {ii}, {wi, iw}, {ci, ww, ic}, {cw, wc}: depth 3.
- ``as-written``: mutual exclusion breaks after request, request, check,
  check, take, take: 6 actions, and nothing shorter can (each process needs
  its own three steps).
"""
from __future__ import annotations

import attrs

from pulsar_verify.model import Model, Param, PropertySet, act, variants_of

IDLE, WAITING, READY, CRITICAL = "idle", "waiting", "ready", "critical"


@attrs.frozen
class LockState:
    pc: tuple  # program counter of each process
    lock: int | None  # the process holding the lock


class LockModel(Model):
    name = "toy-lock"
    title = "Toy: processes and a lock (kernel self-test)"
    variants = variants_of("non-atomic test-and-set", {"atomic-acquire": "test and set in one step"},
                           {"no-release": "processes never release the lock"})
    params = {"procs": Param(2, "number of processes", 1, 6)}
    action_labels = ("request", "check", "take", "acquire", "release")

    def action_names(self):
        if "atomic-acquire" not in self.fixes:
            return ["request", "check", "take", "release"]
        return ["request", "acquire"] + ([] if self.config.variant == "no-release" else ["release"])

    def init_states(self):
        return [LockState(pc=(IDLE,) * self.config.procs, lock=None)]

    def actions(self, s):
        atomic = "atomic-acquire" in self.fixes
        for p, pc in enumerate(s.pc):
            if pc == IDLE:
                yield act("request", p=p)
            elif pc == WAITING and s.lock is None:
                yield act("acquire" if atomic else "check", p=p)
            elif pc == READY:
                yield act("take", p=p)
            elif pc == CRITICAL and self.config.variant != "no-release":
                yield act("release", p=p)

    def next_state(self, s, a):
        p = a.param("p")
        new_pc, lock = {
            "request": (WAITING, s.lock),
            "check": (READY, s.lock),
            "take": (CRITICAL, p),
            "acquire": (CRITICAL, p),
            "release": (IDLE, None),
        }[a.name]
        return LockState(pc=s.pc[:p] + (new_pc,) + s.pc[p + 1:], lock=lock)

    def canonicalize(self, s):
        return s  # processes are not interchangeable in the hand-derived counts


PROPERTIES = PropertySet()


@PROPERTIES.invariant("mutual-exclusion", "At most one process is in its critical section", "toy")
def mutual_exclusion(model, s):
    return sum(1 for pc in s.pc if pc == CRITICAL) <= 1


@PROPERTIES.action_property("lock-held-by-entrant", "A process enters its critical section only holding the lock",
                           "toy")
def lock_held_by_entrant(model, s, a, t):
    return a.name not in ("take", "acquire") or t.lock == a.param("p")


PROPERTIES.leads_to("critical-released", "A process in its critical section eventually leaves it", "toy",
                    trigger=lambda m, s: CRITICAL in s.pc, goal=lambda m, s: CRITICAL not in s.pc,
                    fair=("release",))


@PROPERTIES.target("both-critical", "two processes are in their critical sections at once",
                   "a report: 'both workers wrote the file'")
def both_critical(model, s):
    return sum(1 for pc in s.pc if pc == CRITICAL) >= 2
