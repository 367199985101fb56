"""The model contract every protocol model implements.

A model (after Stateright's ``StateMachine``) has a name, a typed config with
bounds, fault switches and a ``variant``, initial states, ``actions(state)``
enumerating enabled actions as plain data, and a deterministic
``next_state(state, action)``. Properties are registered on the model class
with an id, a one-line statement and the PIP section they come from.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple, Sequence

import attrs


class Action(NamedTuple):
    """An action as plain data: a label and its parameters, e.g. ``commit(txn=1)``."""

    name: str
    params: tuple = ()

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in self.params)
        return f"{self.name}({args})"

    def param(self, key: str) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)


def act(name: str, **params: Any) -> Action:
    """Build an action; parameters keep the order they are given in."""
    return Action(name, tuple(params.items()))


class UsageError(Exception):
    """A bad request from the user (unknown model, variant, bound...): one line, exit 2."""


@attrs.frozen
class Property:
    """A registered property.

    kind: ``invariant`` (predicate over a state), ``action`` (over state,
    action, next state) or ``liveness`` (``trigger`` leads to ``goal`` under
    weak fairness of the ``fair`` action names).
    """

    id: str
    statement: str
    section: str
    kind: str
    check: Callable | None = None
    trigger: Callable | None = None
    goal: Callable | None = None
    fair: tuple = ()
    variants: tuple | None = None  # None: every variant

    def applies_to(self, variant: str) -> bool:
        return self.variants is None or variant in self.variants


@attrs.frozen
class Param:
    default: Any
    help: str
    lo: int | None = None
    hi: int | None = None
    choices: tuple | None = None  # the allowed values of a str setting

    def parse(self, name: str, text: str) -> Any:
        kind = type(self.default)
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise UsageError(f"--set {name}: expected true or false, got {text!r}")
        if kind is int:
            try:
                value = int(text)
            except ValueError:
                raise UsageError(f"--set {name}: expected an integer, got {text!r}") from None
            if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
                raise UsageError(f"--set {name}={value}: out of range [{self.lo}, {self.hi}]")
            return value
        if self.choices is not None and text not in self.choices:
            raise UsageError(f"--set {name}={text}: expected one of {', '.join(self.choices)}")
        return text


@attrs.frozen
class Variant:
    name: str
    description: str
    kind: str = "fix"  # as-written | fix | mutant (deliberately broken, for checking the checks)


def variants_of(as_written: str, fixes: dict[str, str], mutants: dict[str, str]) -> tuple:
    """``as-written``, each named fix, ``all-fixes`` (when there are several), then the mutants."""
    out = [Variant("as-written", as_written, "as-written")]
    out += [Variant(name, desc, "fix") for name, desc in fixes.items()]
    if len(fixes) > 1:
        out.append(Variant("all-fixes", "every fix above together", "fix"))
    return tuple(out + [Variant(name, desc, "mutant") for name, desc in mutants.items()])


class Config:
    """Bounds, fault switches and the variant of one model instance (immutable)."""

    __slots__ = ("variant", "_values")

    def __init__(self, variant: str, values: dict[str, Any]):
        object.__setattr__(self, "variant", variant)
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        raise AttributeError("Config is immutable")

    def as_dict(self) -> dict[str, Any]:
        return dict(sorted(self._values.items()))

    def __repr__(self) -> str:
        vals = " ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"variant={self.variant} {vals}"


class Model:
    """Base class of every protocol model. Subclasses set the class attributes and
    implement ``init_states``, ``actions`` and ``next_state``."""

    name: str = ""
    title: str = ""
    source: str = ""  # the spec file in shared/seeds
    variants: Sequence[Variant] = (Variant("as-written", "the protocol as the text describes it", "as-written"),)
    params: dict[str, Param] = {}
    # Named bound sets ("presets"): each a stated set of bounds, small enough for the
    # in-process explorer unless listed in ``large_presets`` (for Spark).
    presets: dict[str, dict[str, Any]] = {"default": {}}
    large_presets: Sequence[str] = ()
    # Bounds beyond the exhaustive ones for the Hypothesis machine (tests and review).
    hypothesis_bounds: dict[str, Any] = {}
    # For sequence diagrams: action label -> "Sender->>Receiver", where a name may use the action's
    # parameters ("Broker{broker}"); a label not listed is drawn as a step of the system.
    sequence: dict[str, str] = {}
    properties: list[Property] = []
    action_labels: Sequence[str] = ()  # every action label the model can produce

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.properties = list(cls.properties)  # each model owns its registry

    def __init__(self, config: Config):
        self.config = config
        self.props = [p for p in self.properties if p.applies_to(config.variant)]
        self.invariants = [p for p in self.props if p.kind == "invariant"]
        self.action_properties = [p for p in self.props if p.kind == "action"]
        self.liveness = [p for p in self.props if p.kind == "liveness"]

    # -- configuration -------------------------------------------------------
    @classmethod
    def in_process_presets(cls) -> list[str]:
        """The named bound sets small enough for the in-process explorer."""
        return [p for p in cls.presets if p not in cls.large_presets]

    @classmethod
    def variant_names(cls) -> list[str]:
        return [v.name for v in cls.variants]

    @classmethod
    def make_config(cls, variant: str = "as-written", overrides: dict[str, str] | None = None,
                    values: dict[str, Any] | None = None, preset: str = "default") -> Config:
        if variant not in cls.variant_names():
            raise UsageError(f"unknown variant {variant!r} of model {cls.name} "
                             f"(known: {', '.join(cls.variant_names())})")
        if preset not in cls.presets:
            raise UsageError(f"unknown bounds {preset!r} of model {cls.name} (known: {', '.join(cls.presets)})")
        vals = {k: p.default for k, p in cls.params.items()}
        vals.update(cls.presets[preset])
        for key, value in (values or {}).items():
            if key not in cls.params:
                raise UsageError(f"unknown setting {key!r} for model {cls.name} "
                                 f"(known: {', '.join(cls.params) or 'none'})")
            vals[key] = value
        for key, text in (overrides or {}).items():
            if key not in cls.params:
                raise UsageError(f"unknown setting {key!r} for model {cls.name} "
                                 f"(known: {', '.join(cls.params) or 'none'})")
            vals[key] = cls.params[key].parse(key, text)
        return Config(variant, vals)

    # -- property registration ---------------------------------------------
    @classmethod
    def invariant(cls, id: str, statement: str, section: str, variants: tuple | None = None):
        def register(fn: Callable[["Model", Any], bool]):
            cls.properties.append(Property(id, statement, section, "invariant", fn, variants=variants))
            return fn
        return register

    @classmethod
    def action_property(cls, id: str, statement: str, section: str, variants: tuple | None = None):
        def register(fn: Callable[["Model", Any, Action, Any], bool]):
            cls.properties.append(Property(id, statement, section, "action", fn, variants=variants))
            return fn
        return register

    @classmethod
    def leads_to(cls, id: str, statement: str, section: str, *, goal: Callable, fair: Iterable[str],
                 trigger: Callable | None = None, variants: tuple | None = None) -> None:
        """Register ``trigger ~> goal`` (default trigger: every state), assuming the
        ``fair`` actions weakly fair."""
        cls.properties.append(Property(id, statement, section, "liveness", trigger=trigger, goal=goal,
                                       fair=tuple(fair), variants=variants))

    # -- the state machine -------------------------------------------------
    def init_states(self) -> list[Any]:
        raise NotImplementedError

    def actions(self, state) -> Iterable[Action]:
        raise NotImplementedError

    def next_state(self, state, action: Action):
        """The unique successor of ``state`` under an enabled ``action``."""
        raise NotImplementedError

    def successors(self, state) -> list[tuple[Action, Any]]:
        """Every enabled action with its successor. Models may override this for
        speed; tests check it agrees with ``actions``/``next_state``."""
        return [(a, self.next_state(state, a)) for a in self.actions(state)]

    def action_names(self) -> list[str]:
        """Labels this variant can fire; one that never fires is reported (usually a modelling error)."""
        return list(self.action_labels)

    def is_terminal(self, state) -> bool:
        """A state with no successor that is an intended end, not a deadlock."""
        return False

    def canonicalize(self, state):
        """Symmetry reduction: a representative of the state's symmetry class."""
        return state

    def property(self, pid: str) -> Property:
        for p in self.props:
            if p.id == pid:
                return p
        raise KeyError(pid)


class ComposedModel(Model):
    """A model whose actions come from several modules, one per component of the protocol;
    each module has ``actions(model, state)`` and ``APPLY`` (label -> ``fn(model, state, action)``)."""

    modules: Sequence = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "modules" in cls.__dict__ and "action_labels" not in cls.__dict__:
            cls.action_labels = tuple(sorted({name for mod in cls.modules for name in mod.APPLY}))

    def __init__(self, config: Config):
        super().__init__(config)
        self._apply = {name: fn for mod in self.modules for name, fn in mod.APPLY.items()}

    def actions(self, state) -> Iterable[Action]:
        for mod in self.modules:
            yield from mod.actions(self, state)

    def next_state(self, state, action: Action):
        return self._apply[action.name](self, state, action)
