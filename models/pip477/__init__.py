from .model import Pip477

__all__ = ["Pip477"]
