from .model import Pip468

__all__ = ["Pip468"]
