"""Hidden check for page_count / get_page (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from pagination import get_page, page_count  # noqa: E402

failures = []

COUNTS = [
    ((0, 10), 0),
    ((1, 10), 1),
    ((9, 10), 1),
    ((10, 10), 1),
    ((11, 10), 2),
    ((20, 10), 2),
    ((25, 10), 3),
    ((27, 10), 3),
    ((7, 1), 7),
    ((5, 3), 2),
    ((3, 100), 1),
]
for (total, per_page), expected in COUNTS:
    try:
        got = page_count(total, per_page)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"page_count({total}, {per_page}) raised {exc!r}, expected {expected}")
        continue
    if got != expected:
        failures.append(f"page_count({total}, {per_page}) = {got!r}, expected {expected}")

for per_page in (0, -1):
    try:
        page_count(10, per_page)
    except ValueError:
        pass
    except Exception as exc:  # noqa: BLE001
        failures.append(f"page_count(10, {per_page}) raised {exc!r}, expected ValueError")
    else:
        failures.append(f"page_count(10, {per_page}) did not raise ValueError")

PAGES = [
    ((list(range(25)), 3, 10), [20, 21, 22, 23, 24]),
    ((list(range(25)), 1, 10), list(range(10))),
    ((list(range(20)), 2, 10), list(range(10, 20))),
    ((["a", "b", "c"], 1, 10), ["a", "b", "c"]),
    ((["a", "b", "c", "d", "e"], 2, 3), ["d", "e"]),
]
for args, expected in PAGES:
    try:
        got = get_page(*args)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"get_page{args!r} raised {exc!r}, expected {expected!r}")
        continue
    if got != expected:
        failures.append(f"get_page{args!r} = {got!r}, expected {expected!r}")

OUT_OF_RANGE = [
    (list(range(20)), 3, 10),
    (list(range(25)), 4, 10),
    (list(range(25)), 0, 10),
    ([], 1, 10),
    (["a"], 2, 1),
]
for args in OUT_OF_RANGE:
    try:
        got = get_page(*args)
    except IndexError:
        continue
    except Exception as exc:  # noqa: BLE001
        failures.append(f"get_page{args!r} raised {exc!r}, expected IndexError")
        continue
    failures.append(f"get_page{args!r} = {got!r}, expected IndexError")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all pagination cases pass")
