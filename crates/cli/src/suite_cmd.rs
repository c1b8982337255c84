use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::count_arg::at_least;
use crate::exit::{Classify, CommandResult, Failure};
use crate::out::{errln, out, outln};
use crate::profile_arg::ProfileArg;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The suite directory (holding suite.toml).
    suite: PathBuf,
    /// Check only these tasks (repeat or separate with commas).
    #[arg(long = "task", short = 't', value_delimiter = ',')]
    tasks: Vec<String>,
    /// Tasks checked at once.
    #[arg(long, short = 'j', default_value_t = default_jobs(), value_parser = at_least::<1, usize>)]
    jobs: usize,
    /// How the setup commands, solution scripts and checks are confined:
    /// they run the fixture's and the solution's code.
    #[arg(long, value_enum, default_value = "strict")]
    sandbox: ProfileArg,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The container engine that builds the images of tasks that run in one
    /// [default: $TACK_ENGINE, else podman if it answers, else docker].
    #[arg(long, value_name = "ENGINE", value_parser = crate::run_cmd::parse_engine)]
    engine: Option<tack_image::EngineKind>,
}

pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

pub async fn check(args: CheckArgs) -> CommandResult {
    let mut suite = tack_suite::load_suite(&args.suite).or_fail(Failure::Usage)?;
    suite.retain_tasks(&args.tasks).or_fail(Failure::Usage)?;
    let note = |message: String| errln!("{message}");
    let images = tack_suite::ImageOptions {
        engine: args.engine,
        cache: None,
    };
    let checking = tack_suite::check_suite(&suite, args.jobs, args.sandbox.into(), &images, &note);
    // Ctrl-C or SIGTERM: the checks stop, and what they made (workspaces,
    // sandboxes, containers) is removed as they end.
    let results = tokio::select! {
        results = checking => results.or_fail(Failure::Usage)?,
        () = crate::stop::stop_signal() => {
            errln!(
                "interrupted: the checks were stopped; nothing was judged (Ctrl-C again to \
                 leave now, their workspaces to the next command's sweep)"
            );
            // The checks' removal may wait on a command's end; a second
            // signal does not.
            tokio::spawn(async {
                crate::stop::stop_signal().await;
                std::process::exit(130);
            });
            return Ok(ExitCode::from(130));
        }
    };
    let tally = tack_suite::SoundnessTally::of(&results);
    if args.json {
        let out = json!({
            "suite": suite.name, "tasks": results, "sound": tally.sound(),
            "not_checked": tally.unchecked + tally.failed, "could_not_check": tally.failed,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).or_fail(Failure::Internal)?
        )?;
    } else {
        out!("{}", tack_suite::soundness_text(&suite.name, &results))?;
    }
    Ok(if tally.sound() {
        ExitCode::SUCCESS
    } else {
        Failure::Found.into()
    })
}

pub fn show(path: &Path, json: bool) -> CommandResult {
    let suite = tack_suite::load_suite(path).or_fail(Failure::Usage)?;
    if json {
        let tasks: Vec<_> = suite
            .tasks
            .iter()
            .map(|t| {
                json!({
                    "id": t.id, "tags": t.tags, "checks": t.checks.len(),
                    "network": tack_suite::network_needs(t),
                })
            })
            .collect();
        let out = json!({
            "name": suite.name, "description": suite.description, "trials": suite.trials,
            "seed": suite.seed, "variants": suite.variants, "tasks": tasks,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&out).or_fail(Failure::Internal)?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    out!("{}", tack_suite::suite_text(&suite))?;
    Ok(ExitCode::SUCCESS)
}
