#!/bin/sh
# hang_once.sh MARKER RANK CHECKPOINTS CMD ARGS...: runs CMD ARGS in place of this shell (exec). The
# process of rank RANK is stopped (SIGSTOP) once the job state file shows CHECKPOINTS versions at L1, in
# the first attempt that gets there only (MARKER, a directory made at the stop, does not exist yet): a
# hung node, which the other ranks wait for forever. Used by scenario.py --hang-once and cluster_test.sh for `cairn run --stall`.
marker=$1 rank=$2 after=$3
shift 3
me=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-}}}  # mpirun, MPICH, srun
if [ "$me" = "$rank" ] && [ ! -e "$marker" ]; then
  target=$$  # this shell's pid, which becomes CMD's at the exec below
  state="$CAIRN_PREFIX/.cairn/state"
  (
    while kill -0 "$target" 2>/dev/null; do
      l1=$(sed -n 's/^l1=//p' "$state" 2>/dev/null)
      # The marker is made at the stop, so an attempt that ended before (a rank dead at its start) does
      # not use up the hang.
      if [ -n "$l1" ] && [ "$l1" -ge "$after" ] && mkdir "$marker" 2>/dev/null; then
        kill -STOP "$target"
        echo "hang_once: stopped rank $rank (pid $target) after checkpoint $l1" >&2
        exit 0
      fi
      sleep 0.02
    done
  ) &
fi
exec "$@"
