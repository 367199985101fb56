"""Where each model lives: the ``pulsar_verify.models`` entry points of every installed package.

pulsar-verify registers its own models there, and a team registers the model of its own PIP
the same way, in its own package's ``pyproject.toml``::

    [project.entry-points."pulsar_verify.models"]
    my-pip = "my_package.model:MyPipModel"

Models are imported lazily, so ``list`` of one model and errors stay fast.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import entry_points

from .model import Model, ModelDefinitionError, UsageError

GROUP = "pulsar_verify.models"


@lru_cache(maxsize=1)
def registered() -> dict[str, str]:
    """Model name -> ``module:Class``, in the order pulsar-verify's own models are declared, then others'."""
    out: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        if out.get(ep.name, ep.value) != ep.value:
            raise ModelDefinitionError(f"model {ep.name!r} is registered twice: {out[ep.name]} and {ep.value}")
        out[ep.name] = ep.value
    if not out:
        raise UsageError(f"no models are registered (entry point group {GROUP}): is pulsar-verify installed?")
    return out


def names() -> list[str]:
    return list(registered())


def model_class(name: str) -> type[Model]:
    try:
        target = registered()[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r} (known: {', '.join(registered())})") from None
    module, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"model {name!r} cannot be loaded from {target}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Model)) or cls.name != name:
        raise ModelDefinitionError(f"entry point {name!r} names {target}, which is not the Model named {name!r}")
    cls.declared_properties()  # the declaration is checked as the model is loaded
    return cls


def build(name: str, variant: str | None = None, overrides: dict[str, str] | None = None,
          values: dict | None = None, preset: str = "default", reduction: bool = True, questions=None) -> Model:
    """``variant``: by default the model's baseline (``as-written``). ``reduction=False``: without
    symmetry reduction (the full search). ``questions``: a ``pulsar_verify.asked.Questions`` that notes
    what the model asks of its variant."""
    cls = model_class(name)
    config = cls.make_config(variant, overrides, values, preset)
    model = cls(config if questions is None else config.asking(questions))
    return model if reduction else model.full_search()


def all_models() -> list[type[Model]]:
    return [model_class(n) for n in registered()]
