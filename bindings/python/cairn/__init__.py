"""cairn: multilevel checkpoint/restart for MPI applications, from Python.

    from mpi4py import MPI
    import numpy as np
    import cairn

    grid = np.zeros((rows, n))
    with cairn.Session(MPI.COMM_WORLD) as c:
        c.protect("grid", grid)                 # any writable buffer, never copied
        if c.restart_available():
            c.restart()                         # the newest verified version, from L1, L2 or L3
        for step in ...:
            compute(grid)
            if c.need_checkpoint():
                c.checkpoint()                  # returns after the node-local copy
            if c.should_exit():
                break

Every failure raises a subclass of CairnError, one per CAIRN_ERR_* code (cairn.errors). The calls are
those of the C API (include/cairn/cairn.h), whose contracts hold here; docs/python.md is the guide.
"""
from . import _cairn
from .errors import *  # noqa: F401,F403 - CairnError and one class per code
from .errors import __all__ as _error_names
from .session import Distribution, DistKind, Level, OutputVersion, RestartInfo, RestartVersion, Session

__version__: str = "%d.%d.%d" % _cairn.VERSION


def strerror(code: int) -> str:
    """The description of a CAIRN_ERR_* code (cairn_strerror)."""
    return _cairn.strerror(code)


def last_error() -> str:
    """The detail of this thread's last failed cairn call (cairn_last_error), or ""."""
    return _cairn.last_error()


__all__ = ["Session", "Distribution", "DistKind", "Level", "RestartInfo", "OutputVersion", "RestartVersion",
           "strerror", "last_error", "__version__", *_error_names]
