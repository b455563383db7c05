#!/usr/bin/env bash
# tools: the inspection tools (list, show, verify, flush, clean, watch, plot) on an empty prefix, on
# checkpoints written by heat2d under `cairn run`, and on damaged ones; `flush` gives an L3 version a
# relaunched job restarts from once the caches are gone, with the failure-free result; the job history
# of a run that lost a node (both launches, the restart, every version), drawn by plot and read by watch.
#
# Usage: tools_test.sh PATH/TO/cairn PATH/TO/heat2d
# Environment: CAIRN_MPIRUN_ARGS (e.g. --oversubscribe) and, for Open MPI as root,
# OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -u

CAIRN=${1:?usage: tools_test.sh PATH/TO/cairn PATH/TO/heat2d}
HEAT=${2:?usage: tools_test.sh PATH/TO/cairn PATH/TO/heat2d}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tools.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset CAIRN_CONFIG CAIRN_LOG CAIRN_FLUSH_EVERY CAIRN_FLUSH_ON_FINALIZE CAIRN_KEEP_FLUSHED CAIRN_CACHE_VERSIONS CAIRN_CHUNK_SIZE

. "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # failures, pass, fail, expect_rc, expect_in
expect_not_in() {
  if ! grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' unexpectedly in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
# expect_py NAME EXPR : python3 EXPR over the JSON in $WORK/out (bound to j) is true.
expect_py() {
  if python3 -c "import json,sys; j=json.load(open('$WORK/out')); sys.exit(0 if ($2) else 1)" 2>"$WORK/pyerr"; then
    pass "$1"
  else
    fail "$1: $2"
    sed 's/^/    | /' "$WORK/out" | head -40
    sed 's/^/    py: /' "$WORK/pyerr"
  fi
}
# expect_png NAME FILE WIDTH HEIGHT: FILE is a valid 8-bit RGB or RGBA PNG of that size (signature, IHDR,
# every chunk's CRC, the image data's length).
expect_png() {
  if python3 - "$2" "$3" "$4" <<'EOF'; then pass "$1 wrote a valid PNG (signature, IHDR $3x$4, CRCs, image size)"; else fail "$1: the PNG is not valid"; fi
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'signature'
pos, chunks, idat = 8, [], b''
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc, = struct.unpack('>I', data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, 'crc of ' + kind.decode()
    chunks.append(kind)
    if kind == b'IDAT':
        idat += body
    pos += 12 + n
assert chunks[0] == b'IHDR' and chunks[-1] == b'IEND', chunks
w, h, depth, color = struct.unpack('>IIBB', data[16:26])
assert (w, h, depth) == (int(sys.argv[2]), int(sys.argv[3]), 8) and color in (2, 6), (w, h, depth, color)
assert len(zlib.decompress(idat)) == h * (1 + (3 if color == 2 else 4) * w), 'image data size'
EOF
}
# expect_svg NAME FILE CHECK...: the picture's content, from the ids cairn.plot gives its artists (kept
# as element ids in SVG). Each CHECK is ID=N: the element with that id exists and holds N marks (points
# of a line, bars of a lane: <use> or <path> elements inside it), or ID=absent.
expect_svg() {
  local name=$1 file=$2
  shift 2
  if python3 - "$file" "$@" <<'EOF' >"$WORK/svgout" 2>&1; then pass "$name: the picture holds $*"; else fail "$name: the picture"; sed 's/^/    | /' "$WORK/svgout"; fi
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ids = {e.get('id'): e for e in root.iter() if e.get('id')}
for check in sys.argv[2:]:
    gid, want = check.split('=')
    if want == 'absent':
        assert gid not in ids, f'{gid} is there'
        continue
    assert gid in ids, f'no element {gid}; ids: {sorted(i for i in ids if "-" in i)}'
    marks = [e for e in ids[gid].iter() if e.tag.endswith('}use')]
    if not marks:  # bars: one path each
        marks = [e for e in ids[gid].iter() if e.tag.endswith('}path')]
    assert len(marks) == int(want), f'{gid}: {len(marks)} marks, expected {want}'
EOF
}
# use NAME: the job's prefix, cache and name (every tool finds them through the CAIRN_* variables).
use() {
  export CAIRN_PREFIX=$WORK/$1/prefix CAIRN_CACHE_DIR=$WORK/$1/cache CAIRN_JOB=tools-$1-$$
  CACHE_JOB=$CAIRN_CACHE_DIR/cairn-$CAIRN_JOB
}
# heat2d on 4 ranks / 2 simulated nodes; the output is in $WORK/run.out. The tools look at what the
# library alone left: no scavenge by `cairn run` at the end, where it has one.
RUN_OPTS=()
"$CAIRN" run --help 2>/dev/null | grep -q -- --no-scavenge && RUN_OPTS=(--no-scavenge)
heat() {
  "$CAIRN" run "${RUN_OPTS[@]}" -n 4 --nodes 2 -- "$HEAT" --n 128 --iters 200 --checkpoint-every 20 >"$WORK/run.out" 2>&1
}
# flip_byte FILE OFFSET
flip_byte() {
  python3 -c "
import sys
p, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read()); b[off] ^= 0xff; open(p, 'wb').write(b)" "$1" "$2"
}
# The slot file of rank R's record of version V on NODE.
slot_of() {
  python3 -c "
import struct, sys
d = sys.argv[1]
print(d + '/slot-%d.data' % struct.unpack('<I', open(d + '/v' + sys.argv[2] + '.l1', 'rb').read(4))[0])" \
    "$CACHE_JOB/$1/r$2" "$3"
}

# ---- an empty prefix ----------------------------------------------------------------------------
use empty
expect_rc "empty: list" 0 "$CAIRN" list
expect_in "empty: list says so, on stderr" "$WORK/err" "cairn list: no checkpoints in $CAIRN_PREFIX"
expect_rc "empty: list --json" 0 "$CAIRN" list --json
expect_py "empty: list --json has no version" 'j["versions"] == [] and j["prefix"] == "'"$CAIRN_PREFIX"'"'
expect_rc "empty: show 1" 3 "$CAIRN" show 1
expect_in "empty: show says so" "$WORK/err" "no checkpoints"
expect_rc "empty: verify" 3 "$CAIRN" verify
expect_in "empty: verify says so, on stderr" "$WORK/err" "cairn verify: nothing to verify: no checkpoints"
expect_rc "empty: verify --json" 3 "$CAIRN" verify --json
expect_py "empty: verify --json" 'j["results"] == [] and j["exit_status"] == 3'
expect_rc "empty: flush" 3 "$CAIRN" flush
expect_in "empty: flush says so" "$WORK/err" "nothing to flush"
expect_rc "empty: clean" 0 "$CAIRN" clean
expect_in "empty: clean says so, on stderr" "$WORK/err" "cairn clean: nothing to clean: no checkpoints"
expect_rc "empty: watch --once" 3 "$CAIRN" watch --once
expect_in "empty: watch says so, on stderr" "$WORK/err" "cairn watch: no job state"
expect_rc "empty: plot" 3 "$CAIRN" plot --out "$WORK/empty.png"
[ ! -e "$WORK/empty.png" ] && pass "empty: plot wrote nothing" || fail "empty: plot wrote a file"
expect_rc "usage: verify --level l2" 2 "$CAIRN" verify --level l2
expect_rc "usage: show needs a version" 2 "$CAIRN" show
expect_rc "usage: show abc" 2 "$CAIRN" show abc
expect_rc "usage: clean --keep 0" 2 "$CAIRN" clean --keep 0
expect_rc "usage: plot needs --out" 2 "$CAIRN" plot
expect_in "usage: plot says what it needs" "$WORK/err" "--out FILE is required"
expect_rc "empty: plot --json" 3 "$CAIRN" plot --json
expect_py "empty: plot --json has nothing" 'j["versions"] == [] and j["launches"] == []'
expect_rc "usage: verify 1 2 3" 2 "$CAIRN" verify 1 2 3

# ---- job a: a good prefix, then flush and restart from L3 ---------------------------------------
# Checkpoints 1..9; every 4th is flushed (4, 8); 9 stays in L1 only (no flush at finalize).
use a
export CAIRN_FLUSH_EVERY=4 CAIRN_FLUSH_ON_FINALIZE=false CAIRN_KEEP_FLUSHED=10 CAIRN_CHUNK_SIZE=4K
heat || { cat "$WORK/run.out"; fail "job a ran"; }
result=$(grep '^result ' "$WORK/run.out")
[ -n "$result" ] && pass "job a: $result" || fail "job a printed no result"

expect_rc "good: list" 0 "$CAIRN" list
expect_in "good: list shows version 9 in L1 and L2" "$WORK/out" "4/4      protected (xor)    -"
expect_in "good: list shows version 8 committed" "$WORK/out" "committed"
expect_rc "good: list --json" 0 "$CAIRN" list --json
expect_py "good: list --json newest first" '[v["version"] for v in j["versions"]] == [9, 8, 4]'
expect_py "good: list --json levels of 9" 'j["versions"][0]["l1"]["complete"] and j["versions"][0]["l2"]["complete"] and j["versions"][0]["l3"]["state"] == "absent" and j["versions"][0]["l1"]["nodes"] == ["node0", "node1"]'
expect_py "good: list --json size of 9" 'j["versions"][0]["size_bytes"] > 128*128*8 and j["versions"][0]["nranks"] == 4'
# (CAIRN_JOB names the job, so the cache stays the job's: only the prefix changes.)
mkdir -p "$WORK/empty/prefix"
expect_rc "good: list PREFIX argument" 0 "$CAIRN" list --json "$WORK/empty/prefix"
expect_py "good: the PREFIX argument overrides" 'j["prefix"] == "'"$WORK/empty/prefix"'" and [v["version"] for v in j["versions"]] == [9, 8]'

expect_rc "good: show 9" 0 "$CAIRN" show 9
expect_in "good: show 9 regions" "$WORK/out" "block_rows 128x128"
expect_in "good: show 9 L1 nodes" "$WORK/out" "L1  4/4 ranks: node0 (ranks 0,1), node1 (ranks 2,3)"
expect_in "good: show 9 L2 sets" "$WORK/out" "set: xor"
expect_rc "good: show v00000008" 0 "$CAIRN" show v00000008
expect_in "good: show 8 L3 layout" "$WORK/out" "rank-3.manifest"
expect_in "good: show 8 COMMIT" "$WORK/out" "COMMIT: version 8, 4 ranks"
expect_rc "good: show 9 --json" 0 "$CAIRN" show 9 --json
expect_py "good: show --json regions" 'sorted(r["name"] for r in j["regions"]) == ["grid", "iter"] and len(j["ranks"]) == 4'
expect_py "good: show --json chunks" 'all(r["chunk_size"] == 4096 and r["chunks"] >= 2 for r in j["ranks"])'
expect_rc "good: show 5 (gone)" 3 "$CAIRN" show 5

expect_rc "good: verify" 0 "$CAIRN" verify
expect_in "good: verify totals" "$WORK/out" "4 good, 0 bad, 0 incomplete"
expect_not_in "good: verify draws no progress bar without a terminal" "$WORK/err" "verify ["
expect_rc "good: verify --json" 0 "$CAIRN" verify --json
expect_py "good: verify --json" 'j["good"] == 4 and j["bad"] == 0 and all(r["state"] == "good" for r in j["results"])'
expect_rc "good: verify 9 --level l1" 0 "$CAIRN" verify 9 --level l1
expect_rc "good: verify 4 --level l3" 0 "$CAIRN" verify 4 --level l3
expect_rc "good: verify 9 --level l3 (not there)" 3 "$CAIRN" verify 9 --level l3

expect_rc "good: watch --once" 0 "$CAIRN" watch --once
expect_in "good: watch shows the finalized job" "$WORK/out" "finalized  version 9  last checkpoint 9"
expect_rc "good: watch --once --json" 0 "$CAIRN" watch --once --json
expect_py "good: watch --json" 'j["finalized"] and j["last_checkpoint"]["version"] == 9 and j["last_checkpoint"]["source"] == "manifest" and j["levels"]["l3"]["version"] == 8'
expect_rc "good: watch (finalized: exits at once)" 0 timeout 20 "$CAIRN" watch --interval 0.1

expect_rc "good: plot" 0 "$CAIRN" plot --out "$WORK/a.png"
expect_in "good: plot draws from the history" "$WORK/out" "from the history $CAIRN_PREFIX/.cairn/history: 1 launch, 9 versions (1..9), 0 restarts"
expect_png "good: plot" "$WORK/a.png" 1000 640

# flush: version 9 goes to L3; a relaunch without the caches restarts from it.
expect_rc "flush" 0 "$CAIRN" flush
expect_in "flush: names the version" "$WORK/out" "cairn flush: version 9 committed in $CAIRN_PREFIX/v00000009"
[ -f "$CAIRN_PREFIX/v00000009/COMMIT" ] && pass "flush: COMMIT written" || fail "flush: no COMMIT"
expect_rc "flush: L3 copy verifies" 0 "$CAIRN" verify 9 --level l3
expect_rc "flush again" 0 "$CAIRN" flush
expect_in "flush again: nothing to do" "$WORK/out" "already committed"
rm -rf "$CAIRN_CACHE_DIR"
heat || { cat "$WORK/run.out"; fail "job a relaunched"; }
expect_in "flush: the relaunch restarts from L3" "$WORK/run.out" "restart: version 9 from level L3"
expect_in "flush: the relaunch gives the failure-free result" "$WORK/run.out" "$result"

# ---- job b: damaged copies ----------------------------------------------------------------------
# Checkpoints 1..9 with 3 L1 versions kept (7, 8, 9); every 2nd flushed and 9 at finalize.
use b
export CAIRN_FLUSH_EVERY=2 CAIRN_FLUSH_ON_FINALIZE=true CAIRN_CACHE_VERSIONS=3
heat || { cat "$WORK/run.out"; fail "job b ran"; }
expect_rc "clean --dry-run" 0 "$CAIRN" clean --dry-run
expect_in "clean --dry-run: keeps the newest at L1" "$WORK/out" "L1: newest good version 9; keeping 9"
expect_in "clean --dry-run: would remove L1 8" "$WORK/out" "would remove L1 version 8"
expect_in "clean --dry-run: would remove L3 2" "$WORK/out" "would remove L3 version 2 (committed)"
expect_rc "clean --dry-run removed nothing" 0 "$CAIRN" list --json
expect_py "clean --dry-run removed nothing: versions" '[v["version"] for v in j["versions"]] == [9, 8, 7, 6, 4, 2]'

flip_byte "$(slot_of node1 2 9)" 100      # rank 2's L1 copy of version 9
flip_byte "$CAIRN_PREFIX/v00000009/rank-1.data" 5000
expect_rc "corrupt: verify" 1 "$CAIRN" verify
expect_in "corrupt: verify names the L1 chunk" "$WORK/out" "version 9  L1  BAD         rank 2 (node1/r2, slot"
expect_in "corrupt: verify names the L1 chunk (2)" "$WORK/out" "chunk 0 (bytes 0..4095, region 'grid') checksum mismatch"
expect_in "corrupt: verify names the L3 chunk" "$WORK/out" "v00000009/rank-1.data): chunk 1 (bytes 4096..8191, region 'grid') checksum mismatch"
expect_in "corrupt: verify counts" "$WORK/out" "2 bad"
expect_rc "corrupt: verify --json" 1 "$CAIRN" verify --json
expect_py "corrupt: verify --json" 'j["bad"] == 2 and j["exit_status"] == 1 and sum(r["state"] == "bad" for r in j["results"]) == 2'
expect_rc "corrupt: verify 8" 0 "$CAIRN" verify 8
expect_rc "corrupt: list still works" 0 "$CAIRN" list
expect_in "corrupt: list shows 9" "$WORK/out" "ckpt.9"
expect_rc "corrupt: show 9 still works" 0 "$CAIRN" show 9

# flush refuses a damaged version.
mv "$CAIRN_PREFIX/v00000009" "$WORK/b-v9"
expect_rc "corrupt: flush 9" 1 "$CAIRN" flush 9
expect_in "corrupt: flush 9 names the chunk" "$WORK/err" "checksum mismatch"
[ ! -e "$CAIRN_PREFIX/v00000009/COMMIT" ] && pass "corrupt: flush 9 committed nothing" || fail "corrupt: flush 9 committed"
expect_rc "corrupt: flush (9 bad, 8 already in L3)" 1 "$CAIRN" flush
expect_in "corrupt: flush falls back to 8" "$WORK/out" "version 8, the newest good version complete in L1, is already committed"
rm -rf "$CAIRN_PREFIX/v00000009"
mv "$WORK/b-v9" "$CAIRN_PREFIX/v00000009"

# clean never removes the newest good version (8 at both levels, 9 being damaged) nor newer ones.
mkdir -p "$CAIRN_PREFIX/v00000003" "$CAIRN_PREFIX/v00000010"
echo partial >"$CAIRN_PREFIX/v00000003/rank-0.data"
# A recycle pool, as a job killed after a prune leaves one (a job empties its own when it stops).
mkdir -p "$CAIRN_PREFIX/.cairn/recycle" && echo old >"$CAIRN_PREFIX/.cairn/recycle/rank-1.data"
expect_rc "clean" 0 "$CAIRN" clean
expect_in "clean: removes the recycle pool once the job has ended" "$WORK/out" "removed L3 recycle pool $CAIRN_PREFIX/.cairn/recycle (1 data file of removed versions"
[ ! -e "$CAIRN_PREFIX/.cairn/recycle" ] && pass "clean: the recycle pool is gone" || fail "clean: the recycle pool is still there"
expect_in "clean: L1 9 is not good" "$WORK/out" "L1 version 9 is not good"
expect_in "clean: keeps the newest good at L1" "$WORK/out" "L1: newest good version 8; keeping 9, 8"
expect_in "clean: keeps the newest good at L3" "$WORK/out" "L3: newest good version 8; keeping 9, 8"
expect_in "clean: removes L1 7" "$WORK/out" "removed L1 version 7 from 4 rank directories"
expect_in "clean: removes an incomplete L3 directory" "$WORK/out" "removed L3 version 3 (incomplete)"
expect_not_in "clean: keeps the newer incomplete L3 directory" "$WORK/out" "version 10"
expect_rc "clean: list" 0 "$CAIRN" list --json
expect_py "clean: what is left" '[(v["version"], v["l1"]["ranks"], v["l3"]["state"]) for v in j["versions"]] == [(10, 0, "incomplete"), (9, 4, "committed"), (8, 4, "committed")]'
expect_rc "clean: the newest good version still verifies" 0 "$CAIRN" verify 8
expect_rc "clean again: nothing to remove" 0 "$CAIRN" clean
expect_in "clean again: nothing to remove" "$WORK/err" "cairn clean: nothing to remove"

# ---- job h: the history of a job that lost a node -----------------------------------------------
# Node 1 is killed after checkpoint 6 and the relaunch restarts from L2. Only 2 versions stay at each
# level (cache_versions, keep_flushed), but the history keeps all 9 and both launches.
use hist
export CAIRN_FLUSH_EVERY=2 CAIRN_FLUSH_ON_FINALIZE=true CAIRN_CACHE_VERSIONS=2 CAIRN_KEEP_FLUSHED=2
HIST=$CAIRN_PREFIX/.cairn/history
# The steps sleep 10 ms: between the failure point (version 6 protected) and the launcher's kill the ranks
# compute on, and a rank that reached checkpoint 7 in that time would leave a partial version 7 in its
# cache, which the relaunch never reuses the number of (it would number on from 8). 20 steps of 10 ms keep
# the next checkpoint well behind the kill even on two busy cores.
"$CAIRN" run -n 4 --nodes 2 --kill-node 1 --at-checkpoint 6 --phase compute -- \
  "$HEAT" --n 128 --iters 200 --checkpoint-every 20 --sleep-ms 10 >"$WORK/run.out" 2>&1 || { cat "$WORK/run.out"; fail "job h ran"; }
expect_in "history: the relaunch restarted from L2" "$WORK/run.out" "restart: version 6 from level L2"
expect_in "history: the relaunch gives the failure-free result" "$WORK/run.out" "$result"
if python3 - "$HIST" <<'EOF' >"$WORK/pyout" 2>&1; then pass "history: the file holds both launches, the restart and every version"; else fail "history: the file"; sed 's/^/    | /' "$WORK/pyout"; fi
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["v"] == 1 and isinstance(l["t"], int) and l["launch"] for l in lines), "v, t, launch on every line"
starts = [l for l in lines if l["ev"] == "start"]
assert len(starts) == 2 and starts[0]["launch"] != starts[1]["launch"], starts
assert all(s["ranks"] == 4 and s["nodes"] == 2 and s["groups"] == ["node0", "node1"] and s["redundancy"] == "xor"
           and s["flush_every"] == 2 and s["l2"] for s in starts), starts
