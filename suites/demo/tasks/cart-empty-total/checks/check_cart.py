"""Hidden check for cart_total (run with cwd = the workspace)."""

import os
import sys

sys.path.insert(0, os.getcwd())

from cart import cart_total  # noqa: E402

failures = []


def expect(label, thunk, expected):
    try:
        got = thunk()
    except Exception as exc:  # noqa: BLE001
        failures.append(f"{label} raised {exc!r}, expected {expected!r}")
        return
    if got != expected:
        failures.append(f"{label} = {got!r}, expected {expected!r}")


expect("cart_total([])", lambda: cart_total([]), 0)
expect("cart_total(())", lambda: cart_total(()), 0)
expect("cart_total([], discount=0.5)", lambda: cart_total([], discount=0.5), 0)
expect("cart_total(iter([]))", lambda: cart_total(iter([])), 0)
expect("cart_total(empty generator)", lambda: cart_total(x for x in []), 0)
expect("cart_total(generator with one line)",
       lambda: cart_total(x for x in [{"price": 4.0, "qty": 3}]), 12.0)
expect("cart_total([{'price': 9.99}])", lambda: cart_total([{"price": 9.99}]), 9.99)
expect("cart_total(two lines, 10% off)",
       lambda: cart_total([{"price": 10.0, "qty": 2}, {"price": 5.0}], discount=0.1), 22.5)
expect("cart_total(three lines)",
       lambda: cart_total([{"price": 1.5, "qty": 2}, {"price": 2.25}, {"price": 0.75, "qty": 4}]),
       8.25)

if failures:
    for line in failures:
        print("FAIL:", line)
    sys.exit(1)
print("ok: all cart cases pass")
