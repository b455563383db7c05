#!/usr/bin/env bash
# halt_cli: `cairn halt` on a prefix of its own, without a job (docs/halt.md): --list and --json only
# show (they never set a halt), conditions with --json set them and show the result as JSON, --unset
# removes the file, and bad input is refused with exit status 2 and the file left as it was.
#
# Usage: halt_cli_test.sh PATH/TO/cairn
set -u

CAIRN=${1:?usage: halt_cli_test.sh PATH/TO/cairn}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cairn-halt-cli.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset CAIRN_CONFIG CAIRN_LOG
export CAIRN_PREFIX=$WORK/prefix
mkdir -p "$CAIRN_PREFIX"
HALT=$CAIRN_PREFIX/.cairn/halt

. "$(dirname "${BASH_SOURCE[0]}")/check.sh"  # failures, pass, fail, expect_rc, expect_in
# json_is NAME PYTHON-EXPR : the JSON on stdout ($WORK/out) as `j` makes EXPR true.
json_is() {
  if python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$WORK/out" 2>"$WORK/pyerr"; then
    pass "$1"
  else
    fail "$1: not true of the output: $2"
    sed 's/^/    out: /' "$WORK/out"
    sed 's/^/    py:  /' "$WORK/pyerr"
  fi
}
no_halt() { if [ -e "$HALT" ]; then fail "$1: $HALT exists"; else pass "$1"; fi; }

# --json alone shows, as --list does: no halt file appears.
expect_rc "halt --json without a halt" 0 "$CAIRN" halt --json
json_is "... says none is set" 'j["set"] is False and j["path"].endswith(".cairn/halt")'
no_halt "... and sets none"
expect_rc "halt --list --json" 0 "$CAIRN" halt --list --json
no_halt "... sets none either"
expect_rc "halt --list" 0 "$CAIRN" halt --list
grep -q "no halt set" "$WORK/out" && pass "... says no halt is set" || fail "halt --list: $(cat "$WORK/out")"
no_halt "... and sets none"

# With a condition, --json sets it and prints what is set now.
expect_rc "halt --checkpoints 3 --json" 0 "$CAIRN" halt --checkpoints 3 --json
json_is "... prints the condition" 'j["set"] is True and j["conditions"]["checkpoints"] == 3 and not j["plain"]'
[ -f "$HALT" ] && pass "... and writes the halt file" || fail "halt --checkpoints 3 --json wrote no $HALT"
before=$(cat "$HALT")
expect_rc "halt --json with a halt set" 0 "$CAIRN" halt --json
json_is "... shows it" 'j["set"] is True and j["conditions"]["checkpoints"] == 3'
[ "$(cat "$HALT")" = "$before" ] && pass "... without changing it" || fail "halt --json changed $HALT"

# A plain halt replaces the conditions; --json alone keeps showing it.
expect_rc "plain halt" 0 "$CAIRN" halt
expect_rc "halt --json after a plain halt" 0 "$CAIRN" halt --json
json_is "... shows a plain halt" 'j["set"] is True and j["plain"] is True'

# Bad input: refused, nothing changed.
before=$(cat "$HALT")
expect_rc "halt --checkpoints 0 --json" 2 "$CAIRN" halt --checkpoints 0 --json
expect_rc "halt --unset --immediate" 2 "$CAIRN" halt --unset --immediate
[ "$(cat "$HALT")" = "$before" ] && pass "... the halt file unchanged" || fail "bad input changed $HALT"
expect_rc "halt on a prefix that does not exist" 2 "$CAIRN" halt "$WORK/nothing" --json

# --unset --json removes it and says so as JSON.
expect_rc "halt --unset --json" 0 "$CAIRN" halt --unset --json
json_is "... says none is set" 'j["set"] is False'
no_halt "... and the file is gone"

echo "halt_cli: $failures failure(s)"
[ "$failures" -eq 0 ]
