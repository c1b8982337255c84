"""Hidden check for median (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from stats import median  # noqa: E402

failures = []

CASES = [
    ([7], 7),
    ([5, 1], 3),
    ([1, 2], 1.5),
    ([3, 1, 2], 2),
    ([4, 1, 3, 2], 2.5),
    ([10, 20, 30, 40, 50, 60], 35),
    ([1, 1, 2, 2], 1.5),
    ([-5, -1, 3, 8], 1),
    ([0.5, 0.25], 0.375),
    ((9, 3, 6, 12), 7.5),
    ([2, 2, 2, 2, 2], 2),
]
for values, expected in CASES:
    original = list(values)
    try:
        got = median(values)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"median({values!r}) raised {exc!r}, expected {expected!r}")
        continue
    if got != expected:
        failures.append(f"median({values!r}) = {got!r}, expected {expected!r}")
    if list(values) != original:
        failures.append(f"median({original!r}) modified its argument")

try:
    median([])
except ValueError:
    pass
except Exception as exc:  # noqa: BLE001
    failures.append(f"median([]) raised {exc!r}, expected ValueError")
else:
    failures.append("median([]) did not raise ValueError")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all median cases pass")
