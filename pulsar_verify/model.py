"""The model contract every protocol model implements.

A model (after Stateright's ``StateMachine``) has a name, a typed config with
bounds, fault switches and a ``variant``, initial states, ``actions(state)``
enumerating enabled actions as plain data, and a deterministic
``next_state(state, action)``. Its properties are declared once, as data: a
``PropertySet`` named ``PROPERTIES`` in the module the class names in
``properties_from``. Nothing imported before or after can change them.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import attrs

from .asked import AskedFixes, AskedName

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


_new_action = tuple.__new__  # a NamedTuple's own constructor is a Python function: one frame per action


def act(name: str, **params: Any) -> Action:
    """Build an action; parameters keep the order they are given in."""
    return _new_action(Action, (name, tuple(params.items())))


class UsageError(Exception):
    """A bad request from the user (unknown model, variant, bound...): one line, exit 2."""


class ModelDefinitionError(UsageError):
    """A model whose declaration names something it does not have (an action in a fairness set,
    a variant, a duplicate property id): one line naming it, exit 2."""


# The kinds of action a property may speak of. A model declares which of its actions are of each kind
# (``Model.action_kinds``), once, beside its actions; a property that speaks of a kind (``about``) then
# constrains every action of it, so an action added to the kind later is constrained without a word more.
ACTION_KINDS = {
    "deliver": "puts an entry where a consumer or a reader takes it: dispatch, replay, redelivery, a reader's read",
    "skip": "has a dispatcher pass over an entry as aborted (filter it), without delivering it",
    "answer": "tells a client or an application how its request ended (a reply, a refusal, an error, the answer "
              "to a query): what it acts on next",
}


@attrs.frozen
class Property:
    """A registered property.

    kind: ``invariant`` (predicate over a state), ``action`` (over state,
    action, next state), ``liveness`` (``trigger`` leads to ``goal`` under
    weak fairness of the ``fair`` action names) or ``sometimes`` (a predicate
    over a state that some run reaches: what the PIP says a user can do; after
    Stateright's ``Property::sometimes``). A declared property knows its
    model, and travels between processes by reference: (model, id).
    """

    id: str
    statement: str
    section: str
    kind: str
    check: Callable | None = None
    trigger: Callable | None = None
    goal: Callable | None = None
    fair: tuple = ()
    model: str = ""  # the model that declares it (set when the declaration is read)
    on: frozenset = frozenset()  # an action property: the labels it constrains (empty: every step)
    about: frozenset = frozenset()  # the kinds of action it speaks of (``ACTION_KINDS``): it constrains all of them

    def __reduce__(self):
        if not self.model:  # object's, by name: a compiled attrs class has no ``__class__`` cell for super()
            return object.__reduce__(self)
        return _declared_property, (self.model, self.id)


def _only_on(labels: frozenset, fn: Callable) -> Callable:
    """``fn`` on the steps labelled in ``labels``; every other step holds the property."""
    def check(model, s, a, t):
        return a.name not in labels or fn(model, s, a, t)
    check.__name__, check.__doc__, check.__wrapped__ = fn.__name__, fn.__doc__, fn
    return check


class StepChecks(dict):
    """``checks[label]``: the (index, property) of the action properties in ``props`` that constrain a step
    labelled ``label``, computed on first use (a dict: the explorers' lookup per step is a subscript)."""

    def __init__(self, props: Sequence[Property]):
        super().__init__()
        self.props = props

    def __missing__(self, label: str) -> list:
        out = self[label] = [(i, p) for i, p in enumerate(self.props) if not p.on or label in p.on]
        return out


def _declared_property(model: str, pid: str) -> "Property":
    from .registry import model_class
    return next(p for p in model_class(model).declared_properties() if p.id == pid)


DEADLOCK = Property("deadlock", "Every non-terminal state has a successor", "-", "deadlock")


class Released:
    """The goal "the trigger no longer holds". The explorers evaluate the trigger once per state for
    both (``explorer.goal_flags``); called, it is the negation."""

    __slots__ = ("trigger",)

    def __init__(self, trigger: Callable):
        self.trigger = trigger

    def __call__(self, model, state) -> bool:
        return not self.trigger(model, state)


class PropertySet:
    """A model's properties in the order they are declared, each with its id, one-line
    statement and the PIP section it comes from. A module declares one, ``PROPERTIES``.
    Beside them, its targets: states a bug report describes, for ``explore --target``."""

    def __init__(self):
        self.items: list[Property] = []
        self.targets: list = []

    def invariant(self, id: str, statement: str, section: str, *, about: Iterable[str] = ()):
        """Declare a predicate over a state. ``about``: the kinds of action whose outcome it judges (a state
        predicate judges every step that reaches a state)."""
        def register(fn: Callable[["Model", Any], bool]):
            self.items.append(Property(id, statement, section, "invariant", fn, about=frozenset(about)))
            return fn
        return register

    def action_property(self, id: str, statement: str, section: str, *, on: Iterable[str] = (),
                        about: Iterable[str] = ()):
        """Declare a predicate over (state, action, next state). ``on``: the action labels it constrains, when
        not every step: any other step holds it (its ``check`` says so without calling ``fn``), so the explorers
        do not evaluate it there (``StepChecks``). ``about``: kinds of action (``ACTION_KINDS``) it constrains,
        every action the model declares of each (``Model.action_kinds``), added to ``on`` when the model reads
        its declaration."""
        def register(fn: Callable[["Model", Any, Action, Any], bool]):
            labels = frozenset(on)
            self.items.append(Property(id, statement, section, "action", _only_on(labels, fn) if labels else fn,
                                       on=labels, about=frozenset(about)))
            return fn
        return register

    def sometimes(self, id: str, statement: str, section: str):
        """Declare that some run reaches a state where ``fn(model, state)`` holds and no invariant is
        broken: its shortest example is kept, and a complete search that meets none breaks it. Decided
        only by a complete search."""
        def register(fn: Callable[["Model", Any], bool]):
            self.items.append(Property(id, statement, section, "sometimes", fn))
            return fn
        return register

    def leads_to(self, id: str, statement: str, section: str, *, fair: Iterable[str], goal: Callable | None = None,
                 trigger: Callable | None = None, about: Iterable[str] = ()) -> None:
        """Declare ``trigger ~> goal``, assuming the ``fair`` actions weakly fair. Default trigger: every
        state; default goal: the trigger no longer holds (``Released``: evaluated once with it). ``about``: the
        kinds of action whose coming it promises."""
        if goal is None:
            if trigger is None:
                raise ModelDefinitionError(f"liveness property {id!r} has neither a trigger nor a goal")
            goal = Released(trigger)
        self.items.append(Property(id, statement, section, "liveness", trigger=trigger, goal=goal, fair=tuple(fair),
                                   about=frozenset(about)))

    def target(self, name: str, statement: str, source: str):
        """Declare a target (``pulsar_verify.target``): ``fn(model, state)`` holds in the state described."""
        def register(fn: Callable[["Model", Any], bool]):
            from .target import Target
            if any(t.name == name for t in self.targets):
                raise ModelDefinitionError(f"target {name!r} is declared twice")
            self.targets.append(Target(name, statement, source, fn))
            return fn
        return register


@attrs.frozen
class Param:
    default: Any
    help: str
    lo: int | None = None
    hi: int | None = None
    choices: tuple | None = None  # the allowed values of a str setting

    def parse(self, name: str, text: str) -> Any:
        """A value given as text (``--set name=text``), checked as ``check`` does."""
        kind = type(self.default)
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise UsageError(f"setting {name}: expected true or false, got {text!r}")
        if kind is int:
            try:
                return self.check(name, int(text))
            except ValueError:
                raise UsageError(f"setting {name}: expected an integer, got {text!r}") from None
        return self.check(name, text)

    def check(self, name: str, value: Any) -> Any:
        """A typed value (from a trace file, or parsed): of the default's type, within range or choices."""
        kind = type(self.default)
        if type(value) is not kind:  # bool is not an int here, nor 1.7 an int
            raise UsageError(f"setting {name}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
        if kind is int and ((self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi)):
            raise UsageError(f"setting {name}={value}: out of range [{self.lo}, {self.hi}]")
        if kind is str and self.choices is not None and value not in self.choices:
            raise UsageError(f"setting {name}={value}: expected one of {', '.join(self.choices)}")
        return value


@attrs.frozen
class Variant:
    """One version of a model's design. ``fixes`` is the set of fixes it applies, computed
    here once: none as written, its own for a fix, all of them for ``all-fixes``. A mutant
    is ``all-fixes`` plus one deliberate mistake (named by the variant), so a property it
    breaks is broken by that mistake alone: every property holds under ``all-fixes``."""

    name: str
    description: str
    kind: str = "fix"  # as-written | fix | mutant (deliberately broken, for checking the checks)
    fixes: frozenset = frozenset()


def variants_of(as_written: str, fixes: dict[str, str], mutants: dict[str, str]) -> tuple:
    """``as-written``, each named fix, ``all-fixes`` (when there is any fix), then the mutants."""
    every = frozenset(fixes)
    out = [Variant("as-written", as_written, "as-written")]
    out += [Variant(name, desc, "fix", frozenset({name})) for name, desc in fixes.items()]
    if fixes:
        out.append(Variant("all-fixes", "every fix above together", "fix", every))
    return tuple(out + [Variant(name, desc, "mutant", every) for name, desc in mutants.items()])


class Config:
    """Bounds, fault switches and the variant of one model instance (immutable). Each value is an
    attribute of the instance (``config.txns``): models read them on every step. Models read the
    variant as ``config.variant``; the checker reads its name as ``config.variant_name``, which is
    the same string unless the run records what the model asks of its variant (``asking``)."""

    def __init__(self, variant: str, values: dict[str, Any]):
        clash = {"variant", "variant_name", "questions", "_values", "as_dict", "asking"} & set(values)
        if clash:
            raise ModelDefinitionError(f"a model setting may not be named {sorted(clash)[0]!r}")
        self.__dict__.update(values, variant=variant, variant_name=variant, questions=None, _values=dict(values))

    def asking(self, questions) -> "Config":
        """This config for a run that notes each question the model asks of its variant in ``questions``
        (``pulsar_verify.asked``)."""
        out = Config(self.variant_name, self._values)
        out.__dict__.update(variant=AskedName(self.variant_name, questions), questions=questions)
        return out

    def __setattr__(self, key, value):
        raise AttributeError("Config is immutable")

    def as_dict(self) -> dict[str, Any]:
        return dict(sorted(self._values.items()))

    def __repr__(self) -> str:
        vals = " ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"variant={self.variant_name} {vals}"


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
    action_labels: Sequence[str] = ()  # every action label the model can produce
    # kind (``ACTION_KINDS``) -> the labels of the model's actions of that kind
    action_kinds: dict[str, Sequence[str]] = {}
    # Symmetry reduction: each parameter counting actors that ``canonicalize`` treats as interchangeable
    # (``pulsar_verify.symmetry``), with the argument from the PIP text that they are.
    interchangeable: dict[str, str] = {}
    # The module whose ``PROPERTIES`` (a PropertySet) are this model's properties; by default
    # the model's own module.
    properties_from: str = ""
    checks_deadlock: bool = True  # every run checks deadlock freedom (a target search does not)

    def __init__(self, config: Config):
        self.config = config
        fixes = self.variant_named(config.variant_name).fixes
        if config.questions is not None:
            fixes = AskedFixes(fixes, config.questions)
        self.fixes = fixes
        self.props = list(self.declared_properties())
        self.invariants = [p for p in self.props if p.kind == "invariant"]
        self.action_properties = [p for p in self.props if p.kind == "action"]
        self.liveness = [p for p in self.props if p.kind == "liveness"]
        self.sometimes = [p for p in self.props if p.kind == "sometimes"]
        self.reduction = self.symmetry()

    def symmetry(self) -> str:
        """The symmetry a search of this configuration reduces by, in words: each interchangeable
        count of 2 or more; '' when there is none (the search is then the full one)."""
        return ", ".join(f"{getattr(self.config, key)} {key} interchangeable"
                         for key in self.interchangeable if getattr(self.config, key) >= 2)

    def full_search(self) -> "Model":
        """This model without symmetry reduction (``--no-reduction``)."""
        self.reduction = ""
        return self

    # -- declaration -----------------------------------------------------------
    @classmethod
    def _declaration(cls) -> PropertySet:
        module = importlib.import_module(cls.properties_from or cls.__module__)
        declared = getattr(module, "PROPERTIES", None)
        if not isinstance(declared, PropertySet):
            raise ModelDefinitionError(f"model {cls.name}: {module.__name__} declares no PROPERTIES "
                                       f"(a PropertySet)")
        return declared

    @classmethod
    def declared_targets(cls) -> tuple:
        """The states the model's bug reports describe (``explore --target``), as declared."""
        return tuple(cls._declaration().targets)

    @classmethod
    def declared_properties(cls) -> tuple[Property, ...]:
        """The model's properties, read once from ``properties_from`` and checked against the
        model: the same whatever else was imported before, and under any reload."""
        cached = cls.__dict__.get("_declared")
        if cached is None:
            cached = tuple(cls._about_kinds(attrs.evolve(p, model=cls.name)) for p in cls._declaration().items)
            cls.check_declaration(cached)
            cls._declared = cached
        return cached

    @classmethod
    def labels_of(cls, kinds: Iterable[str]) -> frozenset:
        """The labels of the model's actions of ``kinds``."""
        return frozenset(label for kind in kinds for label in cls.action_kinds.get(kind, ()))

    @classmethod
    def _about_kinds(cls, p: Property) -> Property:
        """An action property ``about`` kinds of action constrains every action of those kinds (and those it
        names in ``on``)."""
        if p.kind != "action" or not p.about:
            return p
        on = p.on | cls.labels_of(p.about)
        return attrs.evolve(p, on=on, check=_only_on(on, p.check.__wrapped__ if p.on else p.check))

    @classmethod
    def check_declaration(cls, props: Sequence[Property]) -> None:
        """Every name a declaration uses is the model's own: property ids are unique, each
        fairness set and each action property's ``on`` names actions the model has, and each
        interchangeable count is a parameter of a model that implements ``canonicalize``."""
        for key in cls.interchangeable:
            if key not in cls.params:
                raise ModelDefinitionError(f"model {cls.name}: interchangeable {key!r} is no parameter of it")
            if cls.canonicalize is Model.canonicalize:
                raise ModelDefinitionError(f"model {cls.name} declares interchangeable {key!r} but no canonicalize")
        for kind, labels in cls.action_kinds.items():
            if kind not in ACTION_KINDS:
                raise ModelDefinitionError(f"model {cls.name}: action kind {kind!r} is none of "
                                           f"{', '.join(ACTION_KINDS)}")
            unknown = sorted(set(labels) - set(cls.action_labels))
            if unknown:
                raise ModelDefinitionError(f"model {cls.name}: action kind {kind!r} names {', '.join(unknown)}, "
                                           f"which the model has no action for")
        seen = set()
        for p in props:
            if p.id in seen:
                raise ModelDefinitionError(f"model {cls.name}: property {p.id!r} is declared twice")
            seen.add(p.id)
            if p.kind not in ("invariant", "action", "liveness", "sometimes"):
                raise ModelDefinitionError(f"model {cls.name}: property {p.id!r} has unknown kind {p.kind!r}")
            unknown = sorted(set(p.fair) - set(cls.action_labels))
            if unknown:
                raise ModelDefinitionError(f"model {cls.name}: the fairness set of {p.id!r} names "
                                           f"{', '.join(unknown)}, which the model has no action for")
            unknown = sorted(p.on - set(cls.action_labels))
            if unknown:
                raise ModelDefinitionError(f"model {cls.name}: action property {p.id!r} is declared on "
                                           f"{', '.join(unknown)}, which the model has no action for")
            unknown = sorted(kind for kind in p.about if not cls.action_kinds.get(kind))
            if unknown:
                raise ModelDefinitionError(f"model {cls.name}: property {p.id!r} speaks of {', '.join(unknown)} "
                                           f"actions, a kind the model declares none of")
            if p.kind == "liveness" and not p.fair:
                raise ModelDefinitionError(f"model {cls.name}: liveness property {p.id!r} has no fair action")

    @classmethod
    def checked_properties(cls) -> tuple[Property, ...]:
        """What every exploration of the model checks: its declared properties, then deadlock freedom."""
        return (*cls.declared_properties(), DEADLOCK)

    @classmethod
    def property_ids(cls) -> list[str]:
        return [p.id for p in cls.checked_properties()]

    @classmethod
    def variant_named(cls, name: str) -> Variant:
        for v in cls.variants:
            if v.name == name:
                return v
        raise UsageError(f"unknown variant {name!r} of model {cls.name} (known: {', '.join(cls.variant_names())})")

    @classmethod
    def baseline(cls) -> str:
        """The design as written (``as-written``; a model of an implementation names its own): the
        first variant, and the default of every command."""
        return cls.variants[0].name

    @classmethod
    def best_variant(cls) -> str | None:
        """``all-fixes``: the variant every property must hold for (None for a model without fixes)."""
        return "all-fixes" if "all-fixes" in cls.variant_names() else None

    # -- configuration -------------------------------------------------------
    @classmethod
    def in_process_presets(cls) -> list[str]:
        """The named bound sets small enough for the in-process explorer."""
        return [p for p in cls.presets if p not in cls.large_presets]

    @classmethod
    def variant_names(cls) -> list[str]:
        return [v.name for v in cls.variants]

    @classmethod
    def make_config(cls, variant: str | None = None, overrides: dict[str, str] | None = None,
                    values: dict[str, Any] | None = None, preset: str = "default") -> Config:
        """A config: the preset's bounds, then ``values`` (typed, e.g. from a trace file) and
        ``overrides`` (text, from ``--set``), each checked against the parameter's type and range."""
        variant = variant or cls.baseline()
        cls.variant_named(variant)
        if preset not in cls.presets:
            raise UsageError(f"unknown bounds {preset!r} of model {cls.name} (known: {', '.join(cls.presets)})")
        vals = {k: p.default for k, p in cls.params.items()}
        vals.update(cls.presets[preset])
        for key, value in (values or {}).items():
            vals[key] = cls._param(key).check(key, value)
        for key, text in (overrides or {}).items():
            vals[key] = cls._param(key).parse(key, text)
        return Config(variant, vals)

    @classmethod
    def _param(cls, key: str) -> Param:
        if key not in cls.params:
            raise UsageError(f"unknown setting {key!r} for model {cls.name} "
                             f"(known: {', '.join(cls.params) or 'none'})")
        return cls.params[key]

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
        """Labels this variant can fire at these bounds; one that never fires is reported (usually a modelling
        error), and a system action among them fails the run (``system_actions``)."""
        return list(self.action_labels)

    @classmethod
    def system_actions(cls) -> frozenset:
        """The actions the system takes of its own accord (not a client's, an operator's or a fault's): those its
        liveness properties hold weakly fair. One the model declares at some bounds (``action_names``) that a whole
        search there never takes means the model checks a weaker system than it says: a timer, a retry or a
        recovery that cannot happen. The run fails with it."""
        return frozenset(a for p in cls.declared_properties() if p.kind == "liveness" for a in p.fair)

    def never_fired(self, coverage) -> tuple[list[str], list[str]]:
        """The actions declared at these bounds that a search with ``coverage`` never took, and the system
        actions among them."""
        never = sorted(set(self.action_names()) - set(coverage))
        system = self.system_actions()
        return never, [a for a in never if a in system]

    def is_terminal(self, state) -> bool:
        """A state with no successor that is an intended end, not a deadlock."""
        return False

    def handed(self, state, successor) -> bool:
        """Whether the step from ``state`` to ``successor`` hands a consumer or a reader an entry: what the
        actions of the ``deliver`` kind do, and only they (``tests/test_declarations.py`` checks each step of
        the model against its ``action_kinds`` by this)."""
        return False

    def answered(self, state, successor) -> bool:
        """Whether the step from ``state`` to ``successor`` changes what a client or an application has been
        told: what the actions of the ``answer`` kind do, and only they (checked like ``handed``)."""
        return False

    def canonicalize(self, state):
        """Symmetry reduction: a representative of the state's symmetry class."""
        return state

    def property(self, pid: str) -> Property:
        """The property ``pid``: a declared one, or ``deadlock`` if the model checks it."""
        for p in self.props:
            if p.id == pid:
                return p
        if pid == DEADLOCK.id and self.checks_deadlock:
            return DEADLOCK
        raise KeyError(pid)


class ComposedModel(Model):
    """A model whose actions come from several modules, one per component of the protocol;
    each module has ``actions(model, state)`` and ``APPLY`` (label -> ``fn(model, state, action)``)."""

    modules: Sequence = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "modules" in cls.__dict__ and "action_labels" not in cls.__dict__:
            cls.action_labels = tuple(sorted({name for mod in cls.modules for name in mod.APPLY}))
        if ("actions" in cls.__dict__ or "next_state" in cls.__dict__) and "successors" not in cls.__dict__:
            cls.successors = Model.successors  # the fused loop below would bypass the override

    def __init__(self, config: Config):
        super().__init__(config)
        self._apply = {name: fn for mod in self.modules for name, fn in mod.APPLY.items()}

    def actions(self, state) -> Iterable[Action]:
        for mod in self.modules:
            yield from mod.actions(self, state)

    def next_state(self, state, action: Action):
        return self._apply[action.name](self, state, action)

    def successors(self, state) -> list[tuple[Action, Any]]:
        """``actions`` and ``next_state`` in one loop: the explorers' hot path, without a generator per module."""
        apply = self._apply
        return [(a, apply[a.name](self, state, a)) for mod in self.modules for a in mod.actions(self, state)]