a, b = starts[0]["launch"], starts[1]["launch"]
of = lambda ev, launch: [l for l in lines if l["ev"] == ev and l["launch"] == launch]
assert [l["version"] for l in of("l1", a)] == [1, 2, 3, 4, 5, 6], of("l1", a)
assert [l["version"] for l in of("l2", a)] == [1, 2, 3, 4, 5, 6], of("l2", a)
assert [l["version"] for l in of("l3", a)] == [2, 4], of("l3", a)
assert [l["version"] for l in of("l1", b)] == [7, 8, 9], of("l1", b)
assert [(l["version"], l["at_finalize"]) for l in of("l3", b)] == [(8, False), (9, True)], of("l3", b)
assert of("end", a) == [], "the killed launch has no end line"
assert [l["status"] for l in of("end", b)] == ["ok"], of("end", b)
r = of("restart", b)
assert len(r) == 1 and r[0]["version"] == 6 and r[0]["level"] == "L2" and r[0]["start_ns"] <= r[0]["end_ns"], r
v1 = of("l1", a)[0]
assert v1["bytes"] == 4 * v1["rank_bytes"] and v1["rank_bytes"] > 128 * 32 * 8, v1
assert r[0]["bytes"] == v1["bytes"], (r, v1)
assert all(l["start_ns"] <= l["end_ns"] and l["copy_s"] > 0 for l in of("l1", a) + of("l1", b))
assert all(l["redundancy_bytes"] > 0 and l["bytes"] == v1["bytes"] for l in of("l2", a) + of("l2", b))
EOF
expect_rc "history: list shows what survived pruning" 0 "$CAIRN" list --json
expect_py "history: 2 versions on disk" '[v["version"] for v in j["versions"]] == [9, 8]'

