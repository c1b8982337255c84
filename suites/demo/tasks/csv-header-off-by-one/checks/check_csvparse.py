"""Hidden check for parse_csv (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from csvparse import parse_csv  # noqa: E402

failures = []


def expect(label, text, expected, **kwargs):
    try:
        got = parse_csv(text, **kwargs)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"{label}: parse_csv({text!r}) raised {exc!r}")
        return
    if got != expected:
        failures.append(f"{label}: parse_csv({text!r}) = {got!r}, expected {expected!r}")


expect("single data row", "x,y\n1,2\n", [{"x": "1", "y": "2"}])
expect("no trailing newline", "x,y\n1,2\n3,4", [{"x": "1", "y": "2"}, {"x": "3", "y": "4"}])
expect("two rows", "name,age\nada,36\nalan,41\n",
       [{"name": "ada", "age": "36"}, {"name": "alan", "age": "41"}])
expect("comment preamble", "# generated\n# by export\nid;city\n1;Oslo\n",
       [{"id": "1", "city": "Oslo"}], delimiter=";")
expect("blank lines before header", "\n\nk,v\na,1\n", [{"k": "a", "v": "1"}])
expect("blank line between rows", "k,v\na,1\n\nb,2\n", [{"k": "a", "v": "1"}, {"k": "b", "v": "2"}])
expect("whitespace around fields", " k , v \n a , 1 \n", [{"k": "a", "v": "1"}])
expect("header only", "a,b\n", [])
expect("header only, no newline", "a,b", [])
expect("empty text", "", [])
expect("only comments", "# nothing here\n", [])
expect("windows line endings", "k,v\r\na,1\r\nb,2\r\n", [{"k": "a", "v": "1"}, {"k": "b", "v": "2"}])
expect("tab delimiter", "k\tv\na\t1\n", [{"k": "a", "v": "1"}], delimiter="\t")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all csv cases pass")
