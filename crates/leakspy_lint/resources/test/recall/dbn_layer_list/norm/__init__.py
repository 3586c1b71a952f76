from .dbn import DBN

__all__ = ["DBN"]
