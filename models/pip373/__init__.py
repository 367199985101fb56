"""PIP-373: skip the transaction buffer's rebuild via the ``__contains_txn_messages`` property."""
from .model import Pip373

__all__ = ["Pip373"]
