#!/usr/bin/env bash
# An unmodified checkpointing program (ckpt_stdio, ckpt_posix or ckpt_mpiio) under `cairn run` on 4
# simulated nodes with libcairn_interpose.so preloaded: a node is killed during a checkpoint and the
# relaunched job must print the failure-free result, having restarted through cairn (from L2 with xor,
# from L3 with redundancy single), with none of its checkpoint files ever on the file system it named --
# so nothing of them survived on the lost node or anywhere but in cairn's levels.
#
#   interpose_apps_test.sh CAIRN_TOOL INTERPOSE_LIB APP PATTERN
set -euo pipefail
cairn=$1 lib=$2 app=$3 pattern=$4
name=$(basename "$app")
work=$(mktemp -d /tmp/cairn-interpose-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 7 checkpoints: the first step has no step before it to be compared with and is taken only once it
# settled (CAIRN_INTERPOSE_SETTLE_MS), by when the second may be ready; the L3 case kills at checkpoint 5.
args=(--cells 2048 --steps 80 --every 10 --sleep-ms 5)
# ckpt_posix closes a checkpoint's header before it appends the cells and renames the file: with a pause
# there, a version taken at the first close would hold the header alone under the .tmp name.
[ "$name" = ckpt_posix ] && args+=(--pause-ms 40)

# The failure-free answer: the program alone, writing its own files.
mkdir -p "$work/plain"
(cd "$work/plain" && ${CAIRN_MPIRUN:-mpirun} ${CAIRN_MPIRUN_ARGS---oversubscribe} -np 4 "$app" "${args[@]}") \
  >"$work/plain.out" 2>&1 || { cat "$work/plain.out"; fail "the plain run failed"; }
ref=$(grep -o '^result [0-9a-f]*' "$work/plain.out")
[ -n "$ref" ] || fail "the plain run printed no result"
ls "$work/plain/ckpt" | grep -q 'step70' || fail "the plain run wrote no checkpoint files (test broken)"
echo "failure-free: $ref"

# scheme LEVEL AT: kill node 2 during checkpoint AT, relaunch, expect a restart at LEVEL. For L3, AT leaves
# the flush of version 2 (in the background) two intervals to end: at checkpoint 3 it was still in flight
# now and then (a relaunch from nothing).
run() {
  local scheme=$1 level=$2 at=$3 dir="$work/$1"
  mkdir -p "$dir"
  (cd "$dir" && CAIRN_PREFIX="$dir/prefix" CAIRN_CACHE_DIR="$dir/cache" CAIRN_REDUNDANCY=$scheme CAIRN_FLUSH_EVERY=2 \
     CAIRN_LOG=info "$cairn" run -n 4 --nodes 4 --kill-node 2 --at-checkpoint "$at" -- \
     env LD_PRELOAD="$lib" CAIRN_INTERPOSE_PATTERN="$pattern" "$app" "${args[@]}") >"$dir.out" 2>&1 ||
    { cat "$dir.out"; fail "$scheme: cairn run failed"; }
  grep -q "killed node2 (ranks 2) at checkpoint $at" "$dir.out" || { cat "$dir.out"; fail "$scheme: no node was killed"; }
  grep -q "attempt 2: restarted from version [0-9]* at $level" "$dir.out" ||
    { cat "$dir.out"; fail "$scheme: the relaunch did not restart from $level"; }
  grep -q "restarted at step" "$dir.out" || { cat "$dir.out"; fail "$scheme: the program found no checkpoint"; }
  got=$(grep -o '^result [0-9a-f]*' "$dir.out" | tail -1)
  [ "$got" = "$ref" ] || { cat "$dir.out"; fail "$scheme: $got differs from the failure-free $ref"; }
  # The program's checkpoint directory on the shared file system never held a checkpoint file.
  [ -d "$dir/ckpt" ] || fail "$scheme: the program's own directory is missing"
  [ -z "$(ls -A "$dir/ckpt")" ] || fail "$scheme: files in $dir/ckpt: $(ls "$dir/ckpt")"
  echo "PASS $name $scheme: restarted at $level, $got"
}
run xor L2 3
run single L3 5
echo "interpose_apps_test: $name passed"
