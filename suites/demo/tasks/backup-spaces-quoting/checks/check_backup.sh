#!/usr/bin/env bash
# Hidden check for backup.sh (run with cwd = the workspace).
ws=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

expect_copy() { # expect_copy DEST_DIR NAME CONTENT
    if [ ! -f "$1/$2.bak" ]; then
        fail "'$2' was not backed up as '$2.bak'"
    elif [ "$(cat "$1/$2.bak")" != "$3" ]; then
        fail "'$2.bak' has the wrong content"
    fi
}

# 1. Source and destination directories whose paths contain spaces.
src="$tmp/My Documents"
dest="$tmp/Backup Drive/daily"
mkdir -p "$src"
echo "plain" > "$src/plain.txt"
echo "one space" > "$src/tax return.txt"
echo "two spaces" > "$src/a  b.txt"
echo "star" > "$src/star*.txt"
echo "stars" > "$src/stars.txt"
echo "dash" > "$src/-dash.txt"
echo "tab" > "$src/tab	name.txt"
echo "not text" > "$src/photo.jpg"
out=$(bash "$ws/backup.sh" "$src" "$dest" 2>"$tmp/err")
rc=$?
[ "$rc" -eq 0 ] || fail "backup.sh exited $rc for a source dir with spaces"
[ "$out" = "backed up 7 file(s)" ] || fail "expected 'backed up 7 file(s)', got '$out'"
expect_copy "$dest" "plain.txt" "plain"
expect_copy "$dest" "tax return.txt" "one space"
expect_copy "$dest" "a  b.txt" "two spaces"
expect_copy "$dest" "star*.txt" "star"
expect_copy "$dest" "stars.txt" "stars"
expect_copy "$dest" "-dash.txt" "dash"
expect_copy "$dest" "tab	name.txt" "tab"
[ ! -e "$dest/photo.jpg.bak" ] || fail "photo.jpg should not be backed up"
n=$(find "$dest" -type f | wc -l)
[ "$n" -eq 7 ] || fail "expected exactly 7 files in the destination, found $n"
[ ! -s "$tmp/err" ] || fail "unexpected stderr: $(cat "$tmp/err")"

# 2. A source directory with no .txt files at all.
mkdir -p "$tmp/empty src"
out=$(bash "$ws/backup.sh" "$tmp/empty src" "$tmp/empty dest" 2>/dev/null)
[ "$out" = "backed up 0 file(s)" ] || fail "empty source: expected 'backed up 0 file(s)', got '$out'"

# 3. Simple names still work.
mkdir -p "$tmp/s"
echo "x" > "$tmp/s/x.txt"
out=$(bash "$ws/backup.sh" "$tmp/s" "$tmp/d" 2>/dev/null)
[ "$out" = "backed up 1 file(s)" ] || fail "simple case: expected 'backed up 1 file(s)', got '$out'"
expect_copy "$tmp/d" "x.txt" "x"

if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
fi
echo "ok: all backup cases pass"