expect_rc "history: plot" 0 "$CAIRN" plot --out "$WORK/h.png"
expect_in "history: plot summary" "$WORK/out" "from the history $HIST: 2 launches, 9 versions (1..9), 1 restart (last: version 6 from L2), 0 failures"
expect_png "history: plot" "$WORK/h.png" 1000 640
# The picture's content: a line per level with a point per version that reached it (L3: 2, 4, 8, 9),
# broken between the launches; a bar per version in each lane; a band per launch, the first one marked
# as ended without finalize (killed); a marker for the one restart; no failure.
expect_rc "history: plot to SVG" 0 "$CAIRN" plot --out "$WORK/h.svg"
expect_svg "history: plot" "$WORK/h.svg" bandwidth-L1=9 bandwidth-L2=9 bandwidth-L3=4 versions-L1=9 versions-L2=9 \
  versions-L3=4 launch-1=1 launch-2=1 unfinished-1=1 unfinished-2=absent restart-1=1 restart-2=absent failure-1=absent
expect_rc "history: plot to PDF" 0 "$CAIRN" plot --out "$WORK/h.pdf"
[ "$(head -c 5 "$WORK/h.pdf")" = "%PDF-" ] && pass "history: plot wrote a PDF" || fail "history: plot did not write a PDF"
expect_rc "usage: plot to an unknown format" 2 "$CAIRN" plot --out "$WORK/h.xyz"
expect_in "usage: plot names the formats" "$WORK/err" "the extension names no format matplotlib writes"
[ ! -e "$WORK/h.xyz" ] && pass "usage: plot wrote nothing for an unknown format" || fail "usage: plot wrote h.xyz"
expect_rc "history: plot --json --width 640" 0 "$CAIRN" plot --json --out "$WORK/h2.png" --width 640
expect_png "history: plot --width 640" "$WORK/h2.png" 640 409
expect_py "history: plot --json has every version" 'j["source"] == "history" and [v["version"] for v in j["versions"]] == list(range(1, 10))'
expect_py "history: plot --json has both launches" '[(l["launch"], l["finalized"], l["versions"]) for l in j["launches"]] == [(1, False, [1, 2, 3, 4, 5, 6]), (2, True, [7, 8, 9])]'
expect_py "history: plot --json restart" '[(r["version"], r["level"]) for r in j["launches"][1]["restarts"]] == [(6, "L2")] and j["launches"][0]["restarts"] == []'
expect_py "history: plot --json levels" 'all(v["levels"]["l1"] and v["levels"]["l2"] for v in j["versions"]) and [v["version"] for v in j["versions"] if v["levels"]["l3"]] == [2, 4, 8, 9]'
expect_py "history: plot --json bandwidths" 'all(j["bandwidth"][l]["samples"] > 0 and j["bandwidth"][l]["mean_bytes_per_s"] > 0 for l in ("l1", "l2", "l3"))'
expect_py "history: plot --json size" 'j["out"] and (j["width"], j["height"]) == (640, 409)'
expect_rc "history: plot --json alone writes no PNG" 0 "$CAIRN" plot --json
expect_py "history: plot --json alone" 'j["out"] is None and len(j["versions"]) == 9'

