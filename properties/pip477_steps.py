"""Bounded model checking of PIP-477 step for step, with up to two brokers and putSchema calls
(every bound set): each action of ``models/pip477`` (registration, the switch request's precheck
and directive write (and, fixed, the idgen fence first), the directive watch, restarts, closing
the old client, the old cluster going down; BUILD's create (or its verify), entry copies and
record, schema PROMOTE's read and CAS, cursor PROMOTE's RPC and the owner's handler, CLEANUP's
deletes and status flips, ROLLBACK; publish, rollover, reads, markDelete, cursor rollover,
retention, subscription properties, topic unload and load) is one transition formula, its guard
and its effect, over the whole state, so a run here has the explorer's length and breaks the same
properties.

The encoding is written from PIP-477 and the primer. Ledger ids are ``1..MAXID`` (1-3 on the old
cluster at the start; ``allocate`` takes the next id of a cluster's idgen that the cluster does not
hold); each cluster holds, per id, whether the ledger is there and its entries (at most
``ENTRIES``); the topic's ledger list, the acknowledged messages and the promote-cursor requests
are arrays with a length. The schema locator is an array of index entries (ledger, stamp, hash;
entry ``i`` is schema version ``i``), version 0 in ledger 3 from the start, one more per putSchema.
Each broker has its plugin memory (up, active cluster, directive epoch, orchestrator, the switch request
it serves, PROMOTE's read of the whole locator, its putSchema in flight: ledger, cluster, locator version
read); the owner is a broker number, and what the owner does is one action per broker.
Statuses: 0 none, ``ACTIVE``, ``STANDBY``, ``DEPRECATED``; clusters: 0 none, ``OLD``, ``NEW``
(and ``USER``, what a user wrote under the attribution key, I16).

Every property is a formula over a step; ``k`` is the explorer's depth plus one, so "no run" is the
explorer's "holds". Runs stop at a state breaking an invariant, which the explorer does not expand.
"""
from __future__ import annotations

import z3

from pulsar_verify.findings import catalogue
from pulsar_verify.models.pip477.model import Pip477

from .obligations import UNKNOWN, VIOLATED, Obligation, StateVars, StepEncoding, Verdict, explorer_depth

OLD, NEW, USER = 1, 2, 3
CLUSTER = {"old": OLD, "new": NEW, "user": USER, None: 0}
ACTIVE, STANDBY, DEPRECATED = 1, 2, 3
STATUS = {"ACTIVE": ACTIVE, "STANDBY": STANDBY, "DEPRECATED": DEPRECATED}
BUILD, CLEANUP, ROLLBACK, DONE, ROLLED_BACK = 1, 2, 3, 4, 5
PHASE = {"build": BUILD, "cleanup": CLEANUP, "rollback": ROLLBACK, "done": DONE, "rolled-back": ROLLED_BACK}
A, USER_VALUE = 1, 2  # the user's subscription property: "a" at the start, "user" once a user set it
NONE, FENCED, CHECKED = 0, 1, 2  # the switch request a broker serves
REQUEST = {None: NONE, "fenced": FENCED, "checked": CHECKED}
SCHEMA_LEDGER = 3
MAXID, ENTRIES, RPCS = 7, 3, 2  # the explorer reaches ids up to 6, 3 entries a ledger, 1 request in flight
BUDGETS = ("publish", "roll", "put_schema", "move", "restart", "old_down", "rollback", "sub_property", "close_client")
FAILURES = ("data", "cursor", "schema")
IDS = tuple(range(1, MAXID + 1))
INVARIANTS = ("I1", "I2", "I3", "I6", "I7", "I8", "I11", "I12", "I13", "I14", "I16", "position-not-rewound",
              "no-publish-pause")
ACTIONS = ("I4", "I5", "I9", "I10", "I15", "rollback-keeps-reads", "rollback-keeps-business-znodes",
           "build-idempotent")
SECTION = ("PIP-477 Switch Phases 1-7 (BUILD, PROMOTE, CLEANUP, ROLLBACK), Write-Path Stamping, Read-Path "
           "Routing, Wiring on Broker Start, Data Plane Continuity, Critical Invariants I1-I16")


