"""A program that ends with its Session open: cairn finalizes it at exit, before mpi4py finalizes MPI,
so the newest version still reaches L3 (flush_on_finalize). Run by the test python_unclosed_session."""
import os
import sys

import numpy as np
from mpi4py import MPI

import cairn

if sys.argv[1:] == ["--check"]:  # the second run: the version the first one left
    with cairn.Session(MPI.COMM_WORLD) as c:
        a = np.zeros(4)
        c.protect("a", a)
        info = c.restart()
        assert info.version == 1 and (a == MPI.COMM_WORLD.Get_rank()).all(), (info, a)
        assert os.path.exists(os.path.join(os.environ["CAIRN_PREFIX"], "v00000001", "COMMIT"))
    if MPI.COMM_WORLD.Get_rank() == 0:
        print("python_unclosed_session: version 1 was finalized and committed at exit")
else:
    c = cairn.Session(MPI.COMM_WORLD)
    a = np.full(4, float(MPI.COMM_WORLD.Get_rank()))
    c.protect("a", a)
    c.checkpoint()
