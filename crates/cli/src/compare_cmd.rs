//! `tack compare`: is the candidate better than the base, how sure are we,
//! and what did it cost? Also the loading that `tack gate` shares.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tack_analysis::compare::{CompareOptions, Comparison, Side, compare, pairing};
use tack_analysis::{Manifest, RunTables};
use tack_trace::RunStatus;

use crate::count_arg::at_least;
use crate::exit::{Classify, CommandError, CommandResult, Failure, usage};
use crate::out::{out, outln};

const AFTER_HELP: &str = "\
Pairs trials by task (and by trial index where both sides have it) and shows, per task and
overall: pass rates and each task's flip (fixed, broken, better or worse: mixed results and a
larger or smaller share passed; stable pass, stable fail; flaky: mixed, the same share on both
sides); the difference in success rate with a 95% interval from a bootstrap that resamples tasks, and an exact
McNemar test on the discordant pairs (a task-level sign-flip permutation test when tasks have
several trials); pass@k and pass^k; deltas of tokens and cost per success, steps, retries,
interventions and wall time with bootstrap intervals; and the smallest difference this many trials
can detect.

Tasks whose definition (task.toml, fixture, checks, solution) changed between the runs, and tasks
only one run ran, are not paired: compare exits 2 naming each, unless --allow-drift, which compares
the rest and lists them.

Examples:
  tack compare traces/<run> --variants sim-full,sim-stdout
  tack compare traces/<base-run> traces/<candidate-run> --json
  tack compare <base-run-id> <candidate-run-id> --effect 0.05

Exit codes: 0 compared, 2 usage error or drift, 3 tack failed (traces unreadable, report unwritable).";

/// Which two sides to compare; shared with `tack gate`.
#[derive(Debug, Args)]
pub struct SidesArgs {
    /// The base run: traces/<run-id>, a run id under --traces, or a run's URL
    /// (s3://BUCKET/PREFIX/<run-id>, gs://, az://, file://).
    pub base: PathBuf,
    /// The candidate run. Without it, --variants names two variants of BASE.
    pub candidate: Option<PathBuf>,
    /// `BASE_VARIANT,CANDIDATE_VARIANT` (or one name for both). Needed when a run has several variants.
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Compare the tasks both runs ran alike and list those that changed or that one run alone
    /// ran, instead of exiting 2.
    #[arg(long)]
    pub allow_drift: bool,
    /// Where run ids are looked up: a directory or a URL prefix.
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Bootstrap resamples per interval (at least 100).
    #[arg(long, default_value_t = 10_000, value_parser = at_least::<100, usize>)]
    pub reps: usize,
    /// Seed of the bootstrap (the same seed gives the same intervals).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct CompareArgs {
    #[command(flatten)]
    pub sides: SidesArgs,
    /// A difference in success rate (0.05 or 5%), up or down, to size the trials for.
    #[arg(long, value_parser = crate::fraction_arg::parse_fraction)]
    pub effect: Option<f64>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where to write the HTML compare report [default: reports/compare-<base>-vs-<candidate>].
    #[arg(long, value_parser = crate::dir_arg::out_dir)]
    pub out: Option<PathBuf>,
    /// Do not write the HTML report.
    #[arg(long)]
    pub no_report: bool,
}

/// Both runs, analysed, and the comparison.
pub struct Loaded {
    pub base_dir: PathBuf,
    pub candidate_dir: PathBuf,
    pub comparison: Comparison,
    /// What changed between the runs (tasks and environment), for people.
    pub drift: Vec<String>,
    /// Every task either run planned.
    pub tasks: BTreeSet<String>,
    /// What is missing from either side: a run that did not finish, a task
    /// with no scored trial on one side. `tack gate` refuses to judge it.
    pub incomplete: Vec<String>,
}

