#!/usr/bin/env python3
"""heat2d.py: examples/heat2d/heat2d.c with numpy and mpi4py, through the package cairn (docs/python.md).

The same 2-D Jacobi problem, decomposition, checkpointed state and output as heat2d: an n x n grid
split by rows over the ranks (the first n % P ranks get one extra row), the top edge 100.0, the other
edges and the interior 0.0. "grid" (the rank's rows without halos, BLOCK_ROWS) and "iter" (int64,
REPLICATED) are protected, so a checkpoint of heat2d, heat2d_f or heat2d.py restarts in any of them
and on any number of ranks. Each sweep computes 0.25 * (above + below + left + right), added left to
right as heat2d does, so the final grid and its `result` line (FNV-1a 64 of the global grid's bytes,
row-major) equal heat2d's bit for bit.

Usage: heat2d.py [--n N] [--iters I] [--checkpoint-every K] [--sleep-ms S] [--no-restart]
"""
import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import cairn

TOP_EDGE_VALUE = 100.0
FNV_OFFSET, FNV_PRIME, MASK64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


class Options(argparse.ArgumentParser):
    """heat2d's options and messages; only rank 0 prints them."""

    def __init__(self, rank):
        super().__init__(prog="heat2d.py", description="2-D Jacobi heat solver protected by cairn")
        self.rank = rank
        for name, default, text in (("--n", 256, "global grid is N x N (at least 3 and the rank count)"),
                                    ("--iters", 1000, "Jacobi iterations"),
                                    ("--checkpoint-every", 100, "checkpoint every K iterations (0 = never)"),
                                    ("--sleep-ms", 0, "sleep S ms per iteration, to slow the run down")):
            self.add_argument(name, type=self.non_negative, default=default, help=f"{text} (default {default})")
        self.add_argument("--no-restart", action="store_true", help="start from scratch even if a checkpoint exists")

    @staticmethod
    def non_negative(text):
        if not text.isdigit():
            raise argparse.ArgumentTypeError(f"needs a non-negative integer, got '{text}'")
        return int(text)

    def _print_message(self, message, file=None):
        if self.rank == 0:
            super()._print_message(message, file)


class Domain:
    """This rank's rows of the grid, with a halo row above and below, in two alternating buffers."""

    def __init__(self, comm, n):
        self.comm, self.n = comm, n
        self.rank, self.nprocs = comm.Get_rank(), comm.Get_size()
        base, extra = divmod(n, self.nprocs)
        self.max_rows = base + (1 if extra else 0)
        self.rows = base + (1 if self.rank < extra else 0)
        self.first_row = self.rank * base + min(self.rank, extra)
        self.cur = np.zeros((self.rows + 2, n))
        if self.first_row == 0:
            self.cur[1, :] = TOP_EDGE_VALUE  # the fixed edges; the others are 0.0 like the interior
        self.next = self.cur.copy()

    def owned(self):
        """The rank's rows without the halos: a view into the current buffer."""
        return self.cur[1:self.rows + 1]

    def exchange_halos(self):
        up = self.rank - 1 if self.rank > 0 else MPI.PROC_NULL
        down = self.rank + 1 if self.rank < self.nprocs - 1 else MPI.PROC_NULL
        # the first owned row goes up, the lower neighbour's first row arrives in the lower halo
        self.comm.Sendrecv(self.cur[1], dest=up, sendtag=1, recvbuf=self.cur[self.rows + 1], source=down, recvtag=1)
        # the last owned row goes down, the upper neighbour's last row arrives in the upper halo
        self.comm.Sendrecv(self.cur[self.rows], dest=down, sendtag=2, recvbuf=self.cur[0], source=up, recvtag=2)

    def sweep(self):
        lo = 2 if self.first_row == 0 else 1  # global rows 0 and n - 1 are fixed
        hi = self.rows - 1 if self.first_row + self.rows == self.n else self.rows
        if lo <= hi:
            c = self.cur
            self.next[lo:hi + 1, 1:-1] = 0.25 * (((c[lo - 1:hi, 1:-1] + c[lo + 1:hi + 2, 1:-1])
                                                  + c[lo:hi + 1, :-2]) + c[lo:hi + 1, 2:])
        self.cur, self.next = self.next, self.cur

    def hash_global_grid(self):
        """Rank 0 receives every rank's rows in rank (hence row-major) order and hashes their bytes as
        they come; returns the FNV-1a 64 hash there, None elsewhere."""
        if self.rank != 0:
            self.comm.Send(np.ascontiguousarray(self.owned()), dest=0, tag=3)
            return None
        h = fnv1a64(FNV_OFFSET, self.owned().tobytes())
        buffer = np.empty(self.max_rows * self.n)
        status = MPI.Status()
        for source in range(1, self.nprocs):
            self.comm.Recv(buffer, source=source, tag=3, status=status)
            h = fnv1a64(h, buffer[:status.Get_count(MPI.DOUBLE)].tobytes())
        return h


