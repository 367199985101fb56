"""How states and actions travel between the driver, the executors and Parquet.

States are pickled with a dispatch table that reduces every ``attrs`` value to
``(class, field values)``: loading then calls the constructor from C instead of
attrs' per-field ``__setstate__``, which halves both the size and the load
time (``bench/spark_scaling.py`` prints both). Actions are plain data
(a label and primitive parameters) and are stored with ``marshal``, which is
stable and executes no code when read back.
"""
from __future__ import annotations

import io
import marshal
import operator
import pickle

import attrs

from pulsar_verify.model import Action


class _Reducers(dict):
    """Per-type reducers, built on first sight of a type."""

    def __missing__(self, cls):
        fields = attrs.fields(cls) if attrs.has(cls) else None
        if fields is None or not all(f.init for f in fields):
            def reduce(obj):
                return obj.__reduce_ex__(5)
        else:
            names = [f.name for f in fields]
            if len(names) > 1:
                get = operator.attrgetter(*names)
            elif names:
                one = operator.attrgetter(names[0])

                def get(obj):
                    return (one(obj),)
            else:
                def get(obj):
                    return ()

            def reduce(obj):
                return cls, get(obj)
        self[cls] = reduce
        return reduce


_REDUCERS = _Reducers()


def dump_state(state) -> bytes:
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, 5)
    pickler.dispatch_table = _REDUCERS
    pickler.dump(state)
    return buf.getvalue()


load_state = pickle.loads


def dump_action(action: Action) -> bytes:
    return marshal.dumps((action.name, action.params), 2)


def load_action(blob: bytes) -> Action:
    name, params = marshal.loads(blob)
    return Action(name, params)