expect_rc "history: watch --once" 0 "$CAIRN" watch --once
expect_in "history: watch shows the finalized job" "$WORK/out" "finalized  version 9  last checkpoint 9"
expect_in "history: watch shows bandwidth means" "$WORK/out" "(mean "
expect_in "history: watch shows the launches and the restart" "$WORK/out" "launches 2, restarts 1 (last: version 6 from L2)"
expect_rc "history: watch --once --json" 0 "$CAIRN" watch --once --json
expect_py "history: watch --json bandwidth per level" 'all(j["levels"][l]["bandwidth_source"] == "history" and j["levels"][l]["bandwidth_bytes_per_s"] > 0 and j["levels"][l]["mean_bandwidth_bytes_per_s"] > 0 and j["levels"][l]["samples"] > 0 for l in ("l1", "l2", "l3"))'
expect_py "history: watch --json levels reached" 'j["levels"]["l3"]["version"] == 9 and j["levels"]["l3"]["reached_unix_ns"] > 0'
expect_py "history: watch --json restarts" 'j["history"]["present"] and j["history"]["launches"] == 2 and [(r["launch"], r["version"], r["level"]) for r in j["history"]["restarts"]] == [(2, 6, "L2")]'

# A torn last line (a launch killed inside a write) is skipped with a warning, not an error.
printf '{"v":1,"ev":"l1","launch":"x","t":1,"vers' >>"$HIST"
expect_rc "history: plot with a torn last line" 0 "$CAIRN" plot --json
expect_in "history: plot warns about the torn line" "$WORK/err" "torn last line"
expect_py "history: plot still has every version" 'len(j["versions"]) == 9 and any("torn last line" in w for w in j["warnings"])'
expect_rc "history: watch with a torn last line" 0 "$CAIRN" watch --once
expect_in "history: watch warns about the torn line" "$WORK/err" "torn last line"

