"""Bounded model checking of PIP-468's split and merge operations step for step, at bounds with
several segments, at most one split and one merge, and no messages, subscriptions created later or
stream consumers (preset ``split-merge``): each controller action of ``models/pip468`` (election,
session loss and crash, the split and merge requests and their five steps, the BadVersion that
restarts or abandons an operation, the producer's DAG update) is one transition formula, its guard
and its effect, over the whole state, so a run here has the explorer's length.

A layout is a number: the index in a table of the layouts one split and one merge can reach from
the initial one, built with ``SegmentLayout``'s own split and merge (``properties/layout.py``
proves for every layout that they keep the partition, so ``layout-valid`` and ``epoch-increases``
hold of every entry, which the table checks as it is built). The store, each controller and the
producer hold such a number; the table gives each layout's active segments, its
``nextSegmentId``, the segment each key's hash routes to, and which operations it accepts and what
they give. A controller runs at most one split and one merge (``Controller.ops`` is a tuple, but
these budgets give it at most one of each kind at a time), each with its step, progress, the
version it was read at, its parents and children. A topic is its existence, termination and the
cursor of ``s0``. With no messages, ``no-message-loss``, ``acked-delivered`` and the publish
properties hold trivially; ``writable-coverage`` is checked for lassos under weak fairness.
"""
from __future__ import annotations

import z3

from .obligations import Obligation, StateVars, StepEncoding, explorer_depth, finding_variants

NONE, DISCOVER, CREATE, TERMINATE, CAS, NOTIFY = range(6)
STEP = {"discover": DISCOVER, "create": CREATE, "terminate": TERMINATE, "cas": CAS, "notify": NOTIFY}
KINDS = ("split", "merge")
SECTION = ("PIP-468 Split Protocol 1-5, Merge Protocol 1-5 and 'Why this ordering matters'; Leader Election and "
           "Failover; SegmentLayout")
# the finding's bounds: as written, and the finding's fix
CASES = {"split-merge": finding_variants("pip-468", ("split-merge",), all_fixes=False)}


def layout_table(segments: int, splits: int, merges: int) -> list:
    """The layouts reachable from ``SegmentLayout.create(segments)`` by up to ``splits`` splits and
    ``merges`` merges, in the order found (index 0 is the initial layout)."""
    from pulsar_verify.invariants.pip468 import layout_ok
    from pulsar_verify.models.pip468.layout import SegmentLayout

    start = SegmentLayout.create(segments)
    table, todo = [start], [(start, 0, 0)]
    while todo:
        layout, s, m = todo.pop(0)
        nexts = []
        if s < splits:
            nexts += [(layout.split(seg.segment_id), s + 1, m) for seg in layout.active_segments
                      if seg.hash_range.size > 1]
        if m < merges:
            nexts += [(layout.merge(*pair), s, m + 1) for pair in layout.adjacent_pairs()]
        for out, s2, m2 in nexts:
            assert layout_ok(out) and out.epoch > layout.epoch
            if out not in table:
                table.append(out)
                todo.append((out, s2, m2))
    return table


