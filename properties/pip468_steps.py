"""Bounded model checking of PIP-468 step for step, at the bounds of one segment, at most one split, one
key and at most one stream consumer (presets ``default``, ``new-sub``, ``failover``, ``session-failover``,
``consumer-failover``, ``stream-order``): each action of
``models/pip468`` is one transition formula, its guard and its effect, over the whole state, so a
run here has the explorer's length and breaks the same properties.

At these bounds a layout is one of two: the initial one (segment 0 active) or the split one
(segment 0 sealed, children 1 and 2 active, epoch + 1), so a layout is a Boolean "split" (the
store's, each controller's, the producer's DAG view). The split's parent is 0 and its children 1
and 2 ("Split Protocol": child ids from ``nextSegmentId``), on every controller. A topic is its
existence, entries (message ids; key 0 routes by hash 0x0000 to segment 0, then 1), termination and
a cursor per subscription. ``layout-valid`` and ``epoch-increases`` hold of both layouts by
construction (``properties/layout.py`` proves a split keeps the partition for every layout).

The stream consumer ``c1`` (of subscription ``s0``) has its broker connection, the assignment it
acts on and one pushed to it; an assignment is one of ``()``, ``(0,)`` and ``(1, 2)``: with one
consumer, round-robin gives it every active segment. Each controller's coordinator holds whether
``c1`` is a member, connected, timed, and its assignment; the store its registration; the
session is a ghost. ``assignment-exclusive`` holds by construction with one consumer.
``writable-coverage``, ``acked-delivered`` and ``assignment-complete`` are checked for lassos
under weak fairness, as in ``v4txn_steps``. A run stops at a state that breaks
an invariant, as the explorer expands no such state (past the ``no-message-loss`` violation at
``new-sub`` a lasso breaking ``acked-delivered`` exists, outside the graph the explorer checks).
The checks take minutes, so the obligations run in ``prove`` and nightly.
"""
from __future__ import annotations

import z3

from pulsar_verify.models.pip468.state import ALL

from .obligations import Obligation, StateVars, StepEncoding, bounded_verdict, explorer_depth, finding_variants

NONE, DISCOVER, CREATE, TERMINATE, CAS, NOTIFY = range(6)
STEP = {"discover": DISCOVER, "create": CREATE, "terminate": TERMINATE, "cas": CAS, "notify": NOTIFY}
SEGMENTS = (0, 1, 2)  # the parent and the split's two children
SECTION = ("PIP-468 Split Protocol 1-5 and 'Why this ordering matters'; Leader Election and Failover; Admin API "
           "(createSubscription); DAG Watch Sessions; Motivation: 'all subscription cursors exist before producers are "
           "redirected'")
# the findings' bounds it covers, each checked as written; at new-sub the finding's fix too (op-intent's check at
# failover, up to 19 steps, had not finished after 25 minutes: it is left out); the depth checked is the
# explorer's there, read, not re-typed
CASES = {"new-sub": finding_variants("pip-468", ("new-sub",), all_fixes=False),
         **{preset: ("as-written",) for preset in ("failover", "consumer-failover", "session-failover")}}
LIVENESS = ("writable-coverage", "acked-delivered")
INVARIANTS = ("one-writable-segment", "no-message-loss")  # the state invariants that can fail here
ASSIGNMENT = {(): 0, (0,): 1, (1, 2): 2}  # what round-robin gives one consumer: nothing, the parent, the children
CONSUMER_PROPERTIES = ("per-key-order", "assignment-exclusive", "reconnect-keeps-assignment", "sessions-durable")