# Without the history, plot falls back to the versions on disk, and says so.
mv "$HIST" "$WORK/history.saved"
expect_rc "history: plot without it" 0 "$CAIRN" plot --out "$WORK/h3.png"
expect_in "history: plot says it has none" "$WORK/out" "no history at $HIST; times reconstructed from the 2 version(s) still on disk"
expect_png "history: plot from disk" "$WORK/h3.png" 1000 640
expect_in "history: plot from disk names the versions" "$WORK/out" "wrote $WORK/h3.png (1000x640) from the 2 version(s) on disk, 8..9"
expect_rc "history: plot from disk to SVG" 0 "$CAIRN" plot --out "$WORK/h3.svg"
expect_svg "history: plot from disk" "$WORK/h3.svg" versions-L1=2 versions-L3=2 launch-1=absent restart-1=absent
expect_rc "history: plot --json without it" 0 "$CAIRN" plot --json
expect_py "history: plot --json from disk" 'j["source"] == "disk" and [v["version"] for v in j["versions"]] == [8, 9] and j["launches"] == []'
expect_rc "history: watch --once without it" 0 "$CAIRN" watch --once --json
expect_py "history: watch --json without it" 'not j["history"]["present"] and j["levels"]["l1"]["bandwidth_source"] in ("files", None)'
mv "$WORK/history.saved" "$HIST"

