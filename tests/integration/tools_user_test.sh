#!/usr/bin/env bash
# tools_user: what a new user meets around the tools (issue 22), with heat2d under `cairn run`:
#  - a cache that outlived its removed prefix is refused (cairn run, and cairn_init under a bare mpirun),
#    `cairn clean --cache` removes it and the next run starts afresh;
#  - garbage in a prefix and a cache: one verdict per version from list, show and verify, and the exit
#    statuses docs/tools.md promises; a PREFIX that is not there is an error;
#  - cairn index (SCR's scr_index): a restart from a chosen older version, bit for bit the failure-free
#    answer, newer versions kept; --drop; --add of a copy verified first; the restart_version knob;
#  - l2_every = 2: only every second version is protected at L2;
#  - --json on every tool that reports (run's summary, list, show, verify, flush, clean, watch, config,
#    strerror), each document checked with python3 -m json.tool; "nothing here" goes to stderr, tagged;
#
# Usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d
# Environment: CAIRN_MPIRUN (default mpirun), CAIRN_MPIRUN_ARGS (e.g. --oversubscribe) and, for Open MPI
# as root, OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -u

CAIRN=${1:?usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d}
HEAT=${2:?usage: tools_user_test.sh PATH/TO/cairn PATH/TO/heat2d}
MPIRUN=${CAIRN_MPIRUN:-mpirun}
export CAIRN_LAUNCHER=mpirun
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tools-user.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset CAIRN_CONFIG CAIRN_LOG CAIRN_FLUSH_EVERY CAIRN_FLUSH_ON_FINALIZE CAIRN_KEEP_FLUSHED CAIRN_CACHE_VERSIONS CAIRN_JOB CAIRN_ADOPT

. "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # failures, pass, fail, expect_rc, expect_in
# expect_fail NAME CMD... : as expect_rc, for any status but 0.
expect_fail() {
  local name=$1
  shift
  "$@" >"$WORK/out" 2>"$WORK/err"
  if [ $? -ne 0 ]; then pass "$name"; else
    fail "$name: exit status 0"
    sed 's/^/    out: /' "$WORK/out"
  fi
}
expect_not_in() {
  if ! grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' unexpectedly in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
# expect_json NAME FILE [EXPR]: FILE is one JSON document (python3 -m json.tool accepts it) and the python3
# expression EXPR over it (bound to j) is true.
expect_json() {
  if ! python3 -m json.tool "$2" >/dev/null 2>"$WORK/pyerr"; then
    fail "$1: not JSON"
    sed 's/^/    | /' "$2" | head -20
    sed 's/^/    py: /' "$WORK/pyerr"
    return
  fi
  if [ -z "${3:-}" ]; then pass "$1"; return; fi
  if python3 -c "import json,sys; j=json.load(open('$2')); sys.exit(0 if ($3) else 1)" 2>"$WORK/pyerr"; then
    pass "$1"
  else
    fail "$1: $3"
    sed 's/^/    | /' "$2" | head -40
    sed 's/^/    py: /' "$WORK/pyerr"
  fi
}
# use NAME: a prefix and a cache of its own; the job name is derived from the prefix, as for a user.
use() {
  export CAIRN_PREFIX=$WORK/$1/prefix CAIRN_CACHE_DIR=$WORK/$1/cache
}
# heat [ARGS...]: heat2d on 4 ranks / 2 simulated nodes; the output is in $WORK/run.out.
heat() {
  "$CAIRN" run -n 4 --nodes 2 -- "$HEAT" --n 64 --iters 100 --checkpoint-every 10 "$@" >"$WORK/run.out" 2>&1
}

# ---- a cache that outlived its prefix (issue 22, 6) ---------------------------------------------
use orphan
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "orphan: first run"; }
reference=$(grep '^result ' "$WORK/run.out")
[ -n "$reference" ] && pass "orphan: first run: $reference" || fail "orphan: first run printed no result"
ls "$CAIRN_CACHE_DIR"/cairn-*/node0/r0/v*.l1 >/dev/null 2>&1 && pass "orphan: the cache holds versions" \
  || fail "orphan: the first run left no version in the cache"
