#!/usr/bin/env bash
# Hidden check for wordcount.sh (run with cwd = the workspace).
ws=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

check() { # check LABEL EXPECTED FILE...
    local label=$1 expected=$2
    shift 2
    out=$(cd "$tmp" && bash "$ws/wordcount.sh" "$@" 2>"$tmp/.err")
    rc=$?
    [ "$rc" -eq 0 ] || fail "$label: exited $rc (stderr: $(cat "$tmp/.err"))"
    if [ "$out" != "$expected" ]; then
        fail "$label: got $(printf '%q' "$out"), expected $(printf '%q' "$expected")"
    fi
}

cd "$tmp" || exit 1
printf 'one two three' > no-newline.txt
printf 'alpha\tbeta  gamma\n\n\n   delta\n' > spacing.txt
printf 'single\n' > single.txt
: > empty.txt
printf '\n\n\n' > blank.txt
printf 'a b\nc d\ne f\n' > "with space.txt"

check "no trailing newline" $'3 no-newline.txt\n3 total' no-newline.txt
check "tabs, runs of spaces, blank lines" $'4 spacing.txt\n4 total' spacing.txt
check "single word" $'1 single.txt\n1 total' single.txt
check "empty file" $'0 empty.txt\n0 total' empty.txt
check "only blank lines" $'0 blank.txt\n0 total' blank.txt
check "file name with a space" $'6 with space.txt\n6 total' "with space.txt"
check "several files" $'3 no-newline.txt\n4 spacing.txt\n0 blank.txt\n1 single.txt\n8 total' \
    no-newline.txt spacing.txt blank.txt single.txt
check "no files" "0 total"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "ok: all wordcount cases pass"
