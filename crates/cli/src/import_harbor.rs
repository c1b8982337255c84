//! `tack import harbor`: Harbor task directories as tasks of a tack suite,
//! checked by loading the suite they were written into.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tack_import::harbor::{SuiteImport, TaskMode};

use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::{err, errln, outln};

const HARBOR_HELP: &str = "\
Each Harbor task (task.toml, instruction.md, environment/, tests/, solution/) becomes
OUT/tasks/<dir name>/ with
  environment/  its build context: tack builds the Dockerfile with podman or
                docker (see `tack doctor`) and runs each trial in the image's
                filesystem, under its own sandbox, at the image's WORKDIR, with
                its ENV and USER
  checks/       tests/, shown at /tests while the check `bash /tests/test.sh`
                runs (with the network unless the task's network_mode says
                none); the reward it leaves in /logs/verifier (reward.txt, or
                reward.json: every reward >= 1) decides, else its exit code
  solution/     shown at /solution to `bash /solution/solve.sh`
                (suite check, the oracle) only
  task.toml     the agent's timeout from Harbor's task.toml;
                what tack does not enforce (cpus, GPUs, a container's memory)
                as comments at its top
Public images a Dockerfile starts FROM are pulled; where no registry is reachable, map them
to local images in OUT/suite.toml or ~/.config/tack/images.toml:
  [images]
  \"ubuntu:24.04\" = \"localhost/tack-base:noble\"
With --approximate (for machines without an engine), a task runs on the host instead: its
fixture is what the Dockerfile COPYs into its WORKDIR, `pip install`/`uvx --with` pins and
`apt-get install` become [environment] python and debian, and a task that needs its image
(RUN steps that build, root-only commands) is marked `requires = \"container\"`.
A task is refused, and the others imported, when a link in it leads out of it (a symlinked
tests/ or solution/) or its Dockerfile copies from above its build context (COPY ../x).
OUT/suite.toml (an `oracle` variant) is written if absent; tasks already in OUT are skipped.

Examples:
  tack import harbor ~/terminal-bench/tasks --out suites/tbench
  tack suite check suites/tbench
  tack run suites/tbench --variant oracle

Exit codes:
  0  every task was imported
  1  some were skipped (already in the suite) or refused, the rest imported
  2  a source is not a Harbor task or could not be read, or every task was
     refused (nothing is written then)";

#[derive(Debug, Args)]
#[command(after_help = HARBOR_HELP)]
pub struct HarborArgs {
    /// Harbor task directories, or directories holding them.
    #[arg(required = true, value_name = "SRC")]
    sources: Vec<PathBuf>,
    /// The suite to write the tasks into (created if absent).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print one JSON object: the tasks converted (with their mode, container reasons
    /// and notes), skipped, refused and unreadable.
    #[arg(long)]
    json: bool,
    /// Run the tasks on the host, approximating their images, instead of building
    /// them: for machines without podman or docker.
    #[arg(long)]
    approximate: bool,
}

pub fn run(args: HarborArgs) -> CommandResult {
    let mode = if args.approximate {
        TaskMode::Host
    } else {
        TaskMode::Image
    };
    let import = tack_import::harbor::import_tasks(&args.sources, &args.out, mode)
        .or_fail(Failure::Internal)?;
    // Nothing converted, nothing written: no suite to load.
    if import.converted.is_empty() {
        print_import(&import, args.json)?;
        return Ok(exit_code(&import));
    }
    // The suite must load as written: an import that produced a task tack
    // cannot read is a bug to report, not a suite to run.
    let loaded = match tack_suite::load_suite(&args.out) {
        Ok(suite) => suite,
        Err(error) => {
            return Err(CommandError {
                kind: Failure::Internal,
                error: anyhow::anyhow!(
                    "the imported suite at {} does not load: {error}",
                    args.out.display()
                ),
            });
        }
    };
    print_import(&import, args.json)?;
    if !args.json {
        let in_image = loaded.tasks.iter().filter(|t| t.wants_image()).count();
        let on_host = loaded
            .tasks
            .iter()
            .filter(|t| !t.wants_image() && !t.requires_container())
            .count();
        let set_aside = loaded.tasks.len() - in_image - on_host;
        let aside = if set_aside == 0 {
            String::new()
        } else {
            format!(", {set_aside} set aside: they need their container")
        };
        errln!(
            "suite {} now has {} ({in_image} in {} image, {on_host} on the host{aside})",
            args.out.display(),
            tack_protocol::count(loaded.tasks.len(), "task"),
            if in_image == 1 { "its" } else { "their" }
        );
        if !import.converted.is_empty() {
            errln!(
                "next: tack suite check {0}   then: tack run {0} --variant oracle",
                args.out.display()
            );
        }
    }
    Ok(exit_code(&import))
}

fn exit_code(import: &SuiteImport) -> ExitCode {
    let nothing = import.converted.is_empty() && import.skipped.is_empty();
    if !import.unreadable.is_empty() || nothing {
        Failure::Usage.into()
    } else if !import.skipped.is_empty() || !import.refused.is_empty() {
        Failure::Found.into()
    } else {
        ExitCode::SUCCESS
    }
}

fn print_import(import: &SuiteImport, json: bool) -> Result<(), CommandError> {
    if json {
        let mut value = serde_json::to_value(import).or_fail(Failure::Internal)?;
        value["type"] = "harbor_imported".into();
        return outln!("{value}");
    }
    err!("{}", tack_import::harbor_summary(import));
    Ok(())
}