class Pip468LayoutSteps(StepEncoding):
    model = "pip-468"
    properties = ("one-writable-segment",)
    invariants = ("one-writable-segment",)
    liveness = ("writable-coverage",)
    # weakly fair: the controller's steps, elections, watch delivery (invariants/pip468 SYSTEM)
    fair = ("cas", "cas_conflict", "create", "dag_update", "discover", "elect", "layout_changed", "learn_deposed",
            "notify", "terminate")

    def __init__(self, config):
        if config.msgs or config.new_subs or config.consumers or config.subs != 1 or config.splits > 1 \
                or config.merges > 1:
            raise ValueError("the layout encoding covers no messages, no new subscriptions, no stream consumers, "
                             "one subscription, at most one split and one merge")
        v = config.variant
        if v in ("mutant:stale-epoch", "mutant:cas-before-terminate", "mutant:cas-before-create"):
            raise ValueError(f"the layout encoding does not express {v}")
        self.variant = v
        self.fixes = self.fixes_of(v)
        self.config = config
        self.brokers = tuple(range(config.brokers))
        self.kinds = tuple(k for k in KINDS if getattr(config, k + "s"))
        self.table = layout_table(config.segments, config.splits, config.merges)
        self.ids = tuple(range(max(t.next_segment_id for t in self.table)))
        self.watches = "leader-watches-layout" in self.fixes and config.failovers > 0
        from pulsar_verify.models.pip468.state import KEY_HASHES
        self.hashes = KEY_HASHES

    # -- the state -------------------------------------------------------------------------------
    def vars(self, tag: str) -> StateVars:
        ints = ["version", "layout", "lock", "view", "intent", "ip1", "ip2", "splits", "merges", "failovers"]
        bools = [f"{k}{seg}" for k in ("exists", "terminated", "cursor") for seg in self.ids]
        for b in self.brokers:
            ints += [f"cversion{b}", f"clayout{b}"]
            bools += [f"leader{b}", f"csub{b}"]
            for k in self.kinds:
                ints += [f"{x}{b}{k}" for x in ("step", "progress", "base", "p1", "p2", "c1", "c2")]
                bools += [f"osub{b}{k}"]
        return StateVars(ints, bools, tag)

    def init(self, v):
        c = self.config
        out = [v["version"] == 0, v["layout"] == 0, v["lock"] == -1, v["view"] == 0, v["intent"] == 0,
               v["ip1"] == -1, v["ip2"] == -1, v["splits"] == 0, v["merges"] == 0, v["failovers"] == 0]
        for seg in self.ids:
            first = seg < c.segments
            out += [v[f"exists{seg}"] == first, z3.Not(v[f"terminated{seg}"]), v[f"cursor{seg}"] == first]
        for b in self.brokers:
            out += [v[f"cversion{b}"] == -1, v[f"clayout{b}"] == -1, z3.Not(v[f"leader{b}"]), z3.Not(v[f"csub{b}"])]
            out += [v[k] == x for k, x in self.no_op(b).items()]
        return z3.And(*out)

    def no_op(self, b, kinds=None) -> dict:
        """Broker ``b`` runs no operation (of the given kinds)."""
        out = {}
        for k in kinds or self.kinds:
            out.update({f"step{b}{k}": NONE, f"progress{b}{k}": 0, f"base{b}{k}": 0, f"p1{b}{k}": -1,
                        f"p2{b}{k}": -1, f"c1{b}{k}": -1, f"c2{b}{k}": -1, f"osub{b}{k}": False})
        return out

    # -- the layout table, over symbolic layout numbers --------------------------------------------
    def lookup(self, lay, value, default=0):
        """``value(layout)`` of the layout numbered ``lay``."""
        out = z3.IntVal(default) if isinstance(default, int) else default
        for i in reversed(range(len(self.table))):
            out = z3.If(lay == i, value(self.table[i]), out)
        return out

    def operations(self, kind: str) -> list:
        """(layout number, parents, the layout it gives) for each operation of ``kind`` a layout accepts."""
        out = []
        for i, t in enumerate(self.table):
            if kind == "split":
                parents = [(seg.segment_id, -1) for seg in t.active_segments if seg.hash_range.size > 1]
            else:
                parents = t.adjacent_pairs()
            for p1, p2 in parents:
                after = t.split(p1) if kind == "split" else t.merge(p1, p2)
                if after in self.table:
                    out.append((i, p1, p2, self.table.index(after)))
        return out

    def accepts(self, lay, kind, p1, p2):
        return z3.Or(False, *[z3.And(lay == i, p1 == a, p2 == b) for i, a, b, _ in self.operations(kind)])

    def applied(self, lay, kind, p1, p2):
        out = z3.IntVal(-1)
        for i, a, b, after in self.operations(kind):
            out = z3.If(z3.And(lay == i, p1 == a, p2 == b), after, out)
        return out

    def topic(self, seg, field: str, v):
        return z3.Or(False, *[z3.And(seg == i, v[f"{field}{i}"]) for i in self.ids])

    # -- the actions -----------------------------------------------------------------------------
    def loaded(self, v, b) -> dict:
        return {f"cversion{b}": v["version"], f"clayout{b}": v["layout"], f"csub{b}": True}

    def op_on(self, b, k, version, lay, p1, p2) -> dict:
        """``op_on``: an operation on layout ``lay`` read at ``version``, children from its
        ``nextSegmentId``, at step 1."""
        n = self.lookup(lay, lambda t: t.next_segment_id)
        return {f"step{b}{k}": DISCOVER, f"progress{b}{k}": 0, f"base{b}{k}": version, f"p1{b}{k}": p1,
                f"p2{b}{k}": p2, f"c1{b}{k}": n, f"c2{b}{k}": n + 1 if k == "split" else -1, f"osub{b}{k}": False}

    def actions(self, v) -> dict:
        out = {"dag_update": (v["view"] != v["layout"], {"view": v["layout"]})}
        for b in self.brokers:
            out.update(self.controller(v, b))
            for k in self.kinds:
                out.update(self.operation(v, b, k))
        return out

    def controller(self, v, b) -> dict:
        out, cfg = {}, self.config
        leader = v[f"leader{b}"]
        intent = "op-intent" in self.fixes
        elect = {**self.loaded(v, b), f"leader{b}": True, "lock": b}
        if intent:  # the new leader resumes the persisted operation, if it runs none
            idle = z3.And(*[v[f"step{b}{k}"] == NONE for k in self.kinds])
            for code, k in enumerate(KINDS, 1):
                if k in self.kinds:
                    resume = z3.And(idle, v["intent"] == code)
                    fresh = self.op_on(b, k, v["version"], v["layout"], v["ip1"], v["ip2"])
                    elect.update({x: z3.If(resume, y, v[x]) for x, y in fresh.items()})
        out[f"elect({b})"] = (z3.And(v["lock"] == -1, z3.Not(leader)), elect)
        out[f"learn_deposed({b})"] = (z3.And(leader, v["lock"] != b), {f"leader{b}": False})
        if self.watches:
            out[f"layout_changed({b})"] = (z3.And(leader, v[f"cversion{b}"] != v["version"]), self.loaded(v, b))
        if cfg.failovers:
            budget = v["failovers"] < cfg.failovers
            busy = z3.Or(*[v[f"step{b}{k}"] != NONE for k in self.kinds])
            out[f"lose_session({b})"] = (z3.And(budget, v["lock"] == b), {"lock": -1, "failovers": v["failovers"] + 1})
            out[f"crash({b})"] = (z3.And(budget, z3.Or(leader, busy)), {
                f"leader{b}": False, f"cversion{b}": -1, f"clayout{b}": -1, f"csub{b}": False, **self.no_op(b),
                "lock": z3.If(v["lock"] == b, -1, v["lock"]), "failovers": v["failovers"] + 1})
        may = z3.And(leader, z3.Not(v["intent"] != 0) if intent else True)
        lay = v[f"clayout{b}"]
        for code, k in enumerate(KINDS, 1):
            if k not in self.kinds:
                continue
            budget = v[k + "s"] < getattr(cfg, k + "s")
            for p1, p2 in sorted({(a, c) for _, a, c, _ in self.operations(k)}):
                label = f"request_{k}({b},{p1})" if k == "split" else f"request_{k}({b},{p1},{p2})"
                out[label] = (z3.And(may, budget, self.accepts(lay, k, p1, p2)), {
                    **self.op_on(b, k, v[f"cversion{b}"], lay, p1, p2), k + "s": v[k + "s"] + 1,
                    **({"intent": code, "ip1": p1, "ip2": p2} if intent else {})})
        return out

    def operation(self, v, b, k) -> dict:
        """Steps 1-5 of broker ``b``'s operation of kind ``k``."""
        out = {}
        step, progress = v[f"step{b}{k}"], v[f"progress{b}{k}"]
        p1, p2, c1, c2 = (v[f"{x}{b}{k}"] for x in ("p1", "p2", "c1", "c2"))
        at = f"({b},{k})"
        if "subs-in-metadata" in self.fixes:  # one read, of the loaded metadata
            out["discover" + at] = (step == DISCOVER, {f"osub{b}{k}": v[f"csub{b}"], f"step{b}{k}": CREATE})
        else:  # one parent a query
            p = z3.If(progress == 0, p1, p2)
            last = progress == (0 if k == "split" else 1)
            found = z3.Or(v[f"osub{b}{k}"], z3.And(self.topic(p, "exists", v), self.topic(p, "cursor", v)))
            out["discover" + at] = (step == DISCOVER, {f"osub{b}{k}": found, f"step{b}{k}": z3.If(last, CREATE, DISCOVER),
                                                       f"progress{b}{k}": z3.If(last, 0, progress + 1)})

        def each(now, then, first, second, count, marks):
            """Step ``now`` acts on one segment a call (``first``, then ``second``; ``count`` in all),
            setting the topic fields ``marks`` (field -> value) on it; after the last, step ``then``."""
            last = progress == count - 1
            seg = z3.If(progress == 0, first, second)
            changes = {f"step{b}{k}": z3.If(last, then, now), f"progress{b}{k}": z3.If(last, 0, progress + 1)}
            for i in self.ids:
                changes.update({f"{field}{i}": z3.Or(v[f"{field}{i}"], z3.And(seg == i, value))
                                for field, value in marks.items()})
            return step == now, changes
        out["create" + at] = each(CREATE, TERMINATE, c1, c2, 2 if k == "split" else 1,
                                  {"exists": True, "cursor": v[f"osub{b}{k}"]})
        out["terminate" + at] = each(TERMINATE, CAS, p1, p2, 1 if k == "split" else 2,
                                     {"exists": True, "terminated": True})
        current = v["version"] == v[f"base{b}{k}"]
        after = self.applied(v[f"clayout{b}"], k, p1, p2)
        out["cas" + at] = (z3.And(step == CAS, current), {
            "version": v["version"] + 1, "layout": after, f"cversion{b}": v["version"] + 1, f"clayout{b}": after,
            f"csub{b}": True, f"step{b}{k}": NOTIFY, **({"intent": 0, "ip1": -1, "ip2": -1}
                                                        if "op-intent" in self.fixes else {})})
        # BadVersion: reload; the operation starts over on the new layout, or fails if it no longer accepts it
        ok = self.accepts(v["layout"], k, p1, p2)
        restart = self.op_on(b, k, v["version"], v["layout"], p1, p2)
        conflict = {**self.loaded(v, b), **{x: z3.If(ok, y, z) for (x, y), z in
                                            zip(restart.items(), self.no_op(b, (k,)).values())}}
        if "op-intent" in self.fixes:
            code = KINDS.index(k) + 1
            ours = z3.And(z3.Not(ok), v["intent"] == code, v["ip1"] == p1, v["ip2"] == p2)
            conflict.update({"intent": z3.If(ours, 0, v["intent"]), "ip1": z3.If(ours, -1, v["ip1"]),
                             "ip2": z3.If(ours, -1, v["ip2"])})
        out["cas_conflict" + at] = (z3.And(step == CAS, z3.Not(current)), conflict)
        out["notify" + at] = (step == NOTIFY, self.no_op(b, (k,)))
        return out

    # -- the properties --------------------------------------------------------------------------
    def writable(self, v, seg):
        return z3.And(self.topic(seg, "exists", v), z3.Not(self.topic(seg, "terminated", v)))

    def routes(self, v, which: str, h: int):
        return self.lookup(v[which], lambda t: t.find_active_segment(h).segment_id)

    def invariant(self, prop: str, v):
        bad = []
        for h in self.hashes:
            a, b = self.routes(v, "layout", h), self.routes(v, "view", h)
            bad.append(z3.And(a != b, self.writable(v, a), self.writable(v, b)))
        return z3.Not(z3.Or(*bad))

    def breaks(self, prop: str, v, label: str, w):
        return z3.Not(self.invariant(prop, w))

    def stuck(self, prop: str, v):
        return z3.Or(*[z3.And(v["layout"] == i, z3.Or(False, *[z3.And(v[f"exists{s.segment_id}"],
                                                                      v[f"terminated{s.segment_id}"])
                                                               for s in t.active_segments]))
                       for i, t in enumerate(self.table)])

    # -- agreement with the Python model ---------------------------------------------------------
    def concrete(self, v, s) -> z3.BoolRef:
        number = {t: i for i, t in enumerate(self.table)}
        kind, parents = (s.intent or ("", ()))
        out = [v["version"] == s.version, v["layout"] == number[s.layout], v["view"] == number[s.view],
               v["lock"] == (-1 if s.lock is None else s.lock), v["intent"] == (KINDS.index(kind) + 1 if kind else 0),
               v["ip1"] == (parents[0] if parents else -1), v["ip2"] == (parents[1] if len(parents) > 1 else -1),
               v["splits"] == s.splits, v["merges"] == s.merges, v["failovers"] == s.failovers]
        assert not s.blocked and not s.acked and all(seg in self.ids for seg in s.topics.keys())
        for seg in self.ids:
            t = s.topics.get(seg)
            out += [v[f"exists{seg}"] == (t is not None), v[f"terminated{seg}"] == bool(t and t.terminated),
                    v[f"cursor{seg}"] == bool(t and "s0" in t.cursors)]
        for b, c in enumerate(s.ctrls):
            out += [v[f"leader{b}"] == c.leader, v[f"cversion{b}"] == c.version,
                    v[f"clayout{b}"] == (-1 if c.layout is None else number[c.layout]),
                    v[f"csub{b}"] == ("s0" in c.subs)]
            ops = {op.kind: op for op in c.ops}
            assert len(ops) == len(c.ops)
            for k in self.kinds:
                op = ops.get(k)
                if op is None:
                    out += [v[x] == y for x, y in self.no_op(b, (k,)).items()]
                    continue
                p, ch = op.parents + (-1,), op.children + (-1,)
                out += [v[f"step{b}{k}"] == STEP[op.step], v[f"progress{b}{k}"] == op.progress,
                        v[f"base{b}{k}"] == op.base, v[f"p1{b}{k}"] == p[0], v[f"p2{b}{k}"] == p[1],
                        v[f"c1{b}{k}"] == ch[0], v[f"c2{b}{k}"] == ch[1], v[f"osub{b}{k}"] == ("s0" in op.subs)]
        return self.conjunction(out)

    @staticmethod
    def label(a) -> str:
        p = dict(a.params)
        if a.name == "request_split":
            return f"request_split({p['broker']},{p['segment']})"
        if a.name == "request_merge":
            return f"request_merge({p['broker']},{','.join(map(str, p['segments']))})"
        if "of" in p:
            return f"{a.name}({p['broker']},{p['of'].split('(')[0]})"
        return a.name + (f"({p['broker']})" if "broker" in p else "")


encoding, disagreements = Pip468LayoutSteps.at, Pip468LayoutSteps.disagreements_of


def verdict(variant: str, preset: str):
    return encoding(variant, preset).verdict(explorer_depth("pip-468", preset, CASES[preset]) + 1)


OBLIGATIONS = [
    Obligation("pip-468", f"steps-bounded-{preset}", f"writable-coverage's shortest breaking lasso and "
               f"one-writable-segment's shortest breaking run of split and merge at the {preset} bounds, step for "
               f"step (up to the explorer's depth there plus one)", SECTION,
               lambda variant=variant, preset=preset: verdict(variant, preset), (variant,), minutes=True)
    for preset, variants in CASES.items() for variant in variants
]
