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

The binding (cairn.session, and the extension cairn._cairn with libcairn and MPI) is imported on first
use of its names, so `import cairn`, cairn.__version__ and cairn.plot work where only the pure-Python
part can load (a login node; a build whose MPI is not mpi4py's).
"""
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import *  # noqa: F401,F403 - CairnError and one class per code
from .errors import __all__ as _error_names

if TYPE_CHECKING:
    from .session import Distribution, DistKind, Level, OutputVersion, RestartInfo, RestartVersion, Session

_BINDING_NAMES = ("Session", "Distribution", "DistKind", "Level", "RestartInfo", "OutputVersion", "RestartVersion")


def __getattr__(name: str) -> Any:
    if name in _BINDING_NAMES:
        from . import session
        return getattr(session, name)
    raise AttributeError(f"module 'cairn' has no attribute {name!r}")


def strerror(code: int) -> str:
    """The description of a CAIRN_ERR_* code (cairn_strerror)."""
    from . import _cairn
    return _cairn.strerror(code)


def last_error() -> str:
    """The detail of this thread's last failed cairn call (cairn_last_error), or ""."""
    from . import _cairn
    return _cairn.last_error()


__all__ = [*_BINDING_NAMES, "strerror", "last_error", "__version__", *_error_names]