# ---- watch: stall alarm -------------------------------------------------------------------------
use stall
mkdir -p "$CAIRN_PREFIX/.cairn"
printf 'phase=compute\nversion=5\nl1=5\nl2=5\nl3=4\nupdated_unix_ns=%s000000000\n' $(($(date +%s) - 100)) \
  >"$CAIRN_PREFIX/.cairn/state"
expect_rc "watch --once --stall: stalled" 4 "$CAIRN" watch --once --stall 30
expect_in "watch --once --stall: alarm" "$WORK/err" "STALL: no new checkpoint"
expect_rc "watch --once --stall --json" 4 "$CAIRN" watch --once --stall 30 --json
expect_py "watch --json: stalled" 'j["stalled"] and not j["finalized"] and j["last_checkpoint"]["source"] == "state"'
expect_rc "watch --once (no --stall)" 0 "$CAIRN" watch --once
printf 'phase=compute\nversion=5\nl1=5\nl2=5\nl3=4\nupdated_unix_ns=%s\n' "$(date +%s%N)" >"$CAIRN_PREFIX/.cairn/state"
expect_rc "watch --stall 1: alarm after a second" 4 timeout 20 "$CAIRN" watch --stall 1 --interval 0.1
# Replaced as cairn replaces it (a new file renamed over the old), so that watch never reads it half-written.
( sleep 0.5; printf 'phase=finalized\nversion=6\nl1=6\nl2=6\nl3=6\n' >"$CAIRN_PREFIX/.cairn/state.new" &&
  mv "$CAIRN_PREFIX/.cairn/state.new" "$CAIRN_PREFIX/.cairn/state" ) &