class Pip477Steps(StepEncoding):
    model = "pip-477"
    properties = INVARIANTS + ACTIONS
    invariants = INVARIANTS

    def __init__(self, config):
        v = config.variant
        if v in ("mutant:copy-new-id", "mutant:coordinator-promotes-cursor", "mutant:old-reader-drops-unknown"):
            raise ValueError(f"the step-for-step encoding does not express {v}")
        self.variant = v
        self.fixes = self.fixes_of(v)
        self.config = config
        self.brokers = tuple(range(config.brokers))
        self.msgs = 1 + config.publish  # message 0 is in ledger 1 from the start
        self.schemas = tuple(range(1 + config.put_schema))  # the locator's index entries
        # room in the ledger list: ledger 1, a voluntary rollover each, one per event after which the current
        # ledger may be unwritable (a move or restart, the old cluster down, its client closed), and one to spare
        # (a rollover the room blocks would be a disagreement with the model, not a silent gap)
        self.ml = 1 + config.roll + config.move + config.restart + config.old_down + config.close_client + 1

    # -- the state -------------------------------------------------------------------------------
    def vars(self, tag: str) -> StateVars:
        ints = ["reg_old", "reg_new", "source", "phase", "flips", "idgen_old", "idgen_new", "mln", "cl", "cmd",
                "cattr", "cuser", "cver", "sver", "sn", "sacked", "origin", "owner", "w_l", "w_c", "c_l", "c_c",
                "i_l", "i_md", "i_attr", "i_user", "i_ver", "o_md", "r_l", "r_c", "rpcn", "ncur", "nmsg", "consumed",
                "acked_md", "zk", "fence_at"]
        bools = ["directive", "alive_old", "closed_old", "owned", "o_roll", "fenced"]
        for b in self.brokers:
            ints += [f"active{b}", f"epoch{b}", f"req{b}", f"pread{b}", f"pread_n{b}"]
            ints += [f"ps_l{b}", f"ps_c{b}", f"ps_v{b}"]
            ints += [f"cp{b}_{lid}" for lid in IDS] + [f"cpk{b}_{lid}" for lid in IDS]
            ints += [f"pread_{x}{b}_{i}" for x in ("l", "attr", "hash") for i in self.schemas]
            bools += [f"up{b}", f"orch{b}"]
        ints += [f"b_{k}" for k in BUDGETS] + [f"cur{i}" for i in range(2)]
        ints += [f"s{x}{i}" for x in ("l", "attr", "hash") for i in self.schemas]
        ints += [f"ml{i}" for i in range(self.ml)] + [f"mla{i}" for i in range(self.ml)]
        ints += [f"msg{k}" for k in range(self.msgs)]
        for i in range(RPCS):
            ints += [f"rpc{i}_l", f"rpc{i}_t"]
        for lid in IDS:
            ints += [f"built{lid}"]
            bools += [f"sent{lid}", f"failed{lid}", f"promoted{lid}", f"reverted{lid}", f"fallback{lid}",
                      f"borrowed{lid}"]
            for c in (OLD, NEW):
                bools += [f"has{c}_{lid}", f"alloc{c}_{lid}"]
                ints += [f"n{c}_{lid}"] + [f"e{c}_{lid}_{j}" for j in range(ENTRIES)]
            bools += [f"f_{what}{lid}" for what in FAILURES]
        return StateVars(ints, bools, tag)

    def init(self, v):
        c = self.config
        initial = {1: (0,), 2: (0,), 3: (SCHEMA_LEDGER,)}
        out = [v["reg_old"] == ACTIVE, v["reg_new"] == 0, z3.Not(v["directive"]), v["source"] == 0, v["phase"] == 0,
               v["flips"] == 0, z3.Not(v["fenced"]), v["fence_at"] == 0, v["idgen_old"] == 4,
               v["idgen_new"] == c.new_idgen, v["alive_old"],
               z3.Not(v["closed_old"]), v["mln"] == 1, v["ml0"] == 1, v["mla0"] == (0 if c.legacy else OLD),
               v["cl"] == 2, v["cmd"] == 0, v["cattr"] == OLD, v["cuser"] == A, v["cver"] == 0, v["sver"] == 0,
               v["sn"] == 1, v["sacked"] == 1,
               *[v[f"s{x}{i}"] == (SCHEMA_LEDGER if i == 0 and x != "attr" else OLD if i == 0 else 0)
                 for x in ("l", "attr", "hash") for i in self.schemas], v["origin"] == 0, v["owner"] == 0, v["owned"],
               *[z3.And(v[f"up{b}"], v[f"active{b}"] == OLD, v[f"epoch{b}"] == 0, z3.Not(v[f"orch{b}"]),
                        *[v[k] == x for k, x in self.forgotten(b).items()])
                 for b in self.brokers],
               v["w_l"] == 1, v["w_c"] == OLD, v["c_l"] == 2, v["c_c"] == OLD, v["i_l"] == 2, v["i_md"] == 0,
               v["i_attr"] == OLD, v["i_user"] == A, v["i_ver"] == 0, v["o_md"] == 0, z3.Not(v["o_roll"]),
               v["r_l"] == 0, v["r_c"] == 0, v["rpcn"] == 0, v["ncur"] == 0, v["nmsg"] == 1, v["msg0"] == 1,
               v["consumed"] == 0, v["acked_md"] == 0, v["zk"] == 0,
               *[v[f"b_{k}"] == getattr(c, k) for k in BUDGETS], *[v[f"cur{i}"] == 0 for i in range(2)],
               *[v[f"{p}{i}"] == 0 for p in ("ml", "mla") for i in range(1, self.ml)],
               *[v[f"msg{k}"] == 0 for k in range(1, self.msgs)],
               *[v[f"rpc{i}_{x}"] == 0 for i in range(RPCS) for x in "lt"]]
        for lid in IDS:
            out += [v[f"built{lid}"] == -1, *[z3.Not(v[f"{p}{lid}"]) for p in ("sent", "failed", "promoted",
                                                                                   "reverted", "fallback", "borrowed")],
                    *[z3.Not(v[f"f_{what}{lid}"]) for what in FAILURES]]
            for cl in (OLD, NEW):
                held = initial.get(lid, ()) if cl == OLD else ()
                out += [v[f"has{cl}_{lid}"] == (lid in initial and cl == OLD), v[f"alloc{cl}_{lid}"] == (
                        lid in initial and cl == OLD), v[f"n{cl}_{lid}"] == len(held),
                        *[v[f"e{cl}_{lid}_{j}"] == (held[j] if j < len(held) else 0) for j in range(ENTRIES)]]
        return z3.And(*out)

    # -- helpers over symbolic ledger ids and clusters ---------------------------------------------
    def has(self, v, c, lid):
        return z3.Or(z3.And(c == OLD, v.select("has1_{}", lid, IDS, False)),
                     z3.And(c == NEW, v.select("has2_{}", lid, IDS, False)))

    def length(self, v, c, lid):
        return z3.If(c == OLD, v.select("n1_{}", lid, IDS), v.select("n2_{}", lid, IDS))

    def last_entry(self, v, c, lid):
        n = self.length(v, c, lid)
        out = z3.IntVal(0)
        for j in reversed(range(ENTRIES)):
            out = z3.If(n - 1 == j, z3.If(c == OLD, v.select(f"e1_{{}}_{j}", lid, IDS),
                                          v.select(f"e2_{{}}_{j}", lid, IDS)), out)
        return out

    @staticmethod
    def alive(v, c):
        return z3.Or(z3.And(c == OLD, v["alive_old"]), c == NEW)

    def reachable(self, v, c):
        return z3.Or(z3.And(c == OLD, v["alive_old"], z3.Not(v["closed_old"])), c == NEW)

    def readable(self, v, c, lid, entries=1):
        return z3.And(self.reachable(v, c), self.has(v, c, lid), self.length(v, c, lid) >= entries)

    def of(self, v, name: str, b):
        """Broker ``b``'s variable ``name`` (``b`` may be symbolic: the owner)."""
        return v.select(name + "{}", b, self.brokers)

    def resolve(self, v, attr, b):
        """``resolve(LedgerInfo)`` on broker ``b``: the stamp, else the legacy fallback."""
        fallback = self.of(v, "active", b)
        if "fallback-to-source-cluster" in self.fixes:
            fallback = z3.If(v["directive"], v["source"], fallback)
        return z3.If(attr != 0, attr, fallback)

    def create_cluster(self, v, b):
        return self.of(v, "active", b)

    def startup(self, v, b):
        """The client broker ``b`` captured at start (mutant constructor-bk)."""
        return z3.If(v["directive"], v["source"], self.of(v, "active", b))

    def writable(self, v, lid, c):
        return z3.And(lid != 0, self.reachable(v, c), self.has(v, c, lid))

    def ml_last(self, v, prefix="ml"):
        return v.select(prefix + "{}", v["mln"] - 1, tuple(range(self.ml)))

    def ml_attr(self, v, lid):
        """The stamp of ledger ``lid`` in the topic's ledger list."""
        out = z3.IntVal(0)
        for i in reversed(range(self.ml)):
            out = z3.If(z3.And(i < v["mln"], v[f"ml{i}"] == lid), v[f"mla{i}"], out)
        return out

    def in_ml(self, v, lid):
        return z3.Or(*[z3.And(i < v["mln"], v[f"ml{i}"] == lid) for i in range(self.ml)])

    def msg_count(self, v, lid, below=None):
        """How many acknowledged messages went to ledger ``lid`` (of the first ``below``)."""
        below = v["nmsg"] if below is None else below
        return z3.Sum(*[z3.If(z3.And(k < below, v[f"msg{k}"] == lid), 1, 0) for k in range(self.msgs)])

    def homes(self, v, c, lid):
        """Whether ``c`` is a home of ``lid``: it was created there (its idgen's id, or on the old cluster
        one the new cluster's idgen gave), or (new) PROMOTE re-stamped it and ROLLBACK has not re-stamped it old."""
        borrowed = v.select("borrowed{}", lid, IDS, False)
        if c == OLD:
            return z3.Or(v.select("alloc1_{}", lid, IDS, False), borrowed)
        return z3.Or(z3.And(v.select("alloc2_{}", lid, IDS, False), z3.Not(borrowed)),
                     z3.And(v["phase"] != 0, v.select("promoted{}", lid, IDS, False),
                            z3.Not(v.select("reverted{}", lid, IDS, False))))

    def on_live_cluster(self, v, lid, entries=1):
        return z3.Or(*[z3.And(self.homes(v, c, lid), self.alive(v, c), self.has(v, c, lid),
                              self.length(v, c, lid) >= entries) for c in (OLD, NEW)])

    def failed_read(self, v, what: str, lid, entries=1, when=True) -> dict:
        lost = z3.And(when, self.on_live_cluster(v, lid, entries))
        return {f"f_{what}{i}": z3.Or(v[f"f_{what}{i}"], z3.And(lost, lid == i)) for i in IDS}

    def idgen_of(self, v, c):
        """The cluster whose idgen gives the ids of ledgers created on ``c``: itself, or the new one for
        the old cluster once its idgen is fenced."""
        return z3.If(z3.And(c == OLD, v["fenced"]), NEW, c)

    @staticmethod
    def past_fence(v):
        """The new cluster's idgen advanced to the old cluster's fence."""
        return z3.If(v["idgen_new"] < v["fence_at"], v["fence_at"], v["idgen_new"])

    def allocated(self, v, c):
        """The id ``allocate`` takes on ``c``: the idgen's next, skipping ids the cluster holds."""
        idgen = z3.If(self.idgen_of(v, c) == OLD, v["idgen_old"], z3.If(c == OLD, self.past_fence(v), v["idgen_new"]))
        out = z3.IntVal(MAXID + 1)
        for step in reversed(range(MAXID)):
            out = z3.If(z3.Not(self.has(v, c, idgen + step)), idgen + step, out)
        return out

    def put_ledger(self, v, c, lid, entries, allocate=False) -> dict:
        """A new ledger ``lid`` on the (symbolic) cluster ``c`` holding ``entries`` (and, from
        ``allocate``, the idgen that gave it advanced past it and the id recorded as handed out)."""
        out, source = {}, self.idgen_of(v, c)
        if allocate:
            out.update({f"borrowed{i}": z3.Or(v[f"borrowed{i}"], z3.And(lid == i, source != c)) for i in IDS})
        for cl in (OLD, NEW):
            here, gave = c == cl, source == cl
            for i in IDS:
                at = z3.And(here, lid == i)
                out[f"has{cl}_{i}"] = z3.Or(v[f"has{cl}_{i}"], at)
                out[f"n{cl}_{i}"] = z3.If(at, len(entries), v[f"n{cl}_{i}"])
                for j in range(ENTRIES):
                    out[f"e{cl}_{i}_{j}"] = z3.If(at, entries[j] if j < len(entries) else 0, v[f"e{cl}_{i}_{j}"])
                if allocate:
                    out[f"alloc{cl}_{i}"] = z3.Or(v[f"alloc{cl}_{i}"], z3.And(gave, lid == i))
            if allocate:
                key = "idgen_old" if cl == OLD else "idgen_new"
                out[key] = z3.If(gave, lid + 1, v[key])
        return out

    def append(self, v, lid, c, value) -> dict:
        """``value`` appended to ledger ``lid`` on cluster ``c``."""
        out = {}
        for cl in (OLD, NEW):
            for i in IDS:
                at = z3.And(c == cl, lid == i)
                n = v[f"n{cl}_{i}"]
                out[f"n{cl}_{i}"] = z3.If(at, n + 1, n)
                for j in range(ENTRIES):
                    out[f"e{cl}_{i}_{j}"] = z3.If(z3.And(at, n == j), value, v[f"e{cl}_{i}_{j}"])
        return out

    @staticmethod
    def delete(c: int, lid) -> dict:
        return {f"has{c}_{lid}": False, f"n{c}_{lid}": 0, **{f"e{c}_{lid}_{j}": 0 for j in range(ENTRIES)}}

    def room(self, v, lid, c):
        return self.length(v, c, lid) < ENTRIES

    # -- the actions -----------------------------------------------------------------------------
    def actions(self, v) -> dict:
        """Action label -> (guard over ``v``, changes: variable name -> new value)."""
        out = {}
        out.update(self.switch_actions(v))
        out.update(self.orchestrator_actions(v))
        out.update(self.traffic_actions(v))
        return out

    def spend(self, v, what: str) -> dict:
        return {f"b_{what}": v[f"b_{what}"] - 1}

    def active_status(self, v, none=OLD):
        """The cluster with status ACTIVE, the registry read in key order ("new" first); ``none``
        if there is none (a restart's tier 3 takes the old cluster)."""
        return z3.If(v["reg_new"] == ACTIVE, NEW, z3.If(v["reg_old"] == ACTIVE, OLD, none))

    def switch_actions(self, v) -> dict:
        cfg, out = self.config, {}
        out["register"] = (v["reg_new"] == 0, {"reg_new": STANDBY})
        held = [z3.Implies(v[f"has1_{lid}"], v["idgen_new"] > lid) for lid in IDS]
        precheck = z3.BoolVal(True) if self.variant == "mutant:no-precheck" else z3.And(*held)
        serving = z3.Or(*[v[f"req{b}"] != NONE for b in self.brokers])  # the operator's one switch request
        fence = "fence-old-idgen" in self.fixes
        for b in self.brokers:
            ready = z3.And(v[f"up{b}"], z3.Not(v["directive"]), v["reg_new"] == STANDBY)
            if fence:
                out[f"fence_idgen({b})"] = (z3.And(ready, z3.Not(serving)), {
                    "fenced": True, "fence_at": z3.If(v["fenced"], v["fence_at"], v["idgen_old"]), f"req{b}": FENCED})
                advance = {} if self.variant == "mutant:no-precheck" else {"idgen_new": self.past_fence(v)}
                out[f"precheck({b})"] = (z3.And(ready, v[f"req{b}"] == FENCED), {f"req{b}": CHECKED, **advance})
            else:
                out[f"precheck({b})"] = (z3.And(ready, z3.Not(serving), precheck), {f"req{b}": CHECKED})
            out[f"switch({b})"] = (z3.And(ready, v[f"req{b}"] == CHECKED),
                                   {"directive": True, "origin": b, "source": self.active_status(v), f"req{b}": NONE})
            runs = z3.Or(v["origin"] == b, self.variant == "mutant:every-broker-orchestrates")
            out[f"watch({b})"] = (z3.And(v[f"up{b}"], v["directive"], v[f"epoch{b}"] < 1), {
                f"active{b}": NEW, f"epoch{b}": 1, f"orch{b}": runs,
                "phase": z3.If(z3.And(runs, v["phase"] == 0), BUILD, v["phase"])})
        if cfg.restart:
            none_active = z3.And(v["reg_old"] != ACTIVE, v["reg_new"] != ACTIVE)
            active = self.active_status(v)
            if "recover-from-directive" in self.fixes:
                active = z3.If(v["directive"], NEW, active)
            for b in self.brokers:
                runs = z3.And(v["directive"], v["origin"] == b, z3.Or(
                    v["phase"] == 0, v["phase"] == BUILD, v["phase"] == CLEANUP, v["phase"] == ROLLBACK),
                    self.variant != "mutant:orchestrator-not-resumed")
                owned_here = z3.And(v["owned"], v["owner"] == b)
                out[f"restart({b})"] = (z3.And(v[f"up{b}"], v["b_restart"] > 0), {
                    "reg_old": z3.If(none_active, ACTIVE, v["reg_old"]), f"active{b}": active,
                    f"epoch{b}": z3.If(v["directive"], 1, 0), f"orch{b}": runs, **self.forgotten(b),
                    "phase": z3.If(z3.And(runs, v["phase"] == 0), BUILD, v["phase"]), **self.spend(v, "restart"),
                    **{k: z3.If(owned_here, x, v[k]) for k, x in self.unowned().items()}})
        if cfg.close_client:
            allowed = z3.BoolVal(True)
            if self.variant != "mutant:close-without-drain":
                allowed = z3.Not(self.handle_on(v, OLD))
                if "close-after-data-expires" in self.fixes:
                    allowed = z3.And(allowed, *[z3.Not(self.routes_old(v, attr)) for attr in self.records(v)])
                if "close-after-brokers-switched" in self.fixes:
                    allowed = z3.And(allowed, *[z3.Implies(v[f"up{b}"], v[f"epoch{b}"] == 1) for b in self.brokers])
            out[f"close_client({OLD})"] = (z3.And(v["phase"] == DONE, z3.Not(v["closed_old"]), v["b_close_client"] > 0,
                                               allowed), {"closed_old": True, **self.spend(v, "close_client")})
        if cfg.old_down:
            out["old_down"] = (z3.And(v["alive_old"], v["b_old_down"] > 0),
                               {"alive_old": False, **self.spend(v, "old_down")})
        return out

    def routes_old(self, v, record):
        in_use, attr = record
        return z3.And(in_use, self.resolve(v, attr, 0) == OLD)

    def records(self, v) -> list:
        """Every ledger record's (present, attribution): the ledger list, the cursor, the schema entries."""
        return ([(i < v["mln"], v[f"mla{i}"]) for i in range(self.ml)] + [(True, v["cattr"])]
                + [(there, attr) for there, _, attr, _ in self.entries(v)])

    def entries(self, v) -> list:
        """The schema locator's index entries: (present, ledger, stamp, hash) per schema version."""
        return [(i < v["sn"], v[f"sl{i}"], v[f"sattr{i}"], v[f"shash{i}"]) for i in self.schemas]

    def handle_on(self, v, c):
        """Some open ledger handle of the owner is bound to ``c``."""
        return z3.And(v["owned"], z3.Or(z3.And(v["w_l"] != 0, v["w_c"] == c), v["c_c"] == c,
                                        z3.And(v["r_l"] != 0, v["r_c"] == c)))

    def unread(self, b: int) -> dict:
        """Broker ``b`` holds no PROMOTE read of the locator."""
        return {f"pread{b}": -1, f"pread_n{b}": 0,
                **{f"pread_{x}{b}_{i}": 0 for x in ("l", "attr", "hash") for i in self.schemas}}

    def forgotten(self, b: int) -> dict:
        """What broker ``b``'s restart loses of its metadata writes in flight."""
        return {**self.unread(b), f"ps_l{b}": 0, f"ps_c{b}": 0, f"ps_v{b}": 0, f"req{b}": NONE,
                **self.uncopied(b, IDS)}

    @staticmethod
    def uncopied(b: int, lids) -> dict:
        """Broker ``b`` has no BUILD copy of ``lids`` in progress (``cp``: the entries to copy, -1 for
        none; ``cpk``: 1 for a cursor ledger)."""
        return {k: x for lid in lids for k, x in ((f"cp{b}_{lid}", -1), (f"cpk{b}_{lid}", 0))}

    @staticmethod
    def unowned() -> dict:
        zero = ("w_l", "w_c", "c_l", "c_c", "i_l", "i_md", "i_attr", "i_user", "i_ver", "o_md", "r_l", "r_c")
        return {"owned": False, "owner": 0, "o_roll": False, **{k: 0 for k in zero}}

    # -- the orchestrator (orchestrator.py) -------------------------------------------------------
    def source_of(self, v):
        return z3.If(v["directive"], v["source"], OLD)

    def candidate(self, v, lid: int, kind: str, built_too: bool = False):
        """BUILD's work list holds ``(lid, kind)``: stamped old (or unstamped, its source old), not
        built or failed yet; ``built_too``: what BUILD takes up besides (mutant build-new-entries: a schema
        entry stamped new, which the phase does not wait for)."""
        def old(attr):
            return z3.If(attr != 0, attr, self.source_of(v)) == OLD
        if kind == "schema":
            new = built_too and self.variant == "mutant:build-new-entries"
            stamped = z3.Or(*[z3.And(there, ledger == lid, z3.Or(old(attr), new and attr == NEW))
                              for there, ledger, attr, _ in self.entries(v)])
        else:
            stamped = z3.And(v["cl"] == lid, old(v["cattr"]))
        return z3.And(stamped, v[f"built{lid}"] == -1, z3.Not(v[f"failed{lid}"]))

    def built(self, v, lid):
        return v.select("built{}", lid, IDS, -1) != -1

    def to_promote(self, v, attr, lid):
        """Schema PROMOTE flips the entry of ledger ``lid``: stamped old (and, promote-built-only, built)."""
        flips = attr == OLD
        if "promote-built-only" in self.fixes:
            flips = z3.And(flips, self.built(v, lid))
        return flips

    def built_old(self, v):
        """PROMOTE has work: some entry is stamped old and its ledger was built."""
        return z3.Or(*[z3.And(there, self.to_promote(v, attr, lid), self.built(v, lid))
                       for there, lid, attr, _ in self.entries(v)])

    def orchestrator_actions(self, v) -> dict:
        out = {}
        for b in self.brokers:
            out.update(self.broker_orchestrator(v, b))
        for lid in IDS:
            for target in (OLD, NEW):
                out[f"promote_cursor_handle({lid},{target})"] = (
                    z3.And(v["phase"] != 0, v["rpcn"] > 0, v["rpc0_l"] == lid, v["rpc0_t"] == target),
                    self.handle(v, lid, target))
        return out

    def broker_orchestrator(self, v, b: int) -> dict:
        """The orchestrator's steps on broker ``b`` (it runs there once its watch or restart started it)."""
        out = {}
        runs = z3.And(v["phase"] != 0, v[f"up{b}"], v[f"orch{b}"])
        phase = v["phase"]
        building = z3.And(runs, phase == BUILD)
        schema_ids = IDS if self.config.put_schema else (SCHEMA_LEDGER,)
        kinds = [(lid, "schema") for lid in schema_ids] + [(lid, "cursor") for lid in IDS]
        for lid, kind in kinds:
            out.update(self.build(v, b, building, lid, kind))
        for lid in IDS:
            out.update(self.copy_steps(v, b, building, lid))
        schema_built_old = self.built_old(v)
        out[f"promote_schema_read({b})"] = (z3.And(building, v[f"pread{b}"] == -1, schema_built_old), {
            f"pread{b}": v["sver"], f"pread_n{b}": v["sn"],
            **{f"pread_{x}{b}_{i}": v[f"s{x}{i}"] for x in ("l", "attr", "hash") for i in self.schemas}})
        blind = self.variant == "mutant:blind-schema-promote"
        matches = z3.Or(v[f"pread{b}"] == v["sver"], blind)
        read = [(i < v[f"pread_n{b}"], v[f"pread_l{b}_{i}"], v[f"pread_attr{b}_{i}"], v[f"pread_hash{b}_{i}"])
                for i in self.schemas]
        flips = [z3.And(there, self.to_promote(v, attr, lid)) for there, lid, attr, _ in read]
        resets = self.variant == "mutant:promote-resets-hash"
        out[f"promote_schema_cas({b})"] = (z3.And(building, v[f"pread{b}"] != -1, matches), {
            **{f"sl{i}": lid for i, (_, lid, _, _) in enumerate(read)},
            **{f"sattr{i}": z3.If(flip, NEW, attr) for i, ((_, _, attr, _), flip) in enumerate(zip(read, flips))},
            **{f"shash{i}": z3.If(flip, 0, h) if resets else h for i, ((*_, h), flip) in enumerate(zip(read, flips))},
            "sn": v[f"pread_n{b}"], "sver": v["sver"] + 1, "zk": v["zk"] + z3.If(v[f"pread{b}"] != v["sver"], 1, 0),
            **{f"promoted{lid}": z3.Or(v[f"promoted{lid}"], *[z3.And(flip, x == lid) for (_, x, _, _), flip
                                                                in zip(read, flips)]) for lid in IDS},
            **self.unread(b)})
        if not blind:  # another orchestrator's CAS, or a putSchema, came between
            out[f"promote_schema_conflict({b})"] = (z3.And(building, v[f"pread{b}"] != -1, z3.Not(matches)),
                                                    self.unread(b))
        cursors = [(i, v[f"cur{i}"]) for i in range(2)]
        for lid in IDS:
            listed = z3.Or(*[z3.And(i < v["ncur"], x == lid) for i, x in cursors])
            out[f"promote_cursor_send({b},{lid})"] = (z3.And(building, listed, z3.Not(v[f"sent{lid}"]),
                                                           v["rpcn"] < RPCS),
                                                    {f"sent{lid}": True, **self.enqueue(v, lid, NEW)})
        unsent = z3.Or(*[z3.And(i < v["ncur"], z3.Not(v.select("sent{}", x, IDS, True))) for i, x in cursors])
        pending = z3.Or(schema_built_old, unsent, v["rpcn"] > 0)
        no_candidates = z3.And(*[z3.Not(self.candidate(v, lid, kind)) for lid, kind in kinds])
        ready = z3.And(building, no_candidates, z3.Not(pending), v[f"pread{b}"] == -1)
        out[f"start_cleanup({b})"] = (ready, {"phase": CLEANUP})
        if self.config.rollback:
            out[f"start_rollback({b})"] = (z3.And(ready, v["b_rollback"] > 0), {"phase": ROLLBACK, "b_rollback": 0})
        cleaning = z3.And(runs, phase == CLEANUP)
        stale = {lid: z3.And(v[f"promoted{lid}"], v[f"has1_{lid}"]) for lid in IDS}
        for lid in IDS:
            out[f"cleanup_delete({b},{lid})"] = (z3.And(cleaning, stale[lid], v["alive_old"]), self.delete(OLD, lid))
        flip_ready = z3.And(cleaning, z3.Or(z3.Not(z3.Or(*stale.values())), z3.Not(v["alive_old"])))
        if "single-cas-status-flip" in self.fixes:
            out[f"cleanup_status({b})"] = (flip_ready, {"reg_old": DEPRECATED, "reg_new": ACTIVE, "flips": 2,
                                                     "phase": DONE})
        else:
            out[f"cleanup_status_old({b})"] = (z3.And(flip_ready, v["flips"] == 0), {"reg_old": DEPRECATED, "flips": 1})
            out[f"cleanup_status_new({b})"] = (z3.And(flip_ready, v["flips"] != 0), {"reg_new": ACTIVE, "flips": 2,
                                                                                  "phase": DONE})
        if self.config.rollback:
            out.update(self.rollback_actions(v, b, z3.And(runs, phase == ROLLBACK)))
        return out

    def record(self, v, lid: int, entries, cursor) -> dict:
        """Ledger ``lid`` recorded as built with ``entries`` entries (a cursor ledger, when ``cursor``,
        also in the list cursor PROMOTE works through, once)."""
        listed = {"ncur": v["ncur"] + 1, "cur0": z3.If(v["ncur"] == 0, lid, v["cur0"]),
                  "cur1": z3.If(v["ncur"] == 1, lid, v["cur1"])}
        cursor = z3.And(cursor, *[z3.Not(z3.And(i < v["ncur"], v[f"cur{i}"] == lid)) for i in range(2)])
        return {f"built{lid}": entries, **{k: z3.If(cursor, x, v[k]) for k, x in listed.items()}}

    def build(self, v, b: int, building, lid: int, kind: str) -> dict:
        """BUILD's first step for ``lid`` on broker ``b``: the create, or the verify of a ledger already there."""
        unreadable = z3.Not(z3.And(v["alive_old"], z3.Not(v["closed_old"]), v[f"has1_{lid}"]))
        exists, match = v[f"has2_{lid}"], v[f"n2_{lid}"] == v[f"n1_{lid}"]
        recopy = z3.And(z3.BoolVal("recopy-own-copy" in self.fixes), z3.Not(v[f"alloc2_{lid}"]))
        fails = z3.Or(unreadable, z3.And(exists, z3.Not(match), z3.Not(recopy)))
        created = {f"has2_{lid}": True, f"n2_{lid}": 0, **{f"e2_{lid}_{j}": 0 for j in range(ENTRIES)},
                   f"cp{b}_{lid}": v[f"n1_{lid}"], f"cpk{b}_{lid}": 1 if kind == "cursor" else 0}
        recorded = self.record(v, lid, v[f"n1_{lid}"], z3.BoolVal(kind == "cursor"))
        redo = self.delete(NEW, lid)
        keys = set(created) | set(recorded) | set(redo)

        def pick(k):
            return z3.If(fails, v[k], z3.If(z3.Not(exists), created.get(k, v[k]),
                                            z3.If(match, recorded.get(k, v[k]), redo.get(k, v[k]))))
        changes = {k: pick(k) for k in keys}
        changes[f"failed{lid}"] = z3.Or(v[f"failed{lid}"], fails)
        idle = v[f"cp{b}_{lid}"] == -1
        return {f"build({b},{kind},{lid})": (z3.And(building, self.candidate(v, lid, kind, built_too=True), idle),
                                             changes)}

    def copy_steps(self, v, b: int, building, lid: int) -> dict:
        """BUILD's copy of ``lid`` in progress on broker ``b``: the next entry, then the close and record."""
        out = {}
        copying, done = v[f"cp{b}_{lid}"] != -1, v[f"n2_{lid}"]
        gone = z3.Not(v[f"has2_{lid}"])  # another orchestrator deleted the copy: the write fails, the copy is dropped
        lost = z3.And(z3.Not(gone), z3.Not(z3.And(v["alive_old"], z3.Not(v["closed_old"]), v[f"has1_{lid}"],
                                                  v[f"n1_{lid}"] >= done + 1)))
        added = self.append(v, lid, z3.IntVal(NEW), self.entry(v, OLD, lid, done))
        out[f"build_add({b},{lid})"] = (z3.And(building, copying, done < v[f"cp{b}_{lid}"]), {
            **{k: z3.If(z3.Or(gone, lost), v[k], x) for k, x in added.items()},
            f"failed{lid}": z3.Or(v[f"failed{lid}"], lost),
            **{k: z3.If(z3.Or(gone, lost), x, v[k]) for k, x in self.uncopied(b, (lid,)).items()}})
        out[f"build_record({b},{lid})"] = (z3.And(building, copying, z3.Not(done < v[f"cp{b}_{lid}"])), {
            **self.record(v, lid, v[f"cp{b}_{lid}"], v[f"cpk{b}_{lid}"] == 1), **self.uncopied(b, (lid,))})
        return out

    def entry(self, v, c: int, lid: int, j):
        """Entry ``j`` (symbolic) of ledger ``lid`` on cluster ``c``."""
        out = z3.IntVal(0)
        for i in reversed(range(ENTRIES)):
            out = z3.If(j == i, v[f"e{c}_{lid}_{i}"], out)
        return out

    def enqueue(self, v, lid, target) -> dict:
        out = {"rpcn": v["rpcn"] + 1}
        for i in range(RPCS):
            out[f"rpc{i}_l"] = z3.If(v["rpcn"] == i, lid, v[f"rpc{i}_l"])
            out[f"rpc{i}_t"] = z3.If(v["rpcn"] == i, target, v[f"rpc{i}_t"])
        return out

    def routed_to_new(self, v, lid: int):
        return z3.Or(z3.And(v["cl"] == lid, v["cattr"] == NEW),
                     *[z3.And(there, ledger == lid, attr == NEW) for there, ledger, attr, _ in self.entries(v)])

    def may_revert(self, v, lid):
        """ROLLBACK routes ledger ``lid`` back to the old cluster (fix rollback-only-to-readable-old:
        only if the old cluster can serve it)."""
        if "rollback-only-to-readable-old" not in self.fixes:
            return z3.BoolVal(True)
        return self.readable(v, z3.IntVal(OLD), lid)

    def rollback_actions(self, v, b: int, rolling) -> dict:
        out = {}
        resets = self.variant == "mutant:rollback-resets-hash"
        back = [z3.And(there, v.select("promoted{}", lid, IDS, False), self.may_revert(v, lid))
                for there, lid, _, _ in self.entries(v)]
        out[f"rollback_schema({b})"] = (z3.And(rolling, z3.Or(*[z3.And(x, v[f"sattr{i}"] == NEW)
                                                               for i, x in enumerate(back)])), {
            **{f"sattr{i}": z3.If(x, OLD, v[f"sattr{i}"]) for i, x in enumerate(back)},
            **{f"shash{i}": z3.If(x, 0, v[f"shash{i}"]) for i, x in enumerate(back) if resets},
            "sver": v["sver"] + (self.variant != "mutant:rollback-keeps-version"),
            **{f"reverted{lid}": z3.Or(v[f"reverted{lid}"], *[z3.And(x, e[1] == lid)
                                                              for x, e in zip(back, self.entries(v))])
               for lid in IDS}})
        for lid in IDS:
            out[f"rollback_cursor_send({b},{lid})"] = (z3.And(rolling, v["cl"] == lid, v[f"promoted{lid}"],
                                                            v["cattr"] == NEW, v["rpcn"] == 0,
                                                            self.may_revert(v, lid)),
                                                     self.enqueue(v, lid, OLD))
        copies = {lid: z3.And(v[f"promoted{lid}"], v[f"has2_{lid}"], z3.Not(self.routed_to_new(v, lid)))
                  for lid in IDS}
        for lid in IDS:
            out[f"rollback_delete({b},{lid})"] = (z3.And(rolling, copies[lid]), self.delete(NEW, lid))
        routed = z3.Or(*[z3.And(v[f"promoted{lid}"], self.routed_to_new(v, lid), self.may_revert(v, lid))
                         for lid in IDS])
        out[f"rollback_done({b})"] = (z3.And(rolling, z3.Not(z3.Or(*copies.values())), v["rpcn"] == 0,
                                          z3.Not(routed)), {
            "phase": ROLLED_BACK, **{f"failed{lid}": z3.Or(v[f"failed{lid}"], z3.And(v[f"promoted{lid}"],
                                                                                     self.routed_to_new(v, lid)))
                                     for lid in IDS}})
        return out

    def handle(self, v, lid: int, target: int) -> dict:
        """The owner's promote-cursor handler: 409 on a rolled cursor ledger, else the attribution
        rewritten in ``cursorProperties`` and the znode CASed."""
        popped = {"rpcn": v["rpcn"] - 1, **{f"rpc{i}_{x}": (v[f"rpc{i + 1}_{x}"] if i + 1 < RPCS else 0)
                                            for i in range(RPCS) for x in "lt"}}
        grown = z3.Or(v[f"built{lid}"] == -1, v[f"n1_{lid}"] != v[f"built{lid}"])
        refused = v["i_l"] != lid
        if target == NEW and "promote-cursor-at-copied-lac" in self.fixes:
            refused = z3.Or(refused, grown)
        unreadable = z3.Not(self.may_revert(v, lid)) if target == OLD else z3.BoolVal(False)
        user = 0 if self.variant == "mutant:promote-clears-cursor-props" else v["i_user"]
        rolls = z3.Or(v["o_roll"], target == NEW and "promote-cursor-at-copied-lac" in self.fixes)
        done = {"cattr": target, "cuser": user, "cver": v["cver"] + 1, "i_l": v["cl"], "i_md": v["cmd"],
                "i_attr": target, "i_user": user, "i_ver": v["cver"] + 1, "o_roll": rolls}
        done[f"promoted{lid}" if target == NEW else f"reverted{lid}"] = True
        out = dict(popped)
        for k, x in done.items():
            out[k] = z3.If(z3.And(v["owned"], z3.Not(refused), z3.Not(unreadable)), x, v[k])
        out[f"failed{lid}"] = z3.Or(v[f"failed{lid}"], z3.Not(v["owned"]),
                                    z3.And(v["owned"], z3.Not(refused), unreadable))
        out[f"fallback{lid}"] = z3.Or(v[f"fallback{lid}"], z3.And(v["owned"], refused))
        return out

    # -- traffic (traffic.py) ---------------------------------------------------------------------
    def next_message(self, v):
        """(whether there is one, its ledger, the entries before it in that ledger)."""
        lid = v.select("msg{}", v["consumed"], tuple(range(self.msgs)))
        there = z3.And(v["consumed"] < v["nmsg"], self.in_ml(v, lid))
        return there, lid, self.msg_count(v, lid, v["consumed"])

    def traffic_actions(self, v) -> dict:
        out = {}
        for b in self.brokers:
            out.update(self.owner_traffic(v, b))
            if self.config.move or self.config.restart:
                out.update(self.load_actions(v, b))
        for i, (there, lid, attr, _) in enumerate(self.entries(v)):
            unreadable = z3.Not(self.readable(v, self.resolve(v, attr, 0), lid))
            out[f"read_schema(0,{i})"] = (z3.And(there, unreadable), self.failed_read(v, "schema", lid))
        if self.config.put_schema:
            for b in self.brokers:
                out.update(self.put_schema_actions(v, b))
        return out

    def put_schema_actions(self, v, b: int) -> dict:
        """putSchema through broker ``b``: the schema ledger created on its active cluster and the
        locator read, then the locator CAS (the entry and its stamp together, I1) or its BadVersion."""
        out = {}
        c = self.create_cluster(v, b)
        lid = self.allocated(v, c)
        out[f"put_schema_start({b})"] = (
            z3.And(v[f"up{b}"], v[f"ps_l{b}"] == 0, v["b_put_schema"] > 0, self.reachable(v, c), lid <= MAXID), {
                **self.put_ledger(v, c, lid, (lid,), allocate=True), f"ps_l{b}": lid, f"ps_c{b}": c,
                f"ps_v{b}": v["sver"], **self.spend(v, "put_schema")})
        pending = z3.And(v[f"up{b}"], v[f"ps_l{b}"] != 0)
        stamp = 0 if self.variant == "mutant:stamp-after-create" else v[f"ps_c{b}"]
        appended = {f"s{x}{i}": z3.If(v["sn"] == i, value, v[f"s{x}{i}"]) for i in self.schemas
                    for x, value in (("l", v[f"ps_l{b}"]), ("attr", stamp), ("hash", v[f"ps_l{b}"]))}
        out[f"put_schema_cas({b})"] = (z3.And(pending, v[f"ps_v{b}"] == v["sver"]), {
            **appended, "sn": v["sn"] + 1, "sver": v["sver"] + 1, "sacked": v["sacked"] + 1, f"ps_l{b}": 0,
            f"ps_c{b}": 0, f"ps_v{b}": 0})
        out[f"put_schema_conflict({b})"] = (z3.And(pending, v[f"ps_v{b}"] != v["sver"]), {f"ps_v{b}": v["sver"]})
        return out

    def owner_traffic(self, v, b: int) -> dict:
        """What the topic's owner does when it is broker ``b``."""
        cfg, out = self.config, {}
        owned = z3.And(v["owned"], v["owner"] == b)
        write_ok = self.writable(v, v["w_l"], v["w_c"])
        creatable = self.reachable(v, self.create_cluster(v, b))
        if cfg.publish:
            out[f"publish({b})"] = (z3.And(owned, v["b_publish"] > 0, write_ok, self.room(v, v["w_l"], v["w_c"]),
                                        v["nmsg"] < self.msgs), {
                **self.append(v, v["w_l"], v["w_c"], v["nmsg"]), "nmsg": v["nmsg"] + 1,
                **{f"msg{k}": z3.If(v["nmsg"] == k, v["w_l"], v[f"msg{k}"]) for k in range(self.msgs)},
                **self.spend(v, "publish")})
        if cfg.roll or cfg.move or cfg.restart or cfg.old_down or cfg.close_client:
            c = self.create_cluster(v, b)
            lid = self.allocated(v, c)
            stamp = 0 if self.variant == "mutant:stamp-after-create" else c
            out[f"roll_ledger({b})"] = (z3.And(owned, z3.Or(v["b_roll"] > 0, z3.Not(write_ok)), creatable,
                                            lid <= MAXID, v["mln"] < self.ml), {
                **self.put_ledger(v, c, lid, (), allocate=True), "mln": v["mln"] + 1,
                **{f"ml{i}": z3.If(v["mln"] == i, lid, v[f"ml{i}"]) for i in range(self.ml)},
                **{f"mla{i}": z3.If(v["mln"] == i, stamp, v[f"mla{i}"]) for i in range(self.ml)},
                "w_l": lid, "w_c": c, "b_roll": z3.If(write_ok, v["b_roll"] - 1, v["b_roll"])})
            first = v["ml0"]
            acked = z3.BoolVal(True) if self.variant == "mutant:trim-unacked" else z3.And(
                *[z3.Implies(z3.And(k < v["nmsg"], v[f"msg{k}"] == first), k < v["acked_md"])
                  for k in range(self.msgs)])
            where = self.startup(v, b) if self.variant == "mutant:constructor-bk" else self.resolve(v, v["mla0"], b)
            may = z3.And(owned, v["mln"] > 1, z3.Or(v["w_l"] == 0, v["w_l"] != first), acked)
            shifted = {**{f"ml{i}": (v[f"ml{i + 1}"] if i + 1 < self.ml else 0) for i in range(self.ml)},
                       **{f"mla{i}": (v[f"mla{i + 1}"] if i + 1 < self.ml else 0) for i in range(self.ml)},
                       "mln": v["mln"] - 1}
            for lid in IDS:
                for cl in (OLD, NEW):
                    gone = z3.And(self.has(v, cl, lid), self.reachable(v, cl))
                    deleted = {k: z3.If(gone, x, v[k]) for k, x in self.delete(cl, lid).items()}
                    out[f"trim_ledger({b},{lid},{cl})"] = (z3.And(may, first == lid, where == cl),
                                                         {**deleted, **shifted})
        there, nxt, before = self.next_message(v)
        for lid in IDS:
            out[f"open_ledger({b},{lid})"] = (z3.And(owned, there, nxt == lid, z3.Or(v["r_l"] == 0, v["r_l"] != lid)),
                                            {"r_l": lid, "r_c": self.resolve(v, self.ml_attr(v, lid), b)})
        cluster = v["r_c"]
        if self.variant == "mutant:read-through-active-client":
            cluster = self.of(v, "active", b)
        for lid in IDS:
            for entry in range(self.msgs):
                for cl in (OLD, NEW):
                    ok = self.readable(v, z3.IntVal(cl), lid, entry + 1)
                    caught_up = self.msg_count(v, lid) == entry + 1
                    release = z3.Or(z3.Not(ok), caught_up)
                    out[f"read_entry({b},{lid},{entry},{cl})"] = (
                        z3.And(owned, there, nxt == lid, v["r_l"] == lid, before == entry, cluster == cl), {
                            "consumed": z3.If(ok, v["consumed"] + 1, v["consumed"]),
                            "r_l": z3.If(release, 0, v["r_l"]), "r_c": z3.If(release, 0, v["r_c"]),
                            **self.failed_read(v, "data", lid, entry + 1, when=z3.Not(ok))})
        lagging = v["o_md"] < v["consumed"]
        cursor_ok = z3.And(self.writable(v, v["c_l"], v["c_c"]), z3.Not(v["o_roll"]))
        for md in range(1, self.msgs + 1):
            out[f"mark_delete({b},{md})"] = (z3.And(owned, lagging, cursor_ok, v["consumed"] == md,
                                                  self.room(v, v["c_l"], v["c_c"])), {
                **self.append(v, v["c_l"], v["c_c"], v["consumed"]), "o_md": v["consumed"],
                "acked_md": v["consumed"]})
        c = self.create_cluster(v, b)
        lid = self.allocated(v, c)
        attr = 0 if self.variant == "mutant:stamp-after-create" else c
        out[f"cursor_rollover({b})"] = (z3.And(owned, lagging, z3.Not(cursor_ok), creatable, lid <= MAXID), {
            **self.put_ledger(v, c, lid, (v["consumed"],), allocate=True), "cl": lid, "cmd": v["consumed"],
            "cattr": attr, "cuser": v["i_user"], "cver": v["cver"] + 1, "c_l": lid, "c_c": c, "i_l": lid,
            "i_md": v["consumed"], "i_attr": attr, "i_user": v["i_user"], "i_ver": v["cver"] + 1,
            "o_md": v["consumed"], "o_roll": False, "acked_md": v["consumed"]})
        if cfg.sub_property:
            for key in ("app", "_pulsar.bookieClusterName"):
                refused = key.startswith("_pulsar.") and "reserved-keys-rejected" in self.fixes
                field = "user" if key == "app" else "attr"
                value = USER_VALUE if key == "app" else USER
                kept = {"cattr": v["i_attr"], "cuser": v["i_user"]}
                written = {} if refused else {**kept, f"c{field}": value, "cver": v["cver"] + 1, "i_l": v["cl"],
                                              "i_md": v["cmd"], "i_attr": kept["cattr"], "i_user": kept["cuser"],
                                              f"i_{field}": value, "i_ver": v["cver"] + 1}
                out[f"set_sub_property({b},{key})"] = (z3.And(owned, v["b_sub_property"] > 0),
                                                     {**written, **self.spend(v, "sub_property")})
        if cfg.move:
            out[f"unload_topic({b})"] = (z3.And(owned, v["b_move"] > 0), {**self.unowned(), **self.spend(v, "move")})
        return out

    def load_actions(self, v, b: int) -> dict:
        """Topic load on the broker: the first open of the last ledger (I15), cursor recovery."""
        out = {}
        last = self.ml_last(v)
        first = self.resolve(v, self.ml_last(v, "mla"), b)
        if self.variant == "mutant:constructor-bk":
            first = self.startup(v, b)
        home = self.resolve(v, v["cattr"], b)
        n = self.msg_count(v, last)
        for cl in (OLD, NEW):
            data_lost = z3.And(n > 0, z3.Not(self.readable(v, z3.IntVal(cl), last, n)))
            recovered = self.readable(v, home, v["cl"])
            md = z3.If(recovered, self.last_entry(v, home, v["cl"]), v["cmd"])
            fails = self.failed_read(v, "data", last, n, when=data_lost)
            cursor_fails = self.failed_read(v, "cursor", v["cl"], 1, when=z3.Not(recovered))
            out[f"load_topic({b},{cl})"] = (
                z3.And(z3.Not(v["owned"]), v[f"up{b}"], first == cl, self.reachable(v, first),
                       self.reachable(v, home)), {
                    **fails, **cursor_fails, "owned": True, "owner": b, "w_l": 0, "w_c": 0, "c_l": v["cl"], "c_c": home,
                    "i_l": v["cl"], "i_md": v["cmd"], "i_attr": v["cattr"], "i_user": v["cuser"], "i_ver": v["cver"],
                    "o_md": md, "o_roll": True, "r_l": 0, "r_c": 0, "consumed": md})
        return out

    # -- the properties --------------------------------------------------------------------------
    def invariant(self, prop: str, v):
        if prop == "I1":
            stamped = [z3.Implies(z3.And(i < v["mln"], v[f"ml{i}"] != 1), v[f"mla{i}"] != 0) for i in range(self.ml)]
            return z3.And(*stamped, v["cattr"] != 0, *[z3.Implies(there, attr != 0)
                                                       for there, _, attr, _ in self.entries(v)])
        if prop == "I2":
            return z3.Not(z3.Or(*[v[f"f_{what}{lid}"] for what in FAILURES for lid in IDS]))
        if prop == "I3":
            return z3.And(v["zk"] == 0, v["sn"] == v["sacked"])
        if prop == "I7":  # without the old-reader mutant an old broker keeps the field it does not know
            return z3.BoolVal(True)
        if prop == "I6":
            expected = z3.If(v["directive"], NEW, self.active_status(v, none=0))
            return z3.And(*[z3.Implies(z3.And(v[f"up{b}"], z3.Or(z3.Not(v["directive"]), v[f"epoch{b}"] == 1)),
                                       v[f"active{b}"] == expected) for b in self.brokers])
        if prop == "I8":
            bad = []
            for lid in IDS:
                routed = self.routed_to_new(v, lid)
                differs = z3.Or(z3.Not(v[f"has2_{lid}"]), v[f"n2_{lid}"] < v[f"n1_{lid}"],
                                *[z3.And(j < v[f"n1_{lid}"], v[f"e2_{lid}_{j}"] != v[f"e1_{lid}_{j}"])
                                  for j in range(ENTRIES)])
                bad.append(z3.And(routed, v[f"built{lid}"] != -1, differs))
            return z3.Implies(v["phase"] != 0, z3.Not(z3.Or(*bad)))
        if prop == "I11":
            return z3.Not(z3.Or(*[z3.And(v[f"alloc1_{lid}"], v[f"alloc2_{lid}"]) for lid in IDS]))
        if prop == "I12":
            return z3.If(v["reg_old"] == ACTIVE, 1, 0) + z3.If(v["reg_new"] == ACTIVE, 1, 0) == 1
        if prop == "I13":
            return z3.Implies(v["owned"], z3.And(v["i_l"] == v["cl"], v["i_md"] == v["cmd"], v["i_attr"] == v["cattr"],
                                                 v["i_user"] == v["cuser"], v["i_ver"] == v["cver"]))
        if prop == "I14":
            return z3.And(*[z3.Implies(v[f"orch{b}"], z3.And(v["directive"], v["origin"] == b)) for b in self.brokers])
        if prop == "I16":
            return v["cattr"] != USER
        if prop == "position-not-rewound":
            return z3.Implies(v["owned"], v["o_md"] >= v["acked_md"])
        # no-publish-pause
        c = self.create_cluster(v, v["owner"])
        return z3.Implies(v["owned"], z3.Or(self.writable(v, v["w_l"], v["w_c"]), self.reachable(v, c),
                                            z3.Not(self.alive(v, c))))

    def breaks(self, prop: str, v, label: str, w):
        """The step ``label`` from ``v`` to ``w`` breaks ``prop``."""
        if prop in INVARIANTS:
            return z3.Not(self.invariant(prop, w))
        name, args = (label.split("(") + [""])[:2]
        args = args.rstrip(")").split(",")
        if prop == "I4" and name == "read_entry":
            return int(args[3]) != v["r_c"]
        if prop == "I5" and name == "close_client":
            return self.handle_on(v, OLD)
        if prop == "I9" and name in ("promote_cursor_handle", "promote_cursor_send"):
            return z3.Or(w["cl"] != v["cl"], w["cmd"] != v["cmd"], w["cuser"] != v["cuser"])
        if prop == "I10" and name in ("promote_schema_cas", "rollback_schema"):
            return z3.Or(w["sn"] < v["sn"], *[z3.And(i < v["sn"], z3.Or(w[f"sl{i}"] != v[f"sl{i}"],
                                                                         w[f"shash{i}"] != v[f"shash{i}"]))
                                               for i in self.schemas])
        if prop == "I15" and name in ("load_topic", "trim_ledger"):
            broker = int(args[0])
            if name == "load_topic":
                return int(args[1]) != self.resolve(v, self.ml_last(v, "mla"), broker)
            return int(args[2]) != self.resolve(v, v["mla0"], broker)
        if prop == "build-idempotent" and name in ("build", "build_add"):
            lid = int(args[-1])
            return z3.And(z3.Not(v[f"failed{lid}"]), w[f"failed{lid}"], self.readable(v, z3.IntVal(OLD), lid, 0),
                          z3.Not(v[f"alloc2_{lid}"]))
        if prop == "rollback-keeps-reads" and name in ("rollback_schema", "promote_cursor_handle"):
            back = [z3.And(self.routed_to_new(v, lid), z3.Not(self.routed_to_new(w, lid)),
                           z3.Not(self.readable(v, z3.IntVal(OLD), lid))) for lid in IDS]
            return z3.Or(*back)
        if prop == "rollback-keeps-business-znodes" and name in ("rollback_schema", "rollback_delete",
                                                                 "promote_cursor_handle", "rollback_done"):
            changed = z3.Or(w["cl"] != v["cl"], w["cmd"] != v["cmd"], w["cuser"] != v["cuser"], w["sn"] != v["sn"],
                            *[w[f"s{x}{i}"] != v[f"s{x}{i}"] for x in ("l", "hash") for i in self.schemas],
                            w["mln"] != v["mln"],
                            *[w[f"{p}{i}"] != v[f"{p}{i}"] for p in ("ml", "mla") for i in range(self.ml)])
            return z3.And(v["phase"] == ROLLBACK, changed)
        return z3.BoolVal(False)

    # -- agreement with the Python model ---------------------------------------------------------
    def concrete(self, v, s) -> z3.BoolRef:
        """``v`` fixed to a Python state."""
        from pulsar_verify.models.pip477.state import ATTR_KEY, USER_KEY
        assert len(s.schema) <= len(self.schemas)
        d, p, o = s.directive, s.progress, s.own
        assert d is None or (d[0], d[2]) == ("new", 1)
        user = {None: 0, "a": A, "user": USER_VALUE}
        out = [v["reg_old"] == STATUS.get(s.registry.get("old"), 0),
               v["reg_new"] == STATUS.get(s.registry.get("new"), 0),
               v["directive"] == (d is not None), v["source"] == (CLUSTER[d[3]] if d else 0),
               v["phase"] == (PHASE[p.phase] if p else 0), v["flips"] == (p.status_flips if p else 0),
               v["fenced"] == (s.fenced is not None), v["fence_at"] == (s.fenced or 0),
               v["idgen_old"] == s.idgen["old"], v["idgen_new"] == s.idgen["new"],
               v["alive_old"] == ("old" in s.alive), v["closed_old"] == ("old" in s.closed), v["mln"] == len(s.ml),
               v["cl"] == s.cursor.ledger, v["cmd"] == s.cursor.md, v["cattr"] == CLUSTER[s.cursor.props.get(ATTR_KEY)],
               v["cuser"] == user[s.cursor.props.get(USER_KEY)], v["cver"] == s.cursor.version,
               v["sver"] == s.schema_version, v["sn"] == len(s.schema), v["sacked"] == s.schemas_acked,
               *self.locator(v, "s{}{}", s.schema),
               v["origin"] == (d[1] if d else 0), v["owner"] == (s.owner if o is not None else 0),
               v["owned"] == (o is not None), v["rpcn"] == len(s.rpc), v["ncur"] == (len(p.cursors) if p else 0),
               v["nmsg"] == len(s.msgs), v["consumed"] == s.consumed, v["acked_md"] == s.acked_md,
               v["zk"] == s.zk_writes,
               *[v[f"b_{k}"] == s.budget[k] for k in BUDGETS]]
        for b, x in enumerate(s.brokers):
            out += [v[f"up{b}"] == x.up, v[f"active{b}"] == CLUSTER[x.active], v[f"epoch{b}"] == x.epoch,
                    v[f"req{b}"] == REQUEST[x.request],
                    v[f"orch{b}"] == x.orchestrator, v[f"pread{b}"] == (x.promote_read[0] if x.promote_read else -1),
                    v[f"pread_n{b}"] == (len(x.promote_read[1]) if x.promote_read else 0),
                    *self.locator(v, f"pread_{{}}{b}_{{}}", x.promote_read[1] if x.promote_read else ()),
                    *[v[f"ps_{k}{b}"] == (CLUSTER[q] if k == "c" else q) for k, q in
                      zip("lcv", x.put_schema or (0, None, 0))]]
            assert all(dst == lid for lid, (_, _, dst) in x.copies.items())  # mutant copy-new-id is not expressed
            out += [v[f"cp{b}_{lid}"] == (x.copies[lid][1] if lid in x.copies else -1) for lid in IDS]
            out += [v[f"cpk{b}_{lid}"] == int(lid in x.copies and x.copies[lid][0] == "cursor") for lid in IDS]
        assert "new" in s.alive and "new" not in s.closed and (p is None or len(p.cursors) <= 2)
        assert len(s.rpc) <= RPCS and len(s.ml) <= self.ml and len(s.msgs) <= self.msgs
        if o is None:
            out += [v[k] == 0 for k in ("w_l", "w_c", "c_l", "c_c", "i_l", "i_md", "i_attr", "i_user", "i_ver",
                                        "o_md", "r_l", "r_c")] + [v["o_roll"] == False]  # noqa: E712
        else:
            out += [v["w_l"] == (o.write[0] if o.write else 0), v["w_c"] == (CLUSTER[o.write[1]] if o.write else 0),
                    v["c_l"] == o.cursor[0], v["c_c"] == CLUSTER[o.cursor[1]], v["i_l"] == o.info.ledger,
                    v["i_md"] == o.info.md, v["i_attr"] == CLUSTER[o.info.props.get(ATTR_KEY)],
                    v["i_user"] == user[o.info.props.get(USER_KEY)], v["i_ver"] == o.info.version, v["o_md"] == o.md,
                    v["o_roll"] == o.must_roll, v["r_l"] == (o.read[0] if o.read else 0),
                    v["r_c"] == (CLUSTER[o.read[1]] if o.read else 0)]
        cursors = p.cursors if p else ()
        out += [v[f"cur{i}"] == (cursors[i] if i < len(cursors) else 0) for i in range(2)]
        out += [v[f"ml{i}"] == (s.ml[i][0] if i < len(s.ml) else 0) for i in range(self.ml)]
        out += [v[f"mla{i}"] == (CLUSTER[s.ml[i][1]] if i < len(s.ml) else 0) for i in range(self.ml)]
        out += [v[f"msg{k}"] == (s.msgs[k] if k < len(s.msgs) else 0) for k in range(self.msgs)]
        for i in range(RPCS):
            out += [v[f"rpc{i}_l"] == (s.rpc[i][0] if i < len(s.rpc) else 0),
                    v[f"rpc{i}_t"] == (CLUSTER[s.rpc[i][1]] if i < len(s.rpc) else 0)]
        for lid in IDS:
            out += [v[f"built{lid}"] == (p.built.get(lid, -1) if p else -1)]
            for name in ("sent", "failed", "promoted", "reverted", "fallback"):
                out.append(v[f"{name}{lid}"] == (lid in getattr(p, name) if p else False))
            out += [v[f"f_{what}{lid}"] == ((what, lid) in s.failures) for what in FAILURES]
            out.append(v[f"borrowed{lid}"] == (lid in s.borrowed))
            for c, key in ((OLD, "old"), (NEW, "new")):
                held = s.bk[key].get(lid)
                assert held is None or len(held) <= ENTRIES
                out += [v[f"has{c}_{lid}"] == (held is not None), v[f"alloc{c}_{lid}"] == (lid in s.allocated[key]),
                        v[f"n{c}_{lid}"] == len(held or ()),
                        *[v[f"e{c}_{lid}_{j}"] == (held[j] if held and j < len(held) else 0) for j in range(ENTRIES)]]
        assert all(lid in IDS for c in ("old", "new") for lid in s.bk[c].keys())
        return self.conjunction(out)

    def locator(self, v, fmt: str, entries: tuple) -> list:
        """The index entries held in the variables ``fmt.format(field, i)`` are ``entries``."""
        out = []
        for i in self.schemas:
            e = entries[i] if i < len(entries) else None
            assert e is None or e.entry == 0 and e.schema_version == i
            out += [v[fmt.format("l", i)] == (e.ledger if e else 0), v[fmt.format("attr", i)] == CLUSTER[e and e.attr],
                    v[fmt.format("hash", i)] == (e.hash if e else 0)]
        return out

    @staticmethod
    def label(a) -> str:
        """The encoding's label for a Python action."""
        order = ("broker", "kind", "ledger", "entry", "cluster", "target", "md", "key", "version")
        params = dict(a.params)
        shown = [str(CLUSTER[params[k]] if k in ("cluster", "target") else params[k]) for k in order if k in params]
        return a.name + (f"({','.join(shown)})" if shown else "")


