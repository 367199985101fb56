"""``SchemaStorageFormat.PositionInfo`` before and after PIP-477 S3, as real protobuf (proto2)
messages built from descriptors (no ``protoc`` needed), for I7: an old broker that reads a
new ``PositionInfo`` and writes it back keeps the ``properties`` it does not know."""
from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_REQUIRED = descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED
_REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_INT64 = descriptor_pb2.FieldDescriptorProto.TYPE_INT64
_STRING = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE


def _declare_schema(package: str, with_properties: bool):
    f = descriptor_pb2.FileDescriptorProto(name=f"{package}.proto", package=package, syntax="proto2")
    pos = f.message_type.add(name="PositionInfo")
    pos.field.add(name="ledgerId", number=1, label=_REQUIRED, type=_INT64)
    pos.field.add(name="entryId", number=2, label=_REQUIRED, type=_INT64)
    if with_properties:  # "repeated KeyValue properties = 3; // NEW"
        pos.field.add(name="properties", number=3, label=_REPEATED, type=_MESSAGE, type_name=f".{package}.KeyValue")
        kv = f.message_type.add(name="KeyValue")
        kv.field.add(name="key", number=1, label=_REQUIRED, type=_STRING)
        kv.field.add(name="value", number=2, label=_REQUIRED, type=_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.PositionInfo"))


OldPositionInfo = _declare_schema("pulsar_verify.before_pip477", with_properties=False)
NewPositionInfo = _declare_schema("pulsar_verify.pip477", with_properties=True)


def encode(ledger: int, entry: int, properties: tuple) -> bytes:
    msg = NewPositionInfo(ledgerId=ledger, entryId=entry)
    for key, value in properties:
        msg.properties.add(key=key, value=value)
    return msg.SerializeToString()


def decode(data: bytes) -> tuple:
    msg = NewPositionInfo.FromString(data)
    return msg.ledgerId, msg.entryId, tuple((kv.key, kv.value) for kv in msg.properties)


def old_broker_rewrite(data: bytes, variant: str = "as-written") -> bytes:
    """An old broker parses the bytes with its ``PositionInfo`` and serialises them again."""
    msg = OldPositionInfo.FromString(data)
    if variant == "mutant:old-reader-drops-unknown":
        msg.DiscardUnknownFields()
    return msg.SerializeToString()


@lru_cache(maxsize=1024)
def survives_old_broker(ledger: int, entry: int, properties: tuple, variant: str = "as-written") -> bool:
    """I7 on one value: new encoding -> old broker rewrite -> new decoding is the identity."""
    return decode(old_broker_rewrite(encode(ledger, entry, properties), variant)) == (ledger, entry, properties)