pub async fn run(args: CompareArgs) -> CommandResult {
    if let Some(effect) = args.effect
        && !(effect > 0.0 && effect < 1.0)
    {
        return Err(usage(
            "--effect is a difference in success rate between 0 and 1, e.g. 0.05 or 5%",
        ));
    }
    let loaded = load(&args.sides, args.effect, BTreeMap::new()).await?;
    let report = if args.no_report {
        None
    } else {
        let out = args.out.clone().unwrap_or_else(|| default_out(&loaded));
        tack_report::write_compare_report(
            &loaded.comparison,
            &loaded.base_dir,
            &loaded.candidate_dir,
            &loaded.drift,
            &out,
        )
        .or_fail(Failure::Internal)?;
        Some(out.join("index.html"))
    };
    if args.json {
        let json = serde_json::json!({
            "comparison": loaded.comparison,
            "drift": loaded.drift,
            "incomplete": loaded.incomplete,
            "report": report,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).or_fail(Failure::Internal)?
        )?;
    } else {
        out!(
            "{}",
            tack_report::text::comparison(&loaded.comparison, &loaded.drift)
        )?;
        for missing in &loaded.incomplete {
            outln!("incomplete: {}", tack_protocol::printable(missing))?;
        }
        if let Some(report) = report {
            outln!("report: {}", report.display())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn default_out(loaded: &Loaded) -> PathBuf {
    let c = &loaded.comparison;
    let side = |run: &str, variant: &str| format!("{run}-{variant}");
    PathBuf::from("reports").join(format!(
        "compare-{}-vs-{}",
        side(&c.base.run_id, &c.base.variant),
        side(&c.candidate.run_id, &c.candidate.variant)
    ))
}

/// Reads both runs, checks they ran the same tasks, and compares, leaving
/// out `left_out`'s tasks (with why) besides those that drifted.
pub async fn load(
    sides: &SidesArgs,
    effect: Option<f64>,
    left_out: BTreeMap<String, String>,
) -> Result<Loaded, CommandError> {
    let base_dir = crate::run_arg::resolve(&sides.base, &sides.traces).await?;
    let candidate_dir = match &sides.candidate {
        Some(candidate) => crate::run_arg::resolve(candidate, &sides.traces).await?,
        None => base_dir.clone(),
    };
    crate::run_arg::recover_run(&base_dir)?;
    if candidate_dir != base_dir {
        crate::run_arg::recover_run(&candidate_dir)?;
    }
    let base = RunTables::open(&base_dir).map_err(crate::exit::reading)?;
    let other;
    let candidate = if candidate_dir == base_dir {
        &base
    } else {
        other = RunTables::open(&candidate_dir).map_err(crate::exit::reading)?;
        &other
    };
    let (base_variant, candidate_variant) = variants(sides, base.manifest(), candidate.manifest())?;
    let ended = [base.manifest(), candidate.manifest()].map(RunOrigin::of);
    let tasks = [base.manifest(), candidate.manifest()]
        .iter()
        .flat_map(|manifest| manifest.tasks.iter().cloned())
        .collect();
    let pairing = pairing(
        base.manifest(),
        candidate.manifest(),
        (&base_variant, &candidate_variant),
        sides.allow_drift,
    )
    .or_fail(Failure::Usage)?;
    let mut excluded = pairing.excluded;
    excluded.extend(left_out);
    let options = CompareOptions {
        bootstrap_reps: sides.reps,
        seed: sides.seed,
        effect,
        excluded,
    };
    let base = Side::load(&base, &base_variant).map_err(crate::exit::comparing)?;
    let candidate = Side::load(candidate, &candidate_variant).map_err(crate::exit::comparing)?;
    let comparison = compare(&base, &candidate, &options).map_err(crate::exit::comparing)?;
    let incomplete = incomplete(&base_dir, &candidate_dir, &ended, &comparison);
    Ok(Loaded {
        base_dir,
        candidate_dir,
        comparison,
        drift: pairing.drift,
        tasks,
        incomplete,
    })
}

/// How a run came to be, as far as what completing it takes.
#[derive(Debug, Clone, Copy)]
enum RunOrigin {
    Finished,
    /// One shard of a plan (`tack run --shard I/N`, N > 1): some of its
    /// trials only, however it ended.
    Shard {
        index: u32,
        count: u32,
    },
    /// A `tack merge` of shards, not all finished or not all there.
    Merged,
    /// An import of another tool's log that did not finish.
    Imported,
    Interrupted,
    Running,
}

impl RunOrigin {
    fn of(manifest: &Manifest) -> RunOrigin {
        let imported = manifest.command_line.get(1).is_some_and(|c| c == "import");
        if let Some(shard) = manifest.shard.as_ref().filter(|s| s.count > 1) {
            return RunOrigin::Shard {
                index: shard.index,
                count: shard.count,
            };
        }
        match manifest.status {
            RunStatus::Finished => RunOrigin::Finished,
            RunStatus::Running => RunOrigin::Running,
            RunStatus::Interrupted if !manifest.merged_from.is_empty() => RunOrigin::Merged,
            RunStatus::Interrupted if imported => RunOrigin::Imported,
            RunStatus::Interrupted => RunOrigin::Interrupted,
        }
    }
}

/// What either side lacks: its run did not finish (interrupted, a partial
/// merge, or still running), or a task has no scored trial on it.
fn incomplete(
    base_dir: &Path,
    candidate_dir: &Path,
    ended: &[RunOrigin; 2],
    comparison: &Comparison,
) -> Vec<String> {
    let mut said = Vec::new();
    let sides = [
        ("base", base_dir, &comparison.base, ended[0]),
        ("candidate", candidate_dir, &comparison.candidate, ended[1]),
    ];
    for (side, dir, info, origin) in sides {
        if side == "candidate" && dir == base_dir {
            break;
        }
        let run = &info.run_id;
        let resume = format!("tack run --resume {}", dir.display());
        let what = match origin {
            RunOrigin::Finished => continue,
            RunOrigin::Shard { index, count } => format!(
                "is shard {index}/{count} of its plan, which holds only some of its trials: \
                 merge the shards (`tack merge`) and compare the merged run"
            ),
            RunOrigin::Merged => "was merged from shards that did not all finish, or not from \
                                  all of them: complete the shards (resume, or run the missing \
                                  ones) and merge again"
                .to_string(),
            RunOrigin::Imported => {
                "was imported from a log that did not finish: import a finished one".to_string()
            }
            RunOrigin::Interrupted => {
                format!("was interrupted: resume it ({resume}) to judge all its trials")
            }
            RunOrigin::Running => {
                format!("is still running, or was killed: let it end, or resume it ({resume})")
            }
        };
        said.push(format!("the {side} run {run} {what}"));
    }
    for task in &comparison.unpaired {
        if let Some(side) = task.missing_on {
            said.push(format!(
                "task {} has no scored trial on the {side} side",
                task.task
            ));
        }
    }
    said
}

fn variants(
    sides: &SidesArgs,
    base: &Manifest,
    candidate: &Manifest,
) -> Result<(String, String), CommandError> {
    let names =
        |run: &Manifest| -> Vec<String> { run.variants.iter().map(|v| v.name.clone()).collect() };
    let same_run = sides.candidate.is_none();
    match sides.variants.as_slice() {
        [a, b] => Ok((a.clone(), b.clone())),
        [one] if !same_run => Ok((one.clone(), one.clone())),
        [] if !same_run => {
            let (b, c) = (names(base), names(candidate));
            match (b.as_slice(), c.as_slice()) {
                ([b], [c]) => Ok((b.clone(), c.clone())),
                _ => Err(usage(format!(
                    "a run has several variants ({} / {}): say which with --variants BASE,CANDIDATE",
                    b.join(", "),
                    c.join(", ")
                ))),
            }
        }
        _ if same_run => Err(usage(format!(
            "with one run, name two of its variants: --variants BASE,CANDIDATE (its variants: {})",
            names(base).join(", ")
        ))),
        _ => Err(usage(
            "--variants takes BASE,CANDIDATE or one name for both sides",
        )),
    }
}
