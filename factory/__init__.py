"""TRACE factory: capability specs in, verifiable gymnasium training environments out."""

__version__ = "0.1.0"
