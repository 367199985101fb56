"""Z3 encodings of the protocol models and their proof obligations (``pulsar-verify prove``)."""
from __future__ import annotations


def registry() -> list:
    """Every obligation, by model."""
    from . import (layout, pip373_flag, pip373_steps, pip468_cursors, pip468_exclusive, pip468_intent,
                   pip468_layout_steps, pip468_rebalance, pip468_sessions, pip468_steps, pip473_acks, pip473_dispatch,
                   pip473_forget, pip473_header, pip473_late_write, pip473_reap, pip473_steps, pip477_active,
                   pip477_build, pip477_cursor, pip477_idgen, pip477_position, pip477_registry, pip477_reserved,
                   pip477_rollback, pip477_schema, pip477_stamps, pip477_steps, v4impl_abort, v4impl_horizon,
                   v4impl_outcome, v4impl_pending, v4impl_timeout, v4txn_completes, v4txn_steps)
    return [*pip473_header.OBLIGATIONS, *pip473_acks.OBLIGATIONS, *pip473_dispatch.OBLIGATIONS,
            *pip473_late_write.OBLIGATIONS, *pip473_forget.OBLIGATIONS, *pip473_reap.OBLIGATIONS,
            *pip473_steps.OBLIGATIONS, *layout.OBLIGATIONS,
            *pip468_sessions.OBLIGATIONS, *pip468_exclusive.OBLIGATIONS, *pip468_cursors.OBLIGATIONS,
            *pip468_intent.OBLIGATIONS, *pip468_rebalance.OBLIGATIONS, *pip468_steps.OBLIGATIONS,
            *pip468_layout_steps.OBLIGATIONS,
            *pip373_flag.OBLIGATIONS, *pip373_steps.OBLIGATIONS, *pip477_registry.OBLIGATIONS,
            *pip477_schema.OBLIGATIONS, *pip477_stamps.OBLIGATIONS, *pip477_active.OBLIGATIONS,
            *pip477_cursor.OBLIGATIONS, *pip477_idgen.OBLIGATIONS, *pip477_reserved.OBLIGATIONS,
            *pip477_rollback.OBLIGATIONS, *pip477_build.OBLIGATIONS, *pip477_position.OBLIGATIONS,
            *pip477_steps.OBLIGATIONS, *v4txn_steps.OBLIGATIONS, *v4txn_completes.OBLIGATIONS,
            *v4impl_outcome.OBLIGATIONS, *v4impl_horizon.OBLIGATIONS, *v4impl_timeout.OBLIGATIONS,
            *v4impl_abort.OBLIGATIONS, *v4impl_pending.OBLIGATIONS]


def step_encodings() -> list:
    """Every step-for-step encoding (a ``StepEncoding``), each of one model's actions and state."""
    from . import pip373_steps, pip468_layout_steps, pip468_steps, pip473_steps, pip477_steps, v4txn_steps
    from .obligations import StepEncoding
    modules = (pip473_steps, pip468_steps, pip468_layout_steps, pip477_steps, pip373_steps, v4txn_steps)
    return [c for m in modules for c in vars(m).values()
            if isinstance(c, type) and issubclass(c, StepEncoding) and c.__module__ == m.__name__ and c.model]