rm -rf "$CAIRN_PREFIX"
expect_rc "orphan: cairn run refuses the cache of a removed prefix" 2 heat
expect_in "orphan: cairn run says why" "$WORK/run.out" "has no record of them"
expect_in "orphan: cairn run says how to clean" "$WORK/run.out" "cairn clean --cache $CAIRN_PREFIX"
# The library refuses it too, under a bare mpirun (no cairn run to check first).
mkdir -p "$CAIRN_PREFIX"
CAIRN_NODE=node0 expect_fail "orphan: cairn_init refuses it" "$MPIRUN" ${CAIRN_MPIRUN_ARGS:-} -n 1 "$HEAT" --n 64 --iters 10 --checkpoint-every 10
expect_in "orphan: cairn_init says how to clean" "$WORK/err" "cairn clean --cache"
expect_not_in "orphan: nothing restarted" "$WORK/out" "restart: version"
rm -rf "$CAIRN_PREFIX"
expect_rc "orphan: clean --cache --dry-run" 0 "$CAIRN" clean --cache --dry-run
expect_in "orphan: dry run says what" "$WORK/out" "would remove the cache $CAIRN_CACHE_DIR/cairn-"
ls "$CAIRN_CACHE_DIR"/cairn-* >/dev/null 2>&1 && pass "orphan: dry run removed nothing" || fail "orphan: dry run removed the cache"
expect_rc "orphan: clean --cache" 0 "$CAIRN" clean --cache
ls "$CAIRN_CACHE_DIR"/cairn-* >/dev/null 2>&1 && fail "orphan: clean --cache left the cache" || pass "orphan: clean --cache removed it"
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "orphan: the run after clean --cache"; }
expect_not_in "orphan: a fresh start, no restart" "$WORK/run.out" "restart: version"
[ "$(grep '^result ' "$WORK/run.out")" = "$reference" ] && pass "orphan: the fresh run's result" \
  || fail "orphan: the fresh run's result differs"
# The job's own cache, with its prefix intact and a version newer than L3 (no flush, no scavenge by
# cairn run): --cache is refused.
CAIRN_FLUSH_EVERY=100 CAIRN_FLUSH_ON_FINALIZE=false "$CAIRN" run --no-scavenge -n 4 --nodes 2 -- "$HEAT" --n 64 \
  --iters 100 --checkpoint-every 10 --no-restart >"$WORK/run.out" 2>&1 || fail "orphan: the run without a flush"
expect_rc "orphan: clean --cache refuses the only copy of the newest version" 1 "$CAIRN" clean --cache
expect_in "orphan: and says why" "$WORK/err" "newer than anything committed"

# ---- garbage in a prefix: one verdict per version, the promised exit statuses (issue 22, 7) ------
use garbage
export CAIRN_JOB=garbage
mkdir -p "$CAIRN_PREFIX/v00000002" "$CAIRN_PREFIX/v00000003" "$CAIRN_PREFIX/.cairn" \
  "$CAIRN_CACHE_DIR/cairn-garbage/node0/r0"
head -c 300 /dev/urandom >"$CAIRN_PREFIX/v00000002/COMMIT"
head -c 100 /dev/urandom >"$CAIRN_PREFIX/v00000003/rank-0.data"  # a flush in flight: no COMMIT
head -c 300 /dev/urandom >"$CAIRN_CACHE_DIR/cairn-garbage/node0/r0/v5.l1"
head -c 200 /dev/urandom | base64 >"$CAIRN_PREFIX/.cairn/state"
expect_rc "garbage: verify finds it bad" 1 "$CAIRN" verify
expect_in "garbage: verify says the COMMIT is unreadable" "$WORK/out" "unreadable COMMIT"
expect_not_in "garbage: verify does not also say nothing to verify" "$WORK/out" "nothing to verify"
expect_not_in "garbage: verify does not also say nothing to verify (stderr)" "$WORK/err" "nothing to verify"
expect_rc "garbage: verify 2" 1 "$CAIRN" verify 2
expect_rc "garbage: verify 3 (no COMMIT: incomplete, nothing checked)" 3 "$CAIRN" verify 3
expect_rc "garbage: list" 0 "$CAIRN" list
expect_in "garbage: list calls it damaged" "$WORK/out" "damaged"
expect_not_in "garbage: list has no other word for it" "$WORK/out" "bad COMMIT"
expect_rc "garbage: list --json" 0 "$CAIRN" list --json
expect_json "garbage: list --json verdicts" "$WORK/out" \
  '{v["version"]: (v["l1"]["state"], v["l3"]["state"]) for v in j["versions"]} == {5: ("damaged", "absent"), 3: ("absent", "incomplete"), 2: ("absent", "damaged")} and "COMMIT" in j["versions"][2]["l3"]["why"]'
expect_rc "garbage: show 2 exits 1" 1 "$CAIRN" show 2
expect_in "garbage: show 2 gives list's verdict" "$WORK/out" "L3  damaged (unreadable COMMIT"
expect_not_in "garbage: show 2 does not say there is no COMMIT" "$WORK/out" "no COMMIT"
expect_rc "garbage: show 5 exits 1" 1 "$CAIRN" show 5
expect_rc "garbage: show 3 (a flush in flight) exits 0" 0 "$CAIRN" show 3
expect_in "garbage: show 3 says incomplete" "$WORK/out" "L3  incomplete (no COMMIT"
expect_rc "garbage: watch --once on a stray state file" 1 "$CAIRN" watch --once
expect_in "garbage: watch says it is not a job state" "$WORK/err" "not a cairn job state"
expect_rc "garbage: list /nonexistent is an error" 2 "$CAIRN" list "$WORK/nonexistent"
expect_in "garbage: list /nonexistent says why" "$WORK/err" "cairn list: $WORK/nonexistent: no such directory"
expect_rc "garbage: verify /nonexistent is an error" 2 "$CAIRN" verify "$WORK/nonexistent"
expect_rc "garbage: show 1 /nonexistent is an error" 2 "$CAIRN" show 1 "$WORK/nonexistent"
unset CAIRN_JOB

