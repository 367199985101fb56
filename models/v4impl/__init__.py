"""The v4 transaction path at the implementation's granularity (apache/pulsar), for bug reports."""
from .model import V4Impl

__all__ = ["V4Impl"]