class Pip468Steps(StepEncoding):
    model = "pip-468"
    properties = ("sealed-accepts-no-write", "one-writable-segment", "cursors-before-routing", "no-message-loss")
    liveness = LIVENESS
    invariants = INVARIANTS
    # weakly fair: the controller's steps, elections, watch delivery, reading (invariants/pip468 SYSTEM)
    fair = ("cas", "cas_conflict", "create", "dag_update", "deliver", "discover", "elect", "layout_changed",
            "learn_deposed", "notify", "propagate_subscription", "terminate")

    def __init__(self, config):
        if (config.segments, config.merges, config.keys) != (1, 0, 1) or config.splits > 1 or config.consumers > 1:
            raise ValueError("the step-for-step encoding covers one segment, at most one split, one key, one stream "
                             "consumer")
        if config.variant == "mutant:stale-epoch":
            raise ValueError("the step-for-step encoding has no layout epochs")
        v = config.variant
        self.variant = v
        self.fixes = self.fixes_of(v)
        order = [DISCOVER, CREATE, TERMINATE, CAS, NOTIFY]
        if v in ("mutant:cas-before-terminate", "mutant:cas-before-create"):
            order.remove(CAS)
            order.insert(order.index(TERMINATE if v.endswith("terminate") else CREATE), CAS)
        self.after = dict(zip(order, order[1:] + [NONE]))
        self.brokers = tuple(range(config.brokers))
        self.subs = tuple(f"s{i}" for i in range(config.subs + config.new_subs))
        self.initial_subs = config.subs
        self.new_subs = self.subs[config.subs:]
        self.msgs = tuple(range(1, config.msgs + 1))
        self.failovers = config.failovers
        self.splits = config.splits
        self.watches = "leader-watches-layout" in self.fixes and config.failovers > 0
        self.consumer = config.consumers == 1
        self.disconnects = config.disconnects
        if self.consumer:
            self.properties = self.properties + CONSUMER_PROPERTIES
            self.liveness = LIVENESS + ("assignment-complete",)
            self.invariants = INVARIANTS + ("assignment-exclusive", "sessions-durable")
            self.fair = self.fair + ("connect", "grace_expire", "persist_registration", "receive_assignment")

    # -- the state -------------------------------------------------------------------------------
    def vars(self, tag: str) -> StateVars:
        ints = ["version", "lock", "acked", "splits", "failovers"]
        bools = ["split", "intent", "view", "blocked"]
        bools += [f"sub_{s}" for s in self.subs] + [f"created_{s}" for s in self.subs]
        for seg in SEGMENTS:
            bools += [f"exists{seg}", f"terminated{seg}"]
            ints += [f"len{seg}"] + [f"entry{seg}_{j}" for j in range(len(self.msgs))]
            ints += [f"cursor{seg}_{s}" for s in self.subs]  # -1: no cursor
        for b in self.brokers:
            bools += [f"leader{b}", f"csplit{b}"] + [f"csub{b}_{s}" for s in self.subs] + \
                [f"osub{b}_{s}" for s in self.subs]
            ints += [f"cversion{b}", f"step{b}", f"progress{b}", f"base{b}"]
            bools += [f"{k}{b}_{s}" for k in ("prop", "psplit") for s in self.new_subs]
            ints += [f"ppos{b}_{s}" for s in self.new_subs]
        for j in self.msgs:
            ints += [f"aseg{j}", f"apos{j}"]
            bools += [f"asub{j}_{s}" for s in self.subs] + [f"delivered{j}_{s}" for s in self.subs]
        if self.consumer:
            ints += ["reg", "at", "cview", "inbox", "disconnects"] + [f"assigned{b}" for b in self.brokers]
            ints += [f"pend{b}" for b in self.brokers]  # c1's registration write issued there: -1 none, 0 delete
            bools += ["sess", "joining"] + [f"{k}{b}" for k in ("member", "conn", "timer") for b in self.brokers]
        return StateVars(ints, bools, tag)

    def loaded(self, v, b) -> dict:
        """The controller on ``b`` loads the metadata (version, layout, subscriptions)."""
        return {f"cversion{b}": v["version"], f"csplit{b}": v["split"],
                **{f"csub{b}_{s}": v[f"sub_{s}"] for s in self.subs}}

    def fresh_op(self, v, b) -> dict:
        """A split of segment 0 on the controller's layout, read at its version, at step 1."""
        return {f"step{b}": DISCOVER, f"progress{b}": 0, f"base{b}": v[f"cversion{b}"],
                **{f"osub{b}_{s}": False for s in self.subs}}

    def target(self, v):
        """The segment the producer's DAG routes key 0 (hash 0x0000) to."""
        return z3.If(v["view"], 1, 0)

    def topic(self, v, seg, field: str):
        """``field`` of the topic of a symbolic segment."""
        return z3.If(seg == 0, v[f"{field}0"], z3.If(seg == 1, v[f"{field}1"], v[f"{field}2"]))

    # -- the actions -----------------------------------------------------------------------------
    def actions(self, v) -> dict:
        out = {}
        for b in self.brokers:
            out.update(self.controller(v, b))
        target = self.target(v)
        room = v["acked"] < len(self.msgs)
        may = z3.And(z3.Not(v["blocked"]), room)
        rejected = z3.And(self.topic(v, target, "exists"), self.topic(v, target, "terminated"))
        out["publish_rejected"] = (z3.And(may, rejected), {"blocked": True})
        publish = {}
        for seg in (0, 1):  # the only targets of key 0
            here = target == seg
            publish[f"exists{seg}"] = z3.Or(v[f"exists{seg}"], here)
            publish[f"len{seg}"] = z3.If(here, v[f"len{seg}"] + 1, v[f"len{seg}"])
            for i in range(len(self.msgs)):
                publish[f"entry{seg}_{i}"] = z3.If(z3.And(here, v[f"len{seg}"] == i), v["acked"] + 1,
                                                   v[f"entry{seg}_{i}"])
        for j in self.msgs:
            mine = v["acked"] + 1 == j
            publish[f"aseg{j}"] = z3.If(mine, target, v[f"aseg{j}"])
            publish[f"apos{j}"] = z3.If(mine, self.topic(v, target, "len"), v[f"apos{j}"])
            for s in self.subs:
                publish[f"asub{j}_{s}"] = z3.If(mine, v[f"created_{s}"], v[f"asub{j}_{s}"])
        out["publish"] = (z3.And(may, z3.Not(rejected), self.topic(v, target, "len") < len(self.msgs)),
                          {**publish, "acked": v["acked"] + 1})
        out["dag_update"] = (v["view"] != v["split"], {"view": v["split"], "blocked": False})
        for b in self.brokers:
            for i, s in enumerate(self.new_subs, self.initial_subs):
                count = z3.Sum(*[z3.If(v[f"sub_{x}"], 1, 0) for x in self.subs])
                out[f"create_subscription({b},{s})"] = (z3.And(v[f"leader{b}"], count == i), self.subscribe(v, b, s))
                out[f"propagate_subscription({b},{s})"] = (v[f"prop{b}_{s}"], self.propagate(v, b, s))
        for seg in SEGMENTS:
            for s in self.subs:
                cursor = v[f"cursor{seg}_{s}"]
                entry = self.next_entry(v, seg, s)
                out[f"deliver({s},{seg})"] = (z3.And(cursor != -1, cursor < v[f"len{seg}"], self.readable(v, s, seg)), {
                    f"cursor{seg}_{s}": cursor + 1,
                    **{f"delivered{j}_{s}": z3.Or(v[f"delivered{j}_{s}"], entry == j) for j in self.msgs}})
        if self.consumer:
            out.update(self.consumer_actions(v))
        return out

    # -- the stream consumer and the coordinators (assignment.py, clients.py) ----------------------
    def readable(self, v, sub: str, seg: int):
        """A queue subscription reads every segment; the stream subscription a segment assigned to
        the connected consumer (or an ancestor of one), once the segment's ancestors are drained."""
        if not self.consumer or sub != "s0":
            return z3.BoolVal(True)
        connected = v["at"] != -1
        if seg == 0:
            return z3.And(connected, v["cview"] != 0)
        drained = z3.Or(self.variant == "mutant:no-catch-up", v["cursor0_s0"] == -1, v["cursor0_s0"] >= v["len0"])
        return z3.And(connected, v["cview"] == 2, drained)

    @staticmethod
    def round_robin(split, member):
        """c1's share of the round-robin over a layout: every active segment, if it is a member."""
        return z3.If(member, z3.If(split, 2, 1), 0)

    def rebalance(self, v, b, split, member, assigned, pend=None) -> dict:
        """The coordinator on ``b`` recomputes the assignment against its layout (``split``) and
        members (the inputs as the action leaves them) and, if it changed, issues its write."""
        new = self.round_robin(split, member)
        return {f"assigned{b}": new, f"pend{b}": z3.If(new != assigned, new, v[f"pend{b}"] if pend is None else pend)}

    def persist(self, v, b) -> dict:
        """``c1``'s registration write issued on ``b`` lands (fenced-registrations: fails unless ``b``
        holds the lock); a consumer waiting on ``b`` gets its reply (or error), one connected there is
        pushed a changed assignment."""
        value, here = v[f"pend{b}"], v["at"] == b
        failed = v["lock"] != b if "fenced-registrations" in self.fixes else z3.BoolVal(False)
        acting = z3.If(v["inbox"] != 0, v["inbox"], v["cview"])
        reply = z3.And(here, v["joining"])
        push = z3.And(here, z3.Not(v["joining"]), z3.Not(failed), v[f"conn{b}"], value != 0, value != acting)
        return {f"pend{b}": -1, "reg": z3.If(failed, v["reg"], value),
                "joining": z3.And(v["joining"], z3.Not(here)),
                "at": z3.If(z3.And(reply, failed), -1, v["at"]),
                "cview": z3.If(z3.And(reply, z3.Not(failed)), value, v["cview"]),
                "sess": z3.Or(v["sess"], z3.And(reply, z3.Not(failed))),
                "inbox": z3.If(push, value, v["inbox"])}

    def coordinator(self, v, b, action: str) -> dict:
        """What the controller action ``action`` on ``b`` does to its coordinator and ``c1``."""
        if not self.consumer:
            return {}
        watches = "leader-watches-layout" in self.fixes
        member, assigned = v[f"member{b}"], v[f"assigned{b}"]
        if action == "elect":  # restore the registrations; the consumer still connected here stays so
            out, at, joining, inbox = {}, v["at"], v["joining"], v["inbox"]
            if self.variant == "mutant:elect-drops-connections":  # it first closes the connections to it
                gone = at == b
                at, joining, inbox = z3.If(gone, -1, at), z3.And(joining, z3.Not(gone)), z3.If(gone, 0, inbox)
            member = v["reg"] != 0
            if "fenced-registrations" in self.fixes:  # writes issued under an earlier lock fail
                dropped = z3.And(v[f"pend{b}"] != -1, joining, at == b)  # told, so disconnected
                out[f"pend{b}"] = -1
                at, joining = z3.If(dropped, -1, at), z3.And(joining, z3.Not(dropped))
            here = at == b
            if watches:  # one still connected here joins again
                member = z3.Or(member, here)
            live = z3.And(here, member)
            out.update({f"member{b}": member, f"conn{b}": live, f"timer{b}": z3.And(member, z3.Not(live)),
                        f"assigned{b}": v["reg"], "at": at, "joining": joining, "inbox": inbox})
            if watches:  # it rebalances, and pushes the one connected here what was restored
                out.update(self.rebalance(v, b, v["split"], member, v["reg"], out.get(f"pend{b}")))
                acting = z3.If(inbox != 0, inbox, v["cview"])
                push = z3.And(here, z3.Not(joining), out[f"pend{b}"] == -1, out[f"assigned{b}"] != acting)
                out["inbox"] = z3.If(push, out[f"assigned{b}"], inbox)
            return out
        if action == "learn_deposed":
            return {f"timer{b}": False}
        if action == "crash":
            here = v["at"] == b
            return {f"member{b}": False, f"conn{b}": False, f"timer{b}": False, f"assigned{b}": 0, f"pend{b}": -1,
                    "at": z3.If(here, -1, v["at"]), "inbox": z3.If(here, 0, v["inbox"]),
                    "joining": z3.And(v["joining"], z3.Not(here))}
        if action == "layout_changed":
            return self.rebalance(v, b, v["split"], member, assigned)
        if action == "cas_conflict":
            if not watches:
                return {}
            return {k: z3.If(v[f"leader{b}"], x, v[k]) for k, x in self.rebalance(v, b, v["split"], member, assigned).items()}
        assert action == "notify"
        return self.rebalance(v, b, v[f"csplit{b}"], member, assigned)

    def consumer_actions(self, v) -> dict:
        """``c1`` connects to the leader, disconnects, receives a pushed assignment; grace timers expire."""
        out, lock = {}, v["lock"]
        connect = {"at": lock, "inbox": 0}
        view, joining = v["cview"], z3.BoolVal(False)
        for b in reversed(self.brokers):
            here, rejoin = lock == b, v[f"member{b}"]
            joins = self.rebalance(v, b, v[f"csplit{b}"], True, v[f"assigned{b}"])
            if self.variant == "mutant:no-rebalance-on-join":
                share = self.round_robin(v[f"csplit{b}"], True)
                joins = {f"assigned{b}": share, f"pend{b}": share}
            again = self.rebalance(v, b, v[f"csplit{b}"], True, v[f"assigned{b}"]) \
                if self.variant == "mutant:rebalance-on-reconnect" else {k: v[k] for k in joins}
            after = {k: z3.If(here, z3.If(rejoin, again[k], joins[k]), v[k]) for k in joins}
            waits = z3.Or(z3.Not(rejoin), after[f"pend{b}"] != -1)  # the reply waits for the write
            connect.update({f"member{b}": z3.Or(v[f"member{b}"], here), f"conn{b}": z3.Or(v[f"conn{b}"], here),
                            f"timer{b}": z3.And(v[f"timer{b}"], z3.Not(z3.And(here, rejoin))), **after})
            view = z3.If(here, z3.If(rejoin, z3.If(waits, view, after[f"assigned{b}"]), 0), view)
            joining = z3.If(here, waits, joining)
        connect.update({"cview": view, "joining": joining})
        leads = z3.Or(*[z3.And(lock == b, v[f"leader{b}"]) for b in self.brokers])
        out["connect(c1)"] = (z3.And(leads, v["at"] != lock), connect)
        if self.disconnects:
            drop = {"disconnects": v["disconnects"] + 1, "at": -1, "inbox": 0, "joining": False}
            for b in self.brokers:
                hit = z3.And(v["at"] == b, v[f"conn{b}"])
                drop.update({f"conn{b}": z3.And(v[f"conn{b}"], z3.Not(hit)), f"timer{b}": z3.Or(v[f"timer{b}"], hit)})
            out["disconnect(c1)"] = (z3.And(v["at"] != -1, v["disconnects"] < self.disconnects), drop)
        out["receive_assignment(c1)"] = (v["inbox"] != 0, {"cview": v["inbox"], "inbox": 0})
        key = "*" if "atomic-registrations" in self.fixes else "c1"
        for b in self.brokers:
            out[f"persist_registration({b},{key})"] = (v[f"pend{b}"] != -1, self.persist(v, b))
            evicted = self.rebalance(v, b, v[f"csplit{b}"], False, v[f"assigned{b}"])
            out[f"grace_expire({b},c1)"] = (z3.And(v[f"leader{b}"], v[f"timer{b}"]), {
                **evicted, f"member{b}": False, f"timer{b}": False, "sess": z3.And(v["sess"], lock != b)})
        return out

    def next_entry(self, v, seg: int, sub: str):
        """The message at ``sub``'s cursor on segment ``seg`` (0 past the entries)."""
        return v.select(f"entry{seg}_{{}}", v[f"cursor{seg}_{sub}"], range(len(self.msgs)), z3.IntVal(0))

    def subscribe(self, v, b, s) -> dict:
        """Admin ``createSubscription`` reaches the leader: it will issue the Segments call on each active
        segment of its layout (``subs-in-metadata``: written by CAS into the topic's metadata first, and
        reloaded)."""
        changes = {f"sub_{s}": True, f"prop{b}_{s}": True, f"ppos{b}_{s}": 0, f"psplit{b}_{s}": v[f"csplit{b}"]}
        if "subs-in-metadata" in self.fixes:
            changes.update({"version": v["version"] + 1, f"cversion{b}": v["version"] + 1, f"csplit{b}": v["split"],
                            f"psplit{b}_{s}": v["split"],
                            **{f"csub{b}_{x}": z3.Or(v[f"sub_{x}"], x == s) for x in self.subs}})
        return changes

    def propagate(self, v, b, s) -> dict:
        """One Segments ``createSubscription``: a cursor at the end of the next segment (0, or the children
        1 and 2 of a split layout) unless it has one; after the last, the admin call succeeds (the mutant
        created-after-first-segment: after the first)."""
        split, pos = v[f"psplit{b}_{s}"], v[f"ppos{b}_{s}"]
        last = z3.Or(z3.Not(split), pos == 1)
        succeeds = z3.BoolVal(True) if self.variant == "mutant:created-after-first-segment" else last
        changes = {f"prop{b}_{s}": z3.Not(last), f"ppos{b}_{s}": z3.If(last, 0, pos + 1),
                   f"psplit{b}_{s}": z3.And(split, z3.Not(last)), f"created_{s}": z3.Or(v[f"created_{s}"], succeeds)}
        for seg in SEGMENTS:
            here = z3.Not(split) if seg == 0 else z3.And(split, pos == seg - 1)
            cursor = v[f"cursor{seg}_{s}"]
            changes[f"exists{seg}"] = z3.Or(v[f"exists{seg}"], here)
            changes[f"cursor{seg}_{s}"] = z3.If(z3.And(here, cursor == -1), v[f"len{seg}"], cursor)
        return changes

    def controller(self, v, b) -> dict:
        out = {}
        leader, step, progress = v[f"leader{b}"], v[f"step{b}"], v[f"progress{b}"]
        intent = "op-intent" in self.fixes
        elect = {**self.loaded(v, b), f"leader{b}": True, "lock": b}
        if intent:  # the new leader resumes the persisted operation
            resume = z3.And(v["intent"], step == NONE)
            elect.update({f"step{b}": z3.If(resume, DISCOVER, step), f"progress{b}": z3.If(resume, 0, progress),
                          f"base{b}": z3.If(resume, v["version"], v[f"base{b}"]),
                          **{f"osub{b}_{s}": z3.And(z3.Not(resume), v[f"osub{b}_{s}"]) for s in self.subs}})
        out[f"elect({b})"] = (z3.And(v["lock"] == -1, z3.Not(leader)), {**elect, **self.coordinator(v, b, "elect")})
        out[f"learn_deposed({b})"] = (z3.And(leader, v["lock"] != b), {f"leader{b}": False,
                                                                       **self.coordinator(v, b, "learn_deposed")})
        if self.watches:
            out[f"layout_changed({b})"] = (z3.And(leader, v[f"cversion{b}"] != v["version"]),
                                           {**self.loaded(v, b), **self.coordinator(v, b, "layout_changed")})
        if self.failovers:
            budget = v["failovers"] < self.failovers
            out[f"lose_session({b})"] = (z3.And(budget, v["lock"] == b), {"lock": -1,
                                                                          "failovers": v["failovers"] + 1})
            out[f"crash({b})"] = (z3.And(budget, z3.Or(leader, step != NONE)), {
                f"leader{b}": False, f"cversion{b}": -1, f"csplit{b}": False, f"step{b}": NONE, f"progress{b}": 0,
                f"base{b}": 0, **{f"{k}{b}_{s}": False for k in ("csub", "osub") for s in self.subs},
                **{f"{k}{b}_{s}": False for k in ("prop", "psplit") for s in self.new_subs},
                **{f"ppos{b}_{s}": 0 for s in self.new_subs}, "lock": z3.If(v["lock"] == b, -1, v["lock"]), "failovers": v["failovers"] + 1,
                **self.coordinator(v, b, "crash")})
        guard = z3.And(leader, v["splits"] < self.splits, z3.Not(v[f"csplit{b}"]))
        if intent:  # written under the lock and the layout's version: on BadVersion reload, and check again
            stale = v[f"cversion{b}"] != v["version"]
            reload = {**self.loaded(v, b), **(self.coordinator(v, b, "layout_changed")
                                              if "leader-watches-layout" in self.fixes else {})}
            start = {**self.fresh_op(v, b), f"base{b}": v["version"], "splits": v["splits"] + 1, "intent": True}
            accepted = z3.Or(z3.Not(stale), z3.Not(v["split"]))  # the reloaded layout still has the parent
            changes = {**{k: z3.If(stale, x, v[k]) for k, x in reload.items()},
                       **{k: z3.If(accepted, x, v[k]) for k, x in start.items()}}  # disjoint keys
            out[f"request_split({b})"] = (z3.And(guard, z3.Not(v["intent"]), v["lock"] == b), changes)
        else:
            out[f"request_split({b})"] = (guard, {**self.fresh_op(v, b), "splits": v["splits"] + 1})
        if "subs-in-metadata" in self.fixes:
            found = {f"osub{b}_{s}": v[f"csub{b}_{s}"] for s in self.subs}
        else:
            found = {f"osub{b}_{s}": z3.And(v["exists0"], v[f"cursor0_{s}"] != -1) for s in self.subs}
        out[f"discover({b})"] = (step == DISCOVER, {**found, f"step{b}": self.after[DISCOVER]})
        last = progress == 1
        create = {f"step{b}": z3.If(last, self.after[CREATE], CREATE), f"progress{b}": z3.If(last, 0, progress + 1)}
        for child in (1, 2):
            mine = progress == child - 1
            create[f"exists{child}"] = z3.Or(v[f"exists{child}"], mine)
            for s in self.subs:
                cursor = v[f"cursor{child}_{s}"]
                create[f"cursor{child}_{s}"] = z3.If(z3.And(mine, v[f"osub{b}_{s}"], cursor == -1), 0, cursor)
        out[f"create({b})"] = (step == CREATE, create)
        out[f"terminate({b})"] = (step == TERMINATE, {"exists0": True, "terminated0": True,
                                                      f"step{b}": self.after[TERMINATE]})
        current = v["version"] == v[f"base{b}"]
        out[f"cas({b})"] = (z3.And(step == CAS, current), {
            "version": v["version"] + 1, "split": True, **({"intent": False} if intent else {}),
            f"cversion{b}": v["version"] + 1, f"csplit{b}": True, **{f"csub{b}_{s}": v[f"sub_{s}"] for s in self.subs},
            f"step{b}": self.after[CAS]})
        # BadVersion: reload; the split starts over on the new layout, or fails if it is split already
        gone = v["split"]
        conflict = {**self.loaded(v, b), f"step{b}": z3.If(gone, NONE, DISCOVER), f"progress{b}": 0,
                    f"base{b}": z3.If(gone, 0, v["version"]), **{f"osub{b}_{s}": False for s in self.subs}}
        if intent:
            conflict["intent"] = z3.And(v["intent"], z3.Not(gone))
        out[f"cas_conflict({b})"] = (z3.And(step == CAS, z3.Not(current)),
                                     {**conflict, **self.coordinator(v, b, "cas_conflict")})
        out[f"notify({b})"] = (step == NOTIFY, {f"step{b}": NONE, f"progress{b}": 0, f"base{b}": 0,
                                                **{f"osub{b}_{s}": False for s in self.subs},
                                                **self.coordinator(v, b, "notify")})
        return out

    # -- the properties --------------------------------------------------------------------------
    def breaks(self, prop: str, v, label: str, w):
        target = self.target(v)
        if label == "publish" and prop == "sealed-accepts-no-write":
            active = z3.If(target == 0, z3.Not(v["split"]), v["split"])
            return z3.Or(z3.Not(active), z3.And(self.topic(v, target, "exists"), self.topic(v, target, "terminated")))
        if label == "publish" and prop == "cursors-before-routing":
            missing = [z3.And(v[f"created_{s}"], z3.If(target == 0, v[f"cursor0_{s}"], v[f"cursor1_{s}"]) == -1)
                       for s in self.subs]
            return z3.Or(z3.Not(self.topic(v, target, "exists")), *missing)
        if prop in self.invariants:  # checked on the state a step reaches
            return z3.Not(self.invariant(prop, w))
        if prop == "per-key-order" and self.msgs and label.startswith("deliver(s0,"):  # one key: none later first
            msg = self.next_entry(v, int(label[len("deliver(s0,"):-1]), "s0")
            return z3.Or(False, *[z3.And(msg < j, v[f"delivered{j}_s0"]) for j in self.msgs])
        if prop == "reconnect-keeps-assignment" and label == "connect(c1)":
            rejoin = z3.Or(*[z3.And(v["lock"] == b, v[f"member{b}"]) for b in self.brokers])
            kept = z3.And(*[z3.Implies(v["lock"] == b, z3.And(w[f"assigned{b}"] == v[f"assigned{b}"],
                                                              w[f"pend{b}"] == v[f"pend{b}"])) for b in self.brokers])
            return z3.And(rejoin, z3.Not(kept))
        return z3.BoolVal(False)

    def invariant(self, prop: str, v):
        if prop == "assignment-exclusive":  # one consumer: no segment is in two assignments
            return z3.BoolVal(True)
        if prop == "sessions-durable":
            return z3.Implies(v["sess"], v["reg"] != 0)
        if prop == "one-writable-segment":
            writable = {seg: z3.And(v[f"exists{seg}"], z3.Not(v[f"terminated{seg}"])) for seg in SEGMENTS}
            bad = []
            for child in (1, 2):  # hash 0x0000 routes to 0 or 1, hash 0xFFFF to 0 or 2
                routes_parent = z3.Or(z3.Not(v["split"]), z3.Not(v["view"]))
                routes_child = z3.Or(v["split"], v["view"])
                bad.append(z3.And(routes_parent, routes_child, writable[0], writable[child]))
            return z3.Not(z3.Or(*bad))
        lost = []
        for j in self.msgs:
            for s in self.subs:
                cursor = z3.If(v[f"aseg{j}"] == 0, v[f"cursor0_{s}"], v[f"cursor1_{s}"])
                kept = z3.And(cursor != -1, cursor <= v[f"apos{j}"])
                lost.append(z3.And(v["acked"] >= j, v[f"asub{j}_{s}"], z3.Not(v[f"delivered{j}_{s}"]), z3.Not(kept)))
        return z3.Not(z3.Or(*lost))

    def stuck(self, prop: str, v):
        """The leads-to's trigger (its goal is the negation)."""
        if prop == "assignment-complete":
            acting = z3.If(v["inbox"] != 0, v["inbox"], v["cview"])
            return z3.Or(z3.And(v["reg"] != 0, v["reg"] != z3.If(v["split"], 2, 1)),
                         z3.And(v["at"] != -1, v["at"] == v["lock"], acting != v["reg"]))
        if prop == "writable-coverage":
            return z3.Or(z3.And(z3.Not(v["split"]), v["exists0"], v["terminated0"]),
                         *[z3.And(v["split"], v[f"exists{c}"], v[f"terminated{c}"]) for c in (1, 2)])
        return z3.Or(False, *[z3.And(v["acked"] >= j, v[f"asub{j}_{s}"], z3.Not(v[f"delivered{j}_{s}"]))
                              for j in self.msgs for s in self.subs])

    def init(self, v):
        out = [v["version"] == 0, v["lock"] == -1, v["acked"] == 0, v["splits"] == 0, v["failovers"] == 0,
               z3.Not(v["split"]), z3.Not(v["intent"]), z3.Not(v["view"]), z3.Not(v["blocked"])]
        for i, s in enumerate(self.subs):
            out += [v[f"sub_{s}"] == (i < self.initial_subs), v[f"created_{s}"] == (i < self.initial_subs)]
        for seg in SEGMENTS:
            out += [v[f"exists{seg}"] == (seg == 0), z3.Not(v[f"terminated{seg}"]), v[f"len{seg}"] == 0]
            out += [v[f"entry{seg}_{i}"] == 0 for i in range(len(self.msgs))]
            out += [v[f"cursor{seg}_{s}"] == (0 if seg == 0 and i < self.initial_subs else -1)
                    for i, s in enumerate(self.subs)]
        for b in self.brokers:
            out += [z3.Not(v[f"leader{b}"]), z3.Not(v[f"csplit{b}"]), v[f"cversion{b}"] == -1, v[f"step{b}"] == NONE,
                    v[f"progress{b}"] == 0, v[f"base{b}"] == 0]
            out += [z3.Not(v[f"{k}{b}_{s}"]) for k in ("csub", "osub") for s in self.subs]
            out += [z3.Not(v[f"{k}{b}_{s}"]) for k in ("prop", "psplit") for s in self.new_subs]
            out += [v[f"ppos{b}_{s}"] == 0 for s in self.new_subs]
        for j in self.msgs:
            out += [v[f"aseg{j}"] == 0, v[f"apos{j}"] == 0]
            out += [z3.Not(v[f"{k}{j}_{s}"]) for k in ("asub", "delivered") for s in self.subs]
        if self.consumer:
            out += [v["reg"] == 0, v["at"] == -1, v["cview"] == 0, v["inbox"] == 0, v["disconnects"] == 0,
                    z3.Not(v["sess"]), z3.Not(v["joining"])]
            out += [v[f"pend{b}"] == -1 for b in self.brokers]
            out += [v[f"assigned{b}"] == 0 for b in self.brokers]
            out += [z3.Not(v[f"{k}{b}"]) for k in ("member", "conn", "timer") for b in self.brokers]
        return z3.And(*out)

    # -- the checks ------------------------------------------------------------------------------
    # -- agreement with the Python model ---------------------------------------------------------
    def concrete(self, v, s) -> z3.BoolRef:
        split = bool(s.layout.active_segments[0].segment_id != 0)
        out = [v["version"] == s.version, v["lock"] == (-1 if s.lock is None else s.lock), v["acked"] == len(s.acked),
               v["splits"] == s.splits, v["failovers"] == s.failovers, v["split"] == split,
               v["intent"] == bool(s.intent), v["view"] == (s.view.active_segments[0].segment_id != 0),
               v["blocked"] == s.blocked]
        out += [v[f"sub_{x}"] == (x in s.subs) for x in self.subs]
        out += [v[f"created_{x}"] == (x in s.created) for x in self.subs]
        for seg in SEGMENTS:
            t = s.topics.get(seg)
            entries = t.entries if t else ()
            out += [v[f"exists{seg}"] == (t is not None), v[f"terminated{seg}"] == bool(t and t.terminated),
                    v[f"len{seg}"] == len(entries)]
            out += [v[f"entry{seg}_{i}"] == (entries[i][0] if i < len(entries) else 0) for i in range(len(self.msgs))]
            out += [v[f"cursor{seg}_{x}"] == (t.cursors.get(x, -1) if t else -1) for x in self.subs]
        for b, c in enumerate(s.ctrls):
            op = c.ops[0] if c.ops else None
            out += [v[f"leader{b}"] == c.leader, v[f"cversion{b}"] == c.version,
                    v[f"csplit{b}"] == bool(c.layout and c.layout.active_segments[0].segment_id != 0),
                    v[f"step{b}"] == (STEP[op.step] if op else NONE), v[f"progress{b}"] == (op.progress if op else 0),
                    v[f"base{b}"] == (op.base if op else 0)]
            out += [v[f"csub{b}_{x}"] == (x in c.subs) for x in self.subs]
            out += [v[f"osub{b}_{x}"] == (op is not None and x in op.subs) for x in self.subs]
            calls = dict(c.subscribing)
            for x in self.new_subs:
                left = calls.get(x)
                out += [v[f"prop{b}_{x}"] == (left is not None), v[f"psplit{b}_{x}"] == bool(left and left[0] != 0),
                        v[f"ppos{b}_{x}"] == (2 - len(left) if left and left[0] != 0 else 0)]
        for j in self.msgs:
            acked = s.acked[j - 1] if j <= len(s.acked) else None
            out += [v[f"aseg{j}"] == (acked[2] if acked else 0), v[f"apos{j}"] == (acked[3] if acked else 0)]
            out += [v[f"asub{j}_{x}"] == bool(acked and x in acked[4]) for x in self.subs]
            out += [v[f"delivered{j}_{x}"] == (j in s.delivered.get(x, ())) for x in self.subs]
        if self.consumer:
            x = s.consumers[0]
            out += [v["reg"] == ASSIGNMENT[s.registrations.get("c1", ())], v["sess"] == ("c1" in s.sessions),
                    v["at"] == (-1 if x.broker is None else x.broker), v["cview"] == ASSIGNMENT[x.view],
                    v["inbox"] == (0 if x.inbox is None else ASSIGNMENT[x.inbox]), v["disconnects"] == s.disconnects,
                    v["joining"] == x.joining]
            for b, c in enumerate(s.ctrls):
                if "c1" in c.writes:
                    pend = ASSIGNMENT[c.writes["c1"] or ()]
                else:
                    pend = ASSIGNMENT[c.writes[ALL].get("c1", ())] if ALL in c.writes else -1
                out += [v[f"assigned{b}"] == ASSIGNMENT[c.assigned.get("c1", ())], v[f"pend{b}"] == pend,
                        v[f"member{b}"] == ("c1" in c.members),
                        v[f"conn{b}"] == ("c1" in c.connected), v[f"timer{b}"] == ("c1" in c.timers)]
        return self.conjunction(out)

    @staticmethod
    def label(a) -> str:
        p = dict(a.params)
        if a.name == "deliver":
            return f"deliver({p['sub']},{p['segment']})"
        if a.name in ("create_subscription", "propagate_subscription"):
            return f"{a.name}({p['broker']},{p['sub']})"
        if "consumer" in p:
            return a.name + (f"({p['broker']},{p['consumer']})" if "broker" in p else f"({p['consumer']})")
        return a.name + (f"({p['broker']})" if "broker" in p else "")


