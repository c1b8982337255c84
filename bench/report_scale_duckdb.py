"""The aggregations `tack report` computes, run by DuckDB over the same
Parquet files: the yardstick of bench/report-scale.

Same rules as tack's analysis (crates/analysis): only the final attempt of
each (variant, task, trial_index) counts; a final `infra_error` is not
scored. Computed: per-variant success rate and token/cost/step totals,
outcome and stop-reason counts, infra errors and retried attempts, the task
x variant matrix, the failed trials (count, and the first N per variant and
task), span counts per variant (denied calls, injected faults by kind,
rate-limit waits) and the cost table (answered model calls' tokens and
dollars by variant x model x task). Every result is fetched into Python,
as tack turns its results into structs.

Usage: python3 report_scale_duckdb.py RUN_DIR [FAILED_PER_TASK]
Prints one JSON line: {"seconds": query time, "rows": {...}} (the rows
each query returned, a sanity check that it did the work).
"""

import json
import sys
import time

import duckdb

FINAL = """
CREATE TEMP VIEW marked AS
SELECT *,
  trial_attempt = max(trial_attempt) OVER (PARTITION BY variant, task, trial_index) AS is_final
FROM read_parquet('{run}/trials/*.parquet', union_by_name = true);
CREATE TEMP TABLE t AS
SELECT trial_id, variant, task, trial_index, model, outcome, stop_reason, steps,
  tool_errors, retries, interventions, feedback_rounds, sandbox_denials, tampered,
  gen_ai_usage_input_tokens AS input_tokens, gen_ai_usage_output_tokens AS output_tokens,
  total_tokens, cost_usd, is_final,
  is_final AND outcome <> 'infra_error' AS is_scored
FROM marked;
"""

QUERIES = {
    "variants": """
SELECT variant, count(*) AS trials,
  sum((outcome = 'passed')::int) AS passed,
  sum(total_tokens) AS total_tokens, sum(input_tokens) AS input_tokens,
  sum(output_tokens) AS output_tokens,
  avg(total_tokens) FILTER (WHERE outcome = 'passed') AS mean_tokens_successful,
  sum(cost_usd) AS cost_usd, count(*) - count(cost_usd) AS cost_nulls,
  avg(steps) AS mean_steps, sum(retries), sum(interventions), sum(feedback_rounds),
  sum(sandbox_denials), sum(tampered::int), sum(tool_errors)
FROM t WHERE is_scored GROUP BY variant""",
    "outcomes": "SELECT variant, outcome, count(*) FROM t WHERE is_final GROUP BY ALL",
    "stop_reasons": "SELECT variant, stop_reason, count(*) FROM t WHERE is_final GROUP BY ALL",
    "attempts": """
SELECT variant,
  sum((is_final AND NOT is_scored)::int) AS infra_errors,
  sum((NOT is_final)::int) AS retried
FROM t GROUP BY variant""",
    "matrix": """
SELECT task, variant, sum(is_scored::int) AS trials,
  sum((outcome = 'passed')::int) AS passed,
  sum((NOT is_scored)::int) AS infra_errors
FROM t WHERE is_final GROUP BY task, variant""",
    "failed_total": "SELECT count(*) FROM t WHERE is_final AND outcome <> 'passed'",
    "failed_listed": """
SELECT trial_id, variant, task, trial_index FROM (
  SELECT *, row_number() OVER (PARTITION BY variant, task ORDER BY trial_index) AS rank
  FROM t WHERE is_final AND outcome <> 'passed')
WHERE rank <= {per_task} ORDER BY variant, task, trial_index""",
    "span_counts": """
SELECT t.variant, s.fault,
  sum((s.kind = 'tool_call' AND s.error_kind = 'denied')::int) AS denied_calls,
  sum((s.kind = 'model_call' AND s.fault IS NOT NULL)::int) AS injected_faults,
  sum(s.rate_limit_wait_ms) AS rate_limit_wait_ms
FROM read_parquet('{run}/spans/*.parquet', union_by_name = true) s
JOIN t USING (trial_id)
WHERE t.is_scored AND ((s.kind = 'tool_call' AND s.error_kind = 'denied')
  OR (s.kind = 'model_call' AND s.fault IS NOT NULL) OR s.rate_limit_wait_ms > 0)
GROUP BY ALL""",
    "cost_trials": """
SELECT variant, model, task, count(*) AS trials, sum((outcome = 'passed')::int) AS successes
FROM t WHERE is_scored GROUP BY ALL""",
    "cost_calls": """
SELECT t.variant, t.model, t.task, t.is_scored, count(*) AS calls,
  sum(s.cost_usd) AS known_usd, count(*) - count(s.cost_usd) AS unknown_cost_calls,
  sum(s.gen_ai_usage_input_tokens), sum(s.gen_ai_usage_cache_read_input_tokens),
  sum(s.gen_ai_usage_cache_creation_input_tokens), sum(s.gen_ai_usage_output_tokens),
  sum(s.gen_ai_usage_reasoning_output_tokens)
FROM read_parquet('{run}/spans/*.parquet', union_by_name = true) s
JOIN t USING (trial_id)
WHERE s.kind = 'model_call' AND s.status = 'ok'
GROUP BY ALL""",
}


def main() -> None:
    run = sys.argv[1].rstrip("/")
    per_task = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    start = time.perf_counter()
    con = duckdb.connect()
    con.execute(FINAL.format(run=run))
    rows = {}
    for name, sql in QUERIES.items():
        rows[name] = len(con.execute(sql.format(run=run, per_task=per_task)).fetchall())
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rows": rows}))


if __name__ == "__main__":
    main()
