# The checks the tools' shell tests share; source it after setting WORK (a scratch directory).
# Each check prints "ok   - NAME" or "FAIL - NAME: why" and counts the failures in $failures.
failures=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; failures=$((failures + 1)); }

# expect_rc NAME RC CMD... : runs CMD (stdout in $WORK/out, stderr in $WORK/err), checks its status.
expect_rc() {
  local name=$1 want=$2
  shift 2
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass "$name"; else
    fail "$name: exit status $rc, expected $want"
    sed 's/^/    out: /' "$WORK/out"
    sed 's/^/    err: /' "$WORK/err"
  fi
}
# expect_in NAME FILE TEXT : FILE contains TEXT (fixed string).
expect_in() {
  if grep -qF -- "$3" "$2"; then pass "$1"; else
    fail "$1: '$3' not in $(basename "$2")"
    sed 's/^/    | /' "$2"
  fi
}