encoding, disagreements = Pip477Steps.at, Pip477Steps.disagreements_of


PRESETS = tuple(Pip477.in_process_presets())  # every in-process bound set: the encoding has room for each
# the bounds whose whole verdicts are obligations, and the variants checked there
CASES = {"cleanup": ("as-written", "all-fixes")}
# the findings are checked by their shortest run up to this length; past it (at bounds without a whole verdict),
# a run of the explorer's length is found by one query (``run_of``): I2 at ``close``, 27 steps, in about 5 minutes
# (showing that none is shorter had not finished after 15). Those findings, their bounds, properties and lengths
# are the catalogue's (``findings/pip-477/index.json``), read, not re-typed.
SHORTEST_UP_TO = 17
LONG = {f.bounds: (f.property, f.length) for f in catalogue("pip-477") if f.length > SHORTEST_UP_TO
        and f.bounds in PRESETS and f.bounds not in CASES and f.property in Pip477Steps.properties}


def run_of_explorers_length(preset: str) -> Verdict:
    prop, length = LONG[preset]
    run = encoding("as-written", preset).run_of(length, prop)
    if run is None:
        return Verdict(UNKNOWN, f"no run of exactly {length} steps breaks {prop}")
    return Verdict(VIOLATED, f"{prop} in {length} steps: {', '.join(run)}")


def verdict(variant: str, preset: str) -> Verdict:
    return encoding(variant, preset).verdict(explorer_depth("pip-477", preset, CASES[preset]) + 1)


OBLIGATIONS = [
    Obligation("pip-477", f"steps-bounded-{preset}", f"each property's shortest breaking run of the whole model at "
               f"the {preset} bounds, step for step (up to the explorer's depth there plus one)", SECTION,
               lambda variant=variant, preset=preset: verdict(variant, preset), (variant,), minutes=True)
    for preset, variants in CASES.items() for variant in variants
] + [
    Obligation("pip-477", f"steps-run-{preset}", f"a run of the whole model at the {preset} bounds, step for step, of "
               f"the explorer's length ({length} steps) that breaks {prop}", SECTION,
               lambda preset=preset: run_of_explorers_length(preset), ("as-written",), minutes=True)
    for preset, (prop, length) in LONG.items()
]
