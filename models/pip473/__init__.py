"""PIP-473: metadata-driven transactions for scalable topics."""
from .model import Pip473

__all__ = ["Pip473"]
