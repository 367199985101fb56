"""Swarm checking, for bounds beyond exhaustive search: many seeded random walks.

Walk ``i`` of a swarm with seed ``S`` draws every choice from ``random.Random(walk_seed(S, i))``
over successors listed in a fixed order, so a walk is the same in every process and on every
engine: the in-process loop and the Spark job (one task per slice of walks) run the same
``walk`` function on the same model code and give the same answers. Each walk checks every
invariant and action property at every step (and deadlocks) and goes on past a violation, as the
exhaustive search does, noting the first step at which it breaks each property; the shortest
counterexample of each property is kept and written as ITF, with the seed of the walk that found it.
"""
from __future__ import annotations

import random
import time
from hashlib import blake2b

import attrs

from pulsar_verify.explorer import states_along
from pulsar_verify.results import Violation
from pulsar_verify.model import DEADLOCK, Model

from .bfs import _model, model_spec


def walk_seed(seed: int, index: int) -> int:
    """The seed of walk ``index``: stable across processes (never ``hash()``)."""
    return int.from_bytes(blake2b(f"{seed}/{index}".encode(), digest_size=8).digest(), "little")


@attrs.frozen
class Walk:
    seed: int
    init: int  # index into init_states()
    actions: tuple  # the actions taken, in order
    violated: tuple = ()  # (property, steps): the first step of the walk that broke each property


def walk(model: Model, seed: int, steps: int) -> Walk:
    rng = random.Random(seed)
    inits = model.init_states()
    init = rng.randrange(len(inits))
    s = inits[init]
    broken: dict[str, int] = {}
    for prop in model.invariants:
        if not prop.check(model, s):
            broken.setdefault(prop.id, 0)
    taken = []
    for _ in range(steps):
        succ = model.successors(s)
        if not succ:
            if not model.is_terminal(s):
                broken.setdefault(DEADLOCK.id, len(taken))
            break
        succ = sorted(succ, key=lambda at: str(at[0]))  # the model's order may follow a salted set
        a, t = succ[rng.randrange(len(succ))]
        taken.append(a)
        for prop in model.action_properties:
            if not prop.check(model, s, a, t):
                broken.setdefault(prop.id, len(taken))
        for prop in model.invariants:
            if not prop.check(model, t):
                broken.setdefault(prop.id, len(taken))
        s = t
    return Walk(seed, init, tuple(taken), tuple(broken.items()))


def _walks(spec, seed, steps, indexes):
    model = _model(spec)
    for i in indexes:
        yield walk(model, walk_seed(seed, i), steps)


@attrs.define
class SwarmResult:
    model: str
    variant: str
    config: dict
    engine: str
    walks: int
    steps: int
    seed: int
    total_steps: int = 0
    seconds: float = 0.0
    violations: list = attrs.Factory(list)  # Violation, shortest per property
    seeds: dict = attrs.Factory(dict)  # property id -> seed of the walk that found it
    trace_files: list = attrs.Factory(list)

    def summary(self) -> dict:
        return {"model": self.model, "variant": self.variant, "config": self.config, "engine": self.engine,
                "walks": self.walks, "steps_per_walk": self.steps, "seed": self.seed,
                "total_steps": self.total_steps, "seconds": round(self.seconds, 3),
                "steps_per_second": round(self.total_steps / self.seconds, 1) if self.seconds else 0.0,
                "violations": [{**v.as_dict(), "walk_seed": self.seeds[v.prop.id]} for v in self.violations],
                "trace_files": [str(p) for p in self.trace_files]}


def swarm(model: Model, *, walks: int, steps: int, seed: int, engine: str = "local", master: str = "local[*]",
          spark=None) -> SwarmResult:
    started = time.perf_counter()
    spec = model_spec(model)
    if engine == "spark":
        from .session import spark_session
        sc = (spark or spark_session(master)).sparkContext
        engine = f"spark[{sc.master}]"
        parts = max(1, min(walks, sc.defaultParallelism * 4))
        done = (sc.parallelize(range(walks), parts)
                .mapPartitions(lambda idx: _walks(spec, seed, steps, list(idx))).collect())
    else:
        done = list(_walks(spec, seed, steps, range(walks)))
    result = SwarmResult(model.name, model.config.variant_name, model.config.as_dict(), engine, walks, steps, seed)
    result.total_steps = sum(len(w.actions) for w in done)
    best: dict[str, tuple[int, Walk]] = {}
    for w in done:  # the shortest per property; ties go to the earlier walk
        for pid, length in w.violated:
            if pid not in best or length < best[pid][0]:
                best[pid] = (length, w)
    for pid, (length, w) in best.items():
        prop = DEADLOCK if pid == DEADLOCK.id else model.property(pid)
        states = states_along(model, model.init_states()[w.init], w.actions[:length])
        result.violations.append(Violation(prop, states, list(w.actions[:length])))
        result.seeds[pid] = w.seed
    result.violations.sort(key=lambda v: (v.length, v.prop.id))
    result.seconds = time.perf_counter() - started
    return result
