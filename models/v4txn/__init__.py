"""The v4 transaction path (in-stream markers), PIP-473 "Background"."""
from .model import V4Txn

__all__ = ["V4Txn"]
