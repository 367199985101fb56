"""Small helpers for immutable tuples."""


def put(items: tuple, i: int, value) -> tuple:
    return items[:i] + (value,) + items[i + 1:]