encoding, disagreements = Pip468Steps.at, Pip468Steps.disagreements_of


def sessions_durable(variant: str):
    """``sessions-durable``'s shortest breaking run at ``session-failover``, up to the explorer's
    greatest depth there (as written and fenced-registrations) plus one."""
    k = explorer_depth("pip-468", "session-failover", SESSION_VARIANTS) + 1
    return bounded_verdict(encoding(variant, "session-failover").check(k, only={"sessions-durable"}), (), k)


def verdict(variant: str, preset: str):
    return encoding(variant, preset).verdict(explorer_depth("pip-468", preset, CASES[preset]) + 1)


SESSION_VARIANTS = finding_variants("pip-468", ("session-failover",), all_fixes=False)
OBLIGATIONS = [
    Obligation("pip-468", "sessions-durable-bounded", "the shortest run of the controller, the coordinators and the "
               "consumer at the session-failover bounds that breaks sessions-durable, step for step (up to the "
               "explorer's depth there plus one)", SECTION + "; Consumer Session Lifecycle: 'this entry is "
               "durable and outlives ... controller leader failovers'",
               lambda variant=variant: sessions_durable(variant), (variant,))
    for variant in SESSION_VARIANTS
] + [
    Obligation("pip-468", f"steps-bounded-{preset}", f"each property's shortest breaking run (a lasso for "
               f"{' and '.join(LIVENESS)}) of the controller, producer and subscriptions at the {preset} bounds, step "
               f"for step (up to the explorer's depth there plus one)", SECTION,
               lambda variant=variant, preset=preset: verdict(variant, preset), (variant,), minutes=True)
    for preset, variants in CASES.items() for variant in variants
]
