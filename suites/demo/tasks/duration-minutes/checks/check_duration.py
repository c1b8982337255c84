"""Hidden check for parse_duration (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from duration import parse_duration  # noqa: E402

failures = []

VALID = [
    ("45s", 45),
    ("0s", 0),
    ("1m", 60),
    ("2m", 120),
    ("90m", 5400),
    ("1h", 3600),
    ("1h30m", 5400),
    ("2h5m10s", 7510),
    ("10m30s", 630),
    (" 3M ", 180),
]
for text, expected in VALID:
    try:
        got = parse_duration(text)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"parse_duration({text!r}) raised {exc!r}, expected {expected}")
        continue
    if got != expected:
        failures.append(f"parse_duration({text!r}) = {got!r}, expected {expected}")

for text in ["", "m", "5", "5x", "1h 30m", "abc", "-5m"]:
    try:
        got = parse_duration(text)
    except ValueError:
        continue
    except Exception as exc:  # noqa: BLE001
        failures.append(f"parse_duration({text!r}) raised {exc!r}, expected ValueError")
        continue
    failures.append(f"parse_duration({text!r}) = {got!r}, expected ValueError")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all duration cases pass")
