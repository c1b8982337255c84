"""`tack view` on a large run against DuckDB answering the same questions:
the yardstick of bench/view-scale.

Starts `tack view RUN` (release build), then times, over HTTP with the
viewer's token cookie, as a browser asks them:
  first   the trials table's first page, the first request after start
          (the run's parts opened, final attempts marked, 50 rows sorted);
  next    its second page;
  filter  a filtered, sorted page: one task, failed trials, by tokens;
  search  a search over every span's text (tool arguments, output, checks)
          and every message (the trials' message lists joined to the
          messages whose content holds it).
Then DuckDB (Python, a fresh connection) answers the same: each question's
count and its 50 rows, over final attempts only (the same window tack uses).
Peak RSS is the viewer's (VmHWM) after all its requests, and the DuckDB
process's.

Usage: python3 view_scale.py TACK RUN_DIR [tack|duckdb|both]
Prints one JSON object of (seconds, trials counted) and KiB.
       python3 view_scale.py --row N TACK_JSON DUCKDB_JSON DUCKDB_KIB
Prints the markdown row of bench/report-scale's viewer table.
"""

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import duckdb

TASK = "fix-validate-config-0000"
SEARCH = "format_scheduler"


def timed_get(opener, url):
    started = time.perf_counter()
    with opener.open(url) as answer:
        body = answer.read().decode()
    seconds = time.perf_counter() - started
    if 'id="total">' not in body:
        raise SystemExit(f"{url}: not a trials page:\n{body[:2000]}")
    total = int(body.split('id="total">')[1].split("<")[0])
    return seconds, total


def viewer(tack, run):
    child = subprocess.Popen(
        [tack, "view", run, "--json", "--refresh", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = json.loads(child.stdout.readline())["url"]
    base, token = url.split("/?token=")
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    return child, base, token, opener


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def tack_side(tack, run, run_id):
    child, base, token, opener = viewer(tack, run)
    try:
        q = lambda **kw: f"{base}/trials?" + urllib.parse.urlencode({"run": run_id, **kw})
        # As a shared link is opened: the token traded for the cookie, then
        # the page (the run's parts opened, its narrow columns read).
        first = timed_get(opener, q(token=token))
        nxt = timed_get(opener, q(page=2))
        filt = timed_get(
            opener, q(task=TASK, outcome="verification_failed", sort="tokens", order="desc")
        )
        before_search = vm_hwm_kib(child.pid)
        search = timed_get(opener, q(q=SEARCH))
        return {
            "rss_before_search_kib": before_search,
            "first": first,
            "next": nxt,
            "filter": filt,
            "search": search,
            "rss_kib": vm_hwm_kib(child.pid),
        }
    finally:
        child.kill()
        child.wait()


FINAL = """
CREATE TEMP VIEW final AS
SELECT * EXCLUDE (m) FROM (
  SELECT *, max(trial_attempt) OVER (PARTITION BY variant, task, trial_index) AS m
  FROM read_parquet('{run}/trials/*.parquet', union_by_name = true))
WHERE trial_attempt = m
"""

COLUMNS = """run_id, trial_id, variant, task, trial_index, trial_attempt, outcome, stop_reason,
steps, total_tokens, cost_usd, duration_ms, error"""


def duck_page(con, where, order, offset=0):
    count = con.sql(f"SELECT count(*) FROM final WHERE {where}").fetchall()[0][0]
    con.sql(
        f"SELECT {COLUMNS} FROM final WHERE {where} "
        f"ORDER BY {order} LIMIT 50 OFFSET {offset}"
    ).fetchall()
    return count


def duck_side(run):
    key = "run_id, variant, task, trial_index"
    timings = {}
    started = time.perf_counter()
    con = duckdb.connect()
    con.sql(FINAL.format(run=run))
    count = duck_page(con, "true", key)
    timings["first"] = (time.perf_counter() - started, count)
    started = time.perf_counter()
    count = duck_page(con, "true", key, offset=50)
    timings["next"] = (time.perf_counter() - started, count)
    started = time.perf_counter()
    count = duck_page(
        con,
        f"task = '{TASK}' AND outcome = 'verification_failed'",
        f"total_tokens DESC NULLS LAST, {key}",
    )
    timings["filter"] = (time.perf_counter() - started, count)
    started = time.perf_counter()
    spans = f"read_parquet('{run}/spans/*.parquet', union_by_name = true)"
    hit = " OR ".join(
        f"contains({c}, '{SEARCH}')"
        for c in ["name", "tool_arguments", "stdout", "stderr", "check_output", "error"]
    )
    messages = f"read_parquet('{run}/messages/*.parquet', union_by_name = true)"
    trials = f"read_parquet('{run}/trials/*.parquet', union_by_name = true)"
    con.sql(
        f"CREATE TEMP VIEW searched AS SELECT * FROM final WHERE contains(error, '{SEARCH}') "
        f"OR trial_id IN (SELECT DISTINCT trial_id FROM {spans} WHERE {hit}) "
        f"OR trial_id IN (SELECT DISTINCT t.trial_id FROM "
        f"(SELECT trial_id, unnest(message_ids) AS message_id FROM {trials}) t "
        f"JOIN (SELECT message_id FROM {messages} WHERE contains(content, '{SEARCH}')) m "
        f"USING (message_id))"
    )
    count = con.sql("SELECT count(*) FROM searched").fetchall()[0][0]
    con.sql(f"SELECT {COLUMNS} FROM searched ORDER BY {key} LIMIT 50").fetchall()
    timings["search"] = (time.perf_counter() - started, count)
    return timings


def row(n, tack, duck, duck_kib):
    tack, duck = json.loads(tack)["tack"], json.loads(duck)["duckdb"]
    cells = []
    for key in ("first", "next", "filter", "search"):
        (t, t_count), (d, d_count) = tack[key], duck[key]
        if t_count != d_count:
            raise SystemExit(f"{key}: tack counted {t_count} trials, DuckDB {d_count}")
        cells.append(f"{t:.2f} s / {d:.2f} s = {t / d:.2f}×")
    mb = lambda kib: f"{int(kib) / 1024:.0f} MB"
    print(
        f"| {int(n):,} | " + " | ".join(cells)
        + f" | {mb(tack['rss_before_search_kib'])}, {mb(tack['rss_kib'])} | {mb(duck_kib)} |"
    )


def main():
    usage = ("usage: view_scale.py TACK RUN_DIR [both|tack|duckdb]\n"
             "       view_scale.py --row TRIALS TACK_JSON DUCKDB_JSON DUCKDB_RSS_KIB")
    if sys.argv[1:2] == ["--row"]:
        if len(sys.argv) != 6:
            sys.exit(usage)
        row(*sys.argv[2:6])
        return
    if len(sys.argv) < 3:
        sys.exit(usage)
    tack, run = sys.argv[1], sys.argv[2]
    run_id = json.load(open(os.path.join(run, "manifest.json")))["run_id"]
    what = sys.argv[3] if len(sys.argv) > 3 else "both"
    out = {}
    if what in ("both", "tack"):
        out["tack"] = tack_side(tack, run, run_id)
    if what in ("both", "duckdb"):
        out["duckdb"] = duck_side(run)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
