"""Hidden check for slugify (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from slug import slugify  # noqa: E402

failures = []

CASES = [
    ("Release notes", "release-notes"),
    ("Hello, World!", "hello-world"),
    ("  leading and trailing  ", "leading-and-trailing"),
    ("a - b", "a-b"),
    ("a---b", "a-b"),
    ("Tabs\tand\nnewlines", "tabs-and-newlines"),
    ("snake_case_title", "snake-case-title"),
    ("What's new in v2.0?", "what-s-new-in-v2-0"),
    ("Crème Brûlée", "creme-brulee"),
    ("100% pure -- organic!!!", "100-pure-organic"),
    ("C++ & Rust: a comparison", "c-rust-a-comparison"),
    ("already-a-slug", "already-a-slug"),
    ("!!!", ""),
    ("", ""),
]
for title, expected in CASES:
    try:
        got = slugify(title)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"slugify({title!r}) raised {exc!r}, expected {expected!r}")
        continue
    if got != expected:
        failures.append(f"slugify({title!r}) = {got!r}, expected {expected!r}")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all slug cases pass")
