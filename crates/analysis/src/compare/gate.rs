//! The verdict a CI job acts on: did the candidate regress against the
//! base?

use serde::Serialize;

use super::Comparison;

#[derive(Debug, Clone, PartialEq)]
pub struct GateOptions {
    /// The largest drop in success rate tolerated (0.02 = two points).
    pub max_drop: f64,
    /// A drop beyond `max_drop` fails only when the paired test finds it
    /// significant at this level: noise alone must not fail a build.
    pub alpha: f64,
    /// Largest tolerated relative increase in cost per success (0.1 = 10%).
    pub max_cost_increase: Option<f64>,
    /// Largest tolerated relative increase in tokens per success.
    pub max_tokens_increase: Option<f64>,
    /// Judge significance with the task-level test ("on tasks like these")
    /// instead of McNemar on trial pairs ("on these tasks").
    pub per_task: bool,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            max_drop: 0.02,
            alpha: 0.05,
            max_cost_increase: None,
            max_tokens_increase: None,
            per_task: false,
        }
    }
}

/// The gate's answer: one line for people, the reasons for machines.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateVerdict {
    pub passed: bool,
    /// Why it failed (empty when it passed).
    pub failures: Vec<String>,
    pub line: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error(
        "--max-{what}-increase cannot be checked: {why}; drop the budget or compare runs whose models are priced"
    )]
    Unmeasurable { what: &'static str, why: String },
}

/// Judges a comparison. A budget that cannot be measured (an unpriced
/// model, no success on a side) is an error, never a silent pass.
pub fn gate(comparison: &Comparison, options: &GateOptions) -> Result<GateVerdict, GateError> {
    let success = &comparison.success;
    let (test, p_value) = match (options.per_task, &success.task_test, success.task_p_value) {
        (true, Some(test), Some(p)) => (test.as_str(), p),
        _ => (success.test.as_str(), success.p_value),
    };
    let mut failures = Vec::new();
    if success.delta < -options.max_drop && p_value < options.alpha {
        failures.push(format!(
            "success rate dropped {:.1} points (from {:.1}% to {:.1}%; {test} p = {p_value:.4} < {}), more than the {:.1} points allowed",
            -success.delta * 100.0,
            comparison.base.success_rate * 100.0,
            comparison.candidate.success_rate * 100.0,
            options.alpha,
            options.max_drop * 100.0
        ));
    }
    let budgets = [
        ("cost", "cost per success", options.max_cost_increase),
        ("tokens", "tokens per success", options.max_tokens_increase),
    ];
    for (what, metric, limit) in budgets {
        let Some(limit) = limit else { continue };
        let relative = comparison
            .metrics
            .iter()
            .find(|m| m.name == metric)
            .and_then(|m| m.relative)
            .ok_or_else(|| GateError::Unmeasurable {
                what,
                why: format!("{metric} is unknown on a side (unpriced model or no success)"),
            })?;
        if relative > limit {
            failures.push(format!(
                "{metric} rose {:.1}%, more than the {:.1}% allowed",
                relative * 100.0,
                limit * 100.0
            ));
        }
    }
    let passed = failures.is_empty();
    let interval = match (success.ci_low, success.ci_high) {
        (Some(low), Some(high)) => format!(" [{:+.1}, {:+.1}]", low * 100.0, high * 100.0),
        _ => String::new(),
    };
    let summary = format!(
        "{} {}/{} vs {} {}/{}: {:+.1} points{interval}, {test} p = {p_value:.4}",
        comparison.base.variant,
        comparison.base.passed,
        comparison.base.trials,
        comparison.candidate.variant,
        comparison.candidate.passed,
        comparison.candidate.trials,
        success.delta * 100.0,
    );
    let line = if passed && success.delta < -options.max_drop {
        // A pass on noise alone says so: the drop is there, the trials too
        // few to call it one. An interval that excludes no change reads as
        // the opposite, so it is said which of the two decides.
        let interval_note = match success.ci_high {
            Some(high) if high < 0.0 => {
                "; the bracketed 95% interval, a bootstrap over tasks, runs narrow with few tasks \
                 and trials: the verdict is the test's"
            }
            _ => "",
        };
        format!(
            "PASS {summary}: a drop beyond the {:.1} points allowed, but not significant at alpha {} \
             (more trials per task would tell; see `tack compare`'s power line){interval_note}",
            options.max_drop * 100.0,
            options.alpha
        )
    } else if passed {
        format!("PASS {summary}")
    } else {
        format!("FAIL {summary}: {}", failures.join("; "))
    };
    Ok(GateVerdict {
        passed,
        failures,
        line,
    })
}
