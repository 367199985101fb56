"""Merkle fingerprints: a state's fingerprint is built from the digests of its parts, and a part's
digest is computed once per object. A successor shares almost all of its parts with its parent,
so fingerprinting it hashes only the few parts that changed and the state's own node.

What is hashed. A value is a *primitive* (int, str, bool, None, bytes, float) or a *container*
(tuple, ``FrozenMap``, frozenset, instance of an attrs class). A primitive is written as a record
of a type byte and its bytes (``i`` + 8-byte int, ``I`` + length + decimal digits for a larger
int, ``s``/``b`` + 4-byte length + UTF-8/bytes, ``t``/``f``/``n``, ``d`` + IEEE-754 bits); a
container inside another as ``h`` + its 16-byte digest. A container's digest is the 128-bit
MurmurHash3 (x64 variant, seed 0: ``h1`` then ``h2``, little-endian) of its *node*: ``T`` + count
+ its items' records (tuple); ``M`` + count + key and value records (``FrozenMap``, sorted by key);
``S`` + count + its items' records sorted bytewise (frozenset); ``A`` + the digest of
``"module:Class"`` + count + its fields' records, in declaration order (attrs). Counts and
lengths are 4-byte little-endian. Every record says its own length, so a node is never the node of
another value. The fingerprint is the first 8 bytes of the state's digest,
as a signed little-endian integer (it fits Spark's LongType).

So two distinct states get one fingerprint only if the hash collides on two distinct nodes or
their 64-bit prefixes collide: for n distinct states, about n^2 / 2^65 (2.7e-8 at 10^6 states,
2.7e-6 at 10^7, 2.7e-2 at 10^9), the node term being negligible (about m^2 / 2^129 for m nodes:
below 10^-18 for 10^10). That takes MurmurHash3 to act as a random function on these inputs: it is
not a cryptographic hash (inputs can be crafted to collide), but model states are not crafted
against it, and it passes SMHasher's distribution and avalanche tests. It replaced BLAKE2b, whose
compression was half of what fingerprinting cost. Nothing depends on the process: no salted
``hash()``, no object ids in what is hashed.

``_merkle.c`` computes the same function, compiled (``pip install`` builds it when a C compiler is
there); this module is the reference and the fallback when it is not (tests check they agree).
"""
from __future__ import annotations

import operator
import struct

import attrs

from .values import PRIMITIVES, FrozenMap, field_slots

try:
    from . import _merkle
except ImportError:  # no compiler where the package was installed: the reference below, slower
    _merkle = None

K_MAP, K_ATTRS = 2, 4  # the kinds _merkle.c knows (tuples and frozensets it tells by their type)


_M64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl(x: int, n: int) -> int:
    return ((x << n) | (x >> (64 - n))) & _M64


def _fmix(k: int) -> int:
    k = ((k ^ (k >> 33)) * 0xFF51AFD7ED558CCD) & _M64
    k = ((k ^ (k >> 33)) * 0xC4CEB9FE1A85EC53) & _M64
    return k ^ (k >> 33)


def _h128(data: bytes) -> bytes:
    """MurmurHash3_x64_128 of ``data``, seed 0, as ``_merkle.c`` computes it."""
    h1 = h2 = 0
    n = len(data)
    body = n - n % 16
    for i in range(0, body, 16):
        k1, k2 = struct.unpack_from("<QQ", data, i)
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
        h1 = ((_rotl(h1, 27) + h2) * 5 + 0x52DCE729) & _M64
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
        h2 = ((_rotl(h2, 31) + h1) * 5 + 0x38495AB5) & _M64
    k1, k2 = struct.unpack("<QQ", data[body:].ljust(16, b"\0"))
    if n % 16 > 8:
        h2 ^= (_rotl((k2 * _C2) & _M64, 33) * _C1) & _M64
    if n % 16:
        h1 ^= (_rotl((k1 * _C1) & _M64, 31) * _C2) & _M64
    h1, h2 = h1 ^ n, h2 ^ n
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _M64
    h2 = (h2 + h1) & _M64
    return struct.pack("<QQ", h1, h2)


def describe(t: type) -> tuple:
    """How a container type is hashed: (kind, tag digest, field getter, single field, the fields'
    slot descriptors when they are all slots, for ``_merkle.c`` to read them in place)."""
    if issubclass(t, FrozenMap):
        return (K_MAP, b"", None, False, None)
    if attrs.has(t):
        fields = attrs.fields(t)
        if not all(f.init for f in fields):
            raise TypeError(f"cannot fingerprint {t.__qualname__}: every field must be an __init__ argument")
        names = [f.name for f in fields]
        return (K_ATTRS, _h128(f"{t.__module__}:{t.__qualname__}".encode()), operator.attrgetter(*names),
                len(names) == 1, field_slots(t))
    raise TypeError(f"cannot fingerprint a value of type {t.__name__}: use ints, strs, tuples, "
                    f"frozensets, FrozenMap or attrs classes")


_kinds: dict[type, tuple] = {}
_memo: dict[int, tuple] = {}  # id -> (value, digest); each entry keeps its value alive
_MEMO_LIMIT = 1 << 18
_i64 = struct.Struct("<q")
_u32 = struct.Struct("<I")


def _record(v) -> bytes:
    t = type(v)
    if t is int:
        if -(1 << 63) <= v < (1 << 63):
            return b"i" + _i64.pack(v)
        s = str(v).encode()
        return b"I" + _u32.pack(len(s)) + s
    if t is str:
        s = v.encode()
        return b"s" + _u32.pack(len(s)) + s
    if t is bool:
        return b"t" if v else b"f"
    if v is None:
        return b"n"
    if t is bytes:
        return b"b" + _u32.pack(len(v)) + v
    if t is float:
        return b"d" + struct.pack("<d", v)
    return b"h" + _digest(v)


def _node(v) -> bytes:
    t = type(v)
    if t is tuple:
        return b"T" + _u32.pack(len(v)) + b"".join(map(_record, v))
    if t is frozenset:
        return b"S" + _u32.pack(len(v)) + b"".join(sorted(map(_record, v)))
    kind = _kinds.get(t) or _kinds.setdefault(t, describe(t))
    if kind[0] == K_MAP:
        return b"M" + _u32.pack(len(v)) + b"".join(_record(k) + _record(x) for k, x in tuple.__iter__(v))
    values = (kind[2](v),) if kind[3] else kind[2](v)
    return b"A" + kind[1] + _u32.pack(len(values)) + b"".join(map(_record, values))


def _digest(v) -> bytes:
    hit = _memo.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    d = _h128(_node(v))
    if len(_memo) >= _MEMO_LIMIT:
        _memo.clear()
    _memo[id(v)] = (v, d)
    return d


def digest(v) -> bytes:
    """The 16-byte digest of a value (the value itself is not memoised)."""
    if type(v) in PRIMITIVES:
        return _h128(_record(v))
    return _h128(_node(v))


def fingerprint(v) -> int:
    return _i64.unpack_from(digest(v))[0]


if _merkle is not None:
    _merkle.setup(describe)