# ---- cairn index: restart from a chosen version, drop one, add one copied in by hand (issue 22, 15) ----
use index
export CAIRN_FLUSH_EVERY=1 CAIRN_KEEP_FLUSHED=100
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "index: first run"; }
reference=$(grep '^result ' "$WORK/run.out")
expect_rc "index: list" 0 "$CAIRN" index
expect_in "index: a restart takes the newest" "$WORK/out" "a restart takes version 9"
expect_rc "index --current 4" 0 "$CAIRN" index --current 4
expect_in "index --current 4: says so" "$WORK/out" "a restart now takes version 4"
expect_rc "index --json" 0 "$CAIRN" index --json
expect_json "index --json: 4 is current, 5-9 skipped" "$WORK/out" \
  'j["restart_from"] == 4 and j["current"] == 4 and [v["version"] for v in j["versions"] if v["skipped"]] == [9, 8, 7, 6, 5]'
heat || { sed 's/^/    | /' "$WORK/run.out"; fail "index: the run from version 4"; }
expect_in "index: the relaunch restarted from version 4" "$WORK/run.out" "restart: version 4 from level"
[ "$(grep '^result ' "$WORK/run.out")" = "$reference" ] && pass "index: from version 4, the failure-free result bit for bit" \
  || fail "index: from version 4 the result differs ($(grep '^result ' "$WORK/run.out") vs $reference)"
n=0; for v in 5 6 7 8 9; do [ -f "$CAIRN_PREFIX/$(printf v%08d "$v")/COMMIT" ] && n=$((n + 1)); done
[ "$n" = 5 ] && pass "index: versions 5-9 are still there" || fail "index: only $n of versions 5-9 are left"
expect_rc "index: list after" 0 "$CAIRN" index
expect_in "index: the new versions (10-14) come after the skipped ones" "$WORK/out" "a restart takes version 14"
expect_rc "index --drop 14" 0 "$CAIRN" index --drop 14
expect_rc "index: list after --drop" 0 "$CAIRN" index
expect_in "index: a restart takes 13 now" "$WORK/out" "a restart takes version 13"
expect_rc "index --current 5 (skipped, but restartable)" 0 "$CAIRN" index --current 5
expect_rc "index --current 99 (none)" 3 "$CAIRN" index --current 99
expect_rc "index --current x" 2 "$CAIRN" index --current x
expect_rc "index --current 3 --drop 2" 2 "$CAIRN" index --current 3 --drop 2
# --add: a version copied back by hand is accepted once it verifies; a damaged copy is refused and skipped.
mv "$CAIRN_PREFIX/v00000003" "$WORK/v3.saved"
cp -r "$WORK/v3.saved" "$CAIRN_PREFIX/v00000003"
expect_rc "index --add 3 (a good copy)" 0 "$CAIRN" index --add 3
expect_in "index --add 3: verified" "$WORK/out" "version 3 verified"
python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0xff; open(p, 'wb').write(b)" \
  "$CAIRN_PREFIX/v00000002/rank-1.data"
expect_rc "index --add 2 (a damaged copy)" 1 "$CAIRN" index --add 2
expect_in "index --add 2: refused, and why" "$WORK/err" "version 2 is not accepted: L3 bad"
expect_rc "index --json after --add" 0 "$CAIRN" index --json
expect_json "index: 2 skipped, 3 added" "$WORK/out" \
  '{v["version"]: (v["skipped"], v["added"]) for v in j["versions"]}[2] == (True, False) and {v["version"]: (v["skipped"], v["added"]) for v in j["versions"]}[3] == (False, True)'
# The knob: one launch from a chosen version, the index aside.
rm -f "$CAIRN_PREFIX/.cairn/index"
CAIRN_RESTART_VERSION=4 heat || { sed 's/^/    | /' "$WORK/run.out"; fail "index: the run with restart_version"; }
expect_in "index: restart_version = 4 restarted from version 4" "$WORK/run.out" "restart: version 4 from level"
[ "$(grep '^result ' "$WORK/run.out")" = "$reference" ] && pass "index: restart_version 4, the failure-free result" \
  || fail "index: restart_version 4: the result differs"