expect_rc "watch: exits 0 when the job finalizes" 0 timeout 20 "$CAIRN" watch --stall 10 --interval 0.1
wait
expect_in "watch: saw the finalize" "$WORK/out" "the job finalized"

# ---- job i: incremental L3 versions (full_every) ---------------------------------------------------
# A 256-row grid on 4 ranks: heat reaches row 100 by the last checkpoint (5), so versions 4 and 5 (flushed
# every 2nd, 5 at finalize) write only their changed chunks; keep 1 prunes 4, which 5 does not name (its
# unchanged chunks were written by 2), and keeps 2.
use i
export CAIRN_FLUSH_EVERY=2 CAIRN_FULL_EVERY=4 CAIRN_CHUNK_SIZE=4K CAIRN_KEEP_FLUSHED=1
"$CAIRN" run "${RUN_OPTS[@]}" -n 4 --nodes 2 -- "$HEAT" --n 256 --iters 120 --checkpoint-every 20 >"$WORK/run.out" 2>&1 ||
  { cat "$WORK/run.out"; fail "job i ran"; }
unset CAIRN_FULL_EVERY CAIRN_CHUNK_SIZE CAIRN_KEEP_FLUSHED
expect_rc "incremental: list" 0 "$CAIRN" list
expect_in "incremental: list says what 5 needs" "$WORK/out" "incr on 2"
expect_rc "incremental: list --json" 0 "$CAIRN" list --json
expect_py "incremental: 5 needs 2, kept; 4 pruned" '[v["l3"]["needs"] for v in j["versions"] if v["version"] == 5] == [[2]] and [v["l3"]["state"] for v in j["versions"] if v["version"] in (2, 4)] == ["absent", "committed"]'
expect_rc "incremental: verify" 0 "$CAIRN" verify --level l3
expect_rc "incremental: show 5" 0 "$CAIRN" show 5
expect_in "incremental: show 5 says where rank 3's chunks are" "$WORK/out" "rank 3: incremental (depth 2): 1 of 33 chunks written here (8 B), the others in version 2"
mv "$CAIRN_PREFIX/v00000002/rank-3.data" "$WORK/i-r3"
expect_rc "incremental: verify without 2's file" 1 "$CAIRN" verify --level l3
expect_in "incremental: verify says why 5 is bad" "$WORK/out" "version 2, which holds chunks of this one"
mv "$WORK/i-r3" "$CAIRN_PREFIX/v00000002/rank-3.data"
rm "$CAIRN_PREFIX/v00000002/COMMIT"
expect_rc "incremental: list with 2 uncommitted" 0 "$CAIRN" list --json
expect_py "incremental: 5 damaged without 2" '[(v["l3"]["state"], v["l3"]["why"]) for v in j["versions"] if v["version"] == 5] == [("damaged", "incremental: its chunk records name version 2, which is not committed")]'
printf 'cairn-commit 1\nversion 2\nnranks 4\nlabel ckpt.2\n' >"$CAIRN_PREFIX/v00000002/COMMIT"
expect_rc "incremental: clean --level l3" 0 "$CAIRN" clean --level l3
expect_in "incremental: clean keeps what 5 names" "$WORK/out" "keeping version 2: version 5, incremental, has chunks in it"
expect_rc "incremental: verify after clean" 0 "$CAIRN" verify --level l3

echo
if [ "$failures" -eq 0 ]; then echo "tools: all checks passed"; else echo "tools: $failures check(s) failed"; fi
[ "$failures" -eq 0 ]
