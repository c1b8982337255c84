"""Hidden check for is_leap_year / days_in_month (run with cwd = the workspace)."""

import calendar
import os
import sys

sys.path.insert(0, os.getcwd())

from dates import days_in_month, is_leap_year  # noqa: E402

failures = []

for year in [1, 4, 100, 400, 1600, 1700, 1800, 1900, 1996, 1999, 2000, 2004,
             2023, 2024, 2100, 2400, 2800, 2900]:
    expected = calendar.isleap(year)
    try:
        got = is_leap_year(year)
    except Exception as exc:  # noqa: BLE001
        failures.append(f"is_leap_year({year}) raised {exc!r}")
        continue
    if bool(got) != expected:
        failures.append(f"is_leap_year({year}) = {got!r}, expected {expected}")

for year in [1900, 2000, 2023, 2024, 2400]:
    for month in range(1, 13):
        expected = calendar.monthrange(year, month)[1]
        try:
            got = days_in_month(year, month)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"days_in_month({year}, {month}) raised {exc!r}")
            continue
        if got != expected:
            failures.append(f"days_in_month({year}, {month}) = {got!r}, expected {expected}")

for month in (0, 13):
    try:
        days_in_month(2000, month)
    except ValueError:
        pass
    else:
        failures.append(f"days_in_month(2000, {month}) did not raise ValueError")

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all calendar cases pass")