unset CAIRN_FLUSH_EVERY CAIRN_KEEP_FLUSHED

# ---- l2_every: per-level intervals, as FTI users set them (issue 22, 16) --------------------------
use l2every
CAIRN_L2_EVERY=2 CAIRN_CACHE_VERSIONS=4 heat || { sed 's/^/    | /' "$WORK/run.out"; fail "l2_every: the run"; }
[ "$(grep '^result ' "$WORK/run.out")" = "$reference" ] && pass "l2_every: the failure-free result" || fail "l2_every: the result differs"
expect_rc "l2_every: list --json" 0 "$CAIRN" list --json
expect_json "l2_every = 2: the even versions are protected, the odd ones L1 only" "$WORK/out" \
  'all(v["l2"]["complete"] == (v["version"] % 2 == 0) for v in j["versions"] if v["l1"]["complete"]) and {8, 9} <= {v["version"] for v in j["versions"] if v["l1"]["complete"]}'

# ---- --json on every tool that reports; "nothing here" on stderr (issue 22, 11) -----------------
use json
"$CAIRN" run --json "$WORK/summary.json" --no-scavenge -n 4 --nodes 2 --kill-node 1 --at-checkpoint 3 -- \
  "$HEAT" --n 64 --iters 100 --checkpoint-every 10 >"$WORK/run.out" 2>&1 \
  || { sed 's/^/    | /' "$WORK/run.out"; fail "json: the run"; }
expect_json "json: run --json FILE" "$WORK/summary.json" \
  'len(j["attempts"]) == 2 and j["attempts"][0]["failed"] and j["attempts"][0]["killed"] == "node1 (ranks 2,3)" and j["attempts"][1]["restart"]["version"] in (2, 3) and j["exit_status"] == 0 and j["failed_attempts"] == 1'
expect_rc "json: run --json - after the job's output" 0 "$CAIRN" run --json - -n 2 -- "$HEAT" --n 64 --iters 10 --checkpoint-every 10 --no-restart
python3 -c "import json,sys; t=open(sys.argv[1]).read(); i=t.index('{\n'); json.loads(t[i:]); assert 'result ' in t[:i]" "$WORK/out" \
  && pass "json: run --json - prints the job's output, then one JSON document" || { fail "json: run --json -"; sed 's/^/    | /' "$WORK/out"; }
for tool in "list" "verify" "show 10" "flush" "clean --dry-run" "config" "strerror -5" "strerror --list" "watch --once"; do
  # shellcheck disable=SC2086
  "$CAIRN" $tool --json >"$WORK/out" 2>"$WORK/err"
  expect_json "json: cairn $tool --json" "$WORK/out"
done
expect_rc "json: show 3 (gone) --json" 3 "$CAIRN" show 999 --json
expect_json "json: show of a missing version is still JSON" "$WORK/out" 'j["found"] is False and j["version"] == 999 and j["exit_status"] == 3'
expect_in "json: and says so on stderr" "$WORK/err" "cairn show: no version 999"
expect_rc "json: flush --json" 0 "$CAIRN" flush --json
expect_json "json: flush --json says what it did" "$WORK/out" 'j["exit_status"] == 0 and (j["flushed"] or j["notes"])'
expect_rc "json: clean --json" 0 "$CAIRN" clean --json
expect_json "json: clean --json lists what it removed" "$WORK/out" 'j["exit_status"] == 0 and len(j["removed"]) > 0 and j["level"] == "all"'
expect_rc "json: config --json" 0 env CAIRN_SET_SIZE=3 "$CAIRN" config --json
expect_json "json: config --json values and origins" "$WORK/out" \
  '{k["name"]: (k["value"], k["origin"]) for k in j["knobs"]}["set_size"] == (3, "environment variable CAIRN_SET_SIZE") and {k["name"]: k["type"] for k in j["knobs"]}["halt_seconds"] == "duration"'
expect_rc "json: strerror -5 --json" 0 "$CAIRN" strerror -5 --json
expect_json "json: strerror --json" "$WORK/out" 'j == {"code": -5, "name": "CAIRN_ERR_IO", "message": "I/O error"}'
use json-empty
expect_rc "json: verify on nothing" 3 "$CAIRN" verify
[ ! -s "$WORK/out" ] && pass "json: nothing to verify is not on stdout" || fail "json: verify printed on stdout"
expect_in "json: nothing to verify, tagged, on stderr" "$WORK/err" "cairn verify: nothing to verify"
expect_rc "json: clean on nothing" 0 "$CAIRN" clean
[ ! -s "$WORK/out" ] && pass "json: nothing to clean is not on stdout" || fail "json: clean printed on stdout"
expect_rc "json: watch --once on nothing" 3 "$CAIRN" watch --once
expect_in "json: no job state, tagged, on stderr" "$WORK/err" "cairn watch: no job state"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