def fnv1a64(h, data):
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & MASK64
    return h


def say(rank, text):
    if rank == 0:
        print(text, flush=True)


def run(comm, opt, c):
    d = Domain(comm, opt.n)
    it = np.zeros(1, dtype=np.int64)  # a counter cairn restores in place: a one-element array
    by_rows, same = cairn.Distribution.block_rows(opt.n, opt.n), cairn.Distribution.replicated(1)

    def protect_state():  # the current buffer changes with every sweep
        c.protect("grid", d.owned(), dist=by_rows)
        c.protect("iter", it, dist=same)

    protect_state()
    thread_level = "multiple" if MPI.Query_thread() >= MPI.THREAD_MULTIPLE else "below-multiple"
    say(d.rank, f"heat2d.py: n={opt.n} ranks={d.nprocs} iters={opt.iters} "
                f"checkpoint-every={opt.checkpoint_every} thread-level={thread_level}")
    if not opt.no_restart:
        try:
            available = c.restart_available()
        except cairn.UnrecoverableError:
            if d.rank == 0:
                print("heat2d.py: checkpoints exist but none can be rebuilt; --no-restart starts over", file=sys.stderr)
            raise
        if available:
            version, level = c.restart()
            if not 0 <= it[0] <= opt.iters:
                if d.rank == 0:
                    print(f"heat2d.py: checkpoint version {version} is at iteration {it[0]}, outside 0..--iters "
                          f"{opt.iters}", file=sys.stderr, flush=True)
                comm.Abort(2)
            say(d.rank, f"restart: version {version} from level {level.name}")
            say(d.rank, f"heat2d.py: resuming at iteration {it[0]}")

    while it[0] < opt.iters:
        d.exchange_halos()
        d.sweep()
        it[0] += 1
        if opt.sleep_ms:
            time.sleep(opt.sleep_ms / 1000)
        due = opt.checkpoint_every > 0 and it[0] % opt.checkpoint_every == 0 and it[0] < opt.iters
        if c.need_checkpoint() or due:
            protect_state()
            c.checkpoint()
        if c.should_exit():
            say(d.rank, f"heat2d.py: exiting on request at iteration {it[0]}")
            return None
    return d.hash_global_grid()


def fatal(comm, error):
    """As heat2d does: report a failed cairn call with its detail and stop the whole job."""
    print(f"heat2d.py: {error}", file=sys.stderr, flush=True)
    comm.Abort(1)


def main():
    comm = MPI.COMM_WORLD
    rank, nprocs = comm.Get_rank(), comm.Get_size()
    opt = Options(rank).parse_args()
    if opt.n < 3:
        Options(rank).error(f"--n must be at least 3, got {opt.n}")
    if opt.n < nprocs:
        Options(rank).error(f"--n {opt.n} does not fit {nprocs} ranks (need n >= ranks)")
    try:
        # Leaving the block finalizes cairn before `result` is printed, so it stays the last line.
        with cairn.Session(comm) as c:
            try:
                h = run(comm, opt, c)
            except cairn.CairnError as e:  # before the block's collective finalize: other ranks may be elsewhere
                fatal(comm, e)
    except cairn.CairnError as e:  # cairn_init or cairn_finalize
        fatal(comm, e)
    if h is not None:
        say(rank, f"result {h:016x}")


if __name__ == "__main__":
    main()
