#!/usr/bin/env bash
# Hidden check for total.sh (run with cwd = the workspace).
ws=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect_error() { # expect_error LABEL ARGS...
    local label=$1
    shift
    out=$(bash "$ws/total.sh" "$@" 2>"$tmp/err")
    rc=$?
    [ "$rc" -ne 0 ] || fail "$label: exited 0, expected a non-zero exit status"
    [ -z "$out" ] || fail "$label: printed '$out' on stdout, expected nothing"
    [ -s "$tmp/err" ] || fail "$label: no error message on stderr"
}

expect_sum() { # expect_sum LABEL FILE EXPECTED
    out=$(bash "$ws/total.sh" "$2" 2>"$tmp/err")
    rc=$?
    [ "$rc" -eq 0 ] || fail "$1: exited $rc, expected 0 (stderr: $(cat "$tmp/err"))"
    [ "$out" = "$3" ] || fail "$1: printed '$out', expected '$3'"
}

expect_error "missing file" "$tmp/does-not-exist.txt"
expect_error "missing file in missing dir" "$tmp/nope/numbers.txt"
expect_error "no argument"
expect_error "empty argument" ""
mkdir "$tmp/a dir"
expect_error "directory instead of file" "$tmp/a dir"

printf '10\n20\n# comment\n\n12\n' > "$tmp/numbers.txt"
expect_sum "basic file" "$tmp/numbers.txt" 42
printf '5\n-8\n3' > "$tmp/no newline.txt"
expect_sum "negative numbers, no trailing newline" "$tmp/no newline.txt" 0
: > "$tmp/empty.txt"
expect_sum "empty file" "$tmp/empty.txt" 0
printf '# only comments\n\n' > "$tmp/comments.txt"
expect_sum "only comments" "$tmp/comments.txt" 0

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "ok: all total.sh cases pass"
