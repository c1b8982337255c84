//! `tack`: run task suites against coding-agent harness variants, record
//! every call into Parquet traces, and report on them.
//!
//! The binary only parses arguments, calls the libraries and prints; what
//! a command computes lives in the crate that owns the concept (see
//! crates/README.md). Every stdout write goes through [`out`], which stops
//! quietly at a closed pipe.

mod argv;
mod chat_cmd;
mod compare_cmd;
mod count_arg;
mod dir_arg;
mod doctor_cmd;
mod events_cmd;
mod exec_cmd;
mod exit;
mod export_cmd;
mod fraction_arg;
mod gate_cmd;
mod help;
mod import_cmd;
mod import_harbor;
mod mcp_arg;
mod merge_cmd;
mod otlp_arg;
mod out;
mod permissions_cmd;
mod profile_arg;
mod progress;
mod proxy_cmd;
mod query_cmd;
mod replay_cmd;
mod report_cmd;
mod run_arg;
mod run_cmd;
mod sandbox_cmd;
mod show_cmd;
mod stop;
mod store_arg;
mod suite_cmd;
mod terminal_approver;
mod view_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::out::errln;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tack",
    version,
    about = "A harness and evaluation workbench for coding agents",
    long_about = "A harness and evaluation workbench for coding agents.\n\n\
Run a task suite across variants (model × harness configuration × trials), record every model \
call and tool call into Parquet traces, and compare the variants in an HTML report.\n\n\
Start with:\n  tack suite check suites/demo   prove every task can tell a fix from no fix\n  \
tack run suites/demo           run it with the built-in models\n                                 \
(no network, no key)\n  \
tack report traces/<run-id>    (re)build a run's report",
    after_help = "Exit codes: 0 success, 1 the command ran and found a problem (an unsound task), \
2 usage or input error (bad flags, bad suite file: every file and setting a variant names is checked \
before any trial), 3 tack failed (could not write traces or report, or a trial ended in harness_error), \
130 interrupted by Ctrl-C (the trials that ran are recorded, and reported unless a second Ctrl-C \
stopped tack at once)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a suite: every variant × task × trial, then write the report.
    Run(run_cmd::RunArgs),
    /// Run the agent once on a directory, outside any suite (unattended, scriptable).
    Exec(exec_cmd::ExecArgs),
    /// Talk to the agent in a terminal: one conversation, approvals inline, /todos, /cost, /compact.
    Chat(chat_cmd::ChatArgs),
    /// Print a session's events (`tack exec --session`), from a sequence number on, or follow them.
    Events(events_cmd::EventsArgs),
    /// Re-run one recorded trial's tool side with the model's recorded answers.
    Replay(replay_cmd::ReplayArgs),
    /// Combine the shard runs of one plan (`tack run --shard`) into one run.
    Merge(merge_cmd::MergeArgs),
    /// Build the HTML report of a recorded run (--cost: print what it cost).
    Report(report_cmd::ReportArgs),
    /// Print one trial's trajectory: model calls, tool calls, approvals, checks.
    Show(show_cmd::ShowArgs),
    /// Bring in the field's tasks and results: Harbor / Terminal-Bench task directories as a suite,
    /// Inspect AI logs and Harbor jobs as tack runs, for report and compare.
    #[command(subcommand)]
    Import(import_cmd::ImportCommand),
    /// Write recorded runs in the field's formats: Harbor's ATIF trajectories, OpenTelemetry (OTLP).
    #[command(subcommand)]
    Export(export_cmd::ExportCommand),
    /// Record an external agent's model calls: a proxy for OpenAI- and Anthropic-compatible APIs.
    Proxy(proxy_cmd::ProxyArgs),
    /// Run SQL over the trials, spans and messages tables of recorded runs.
    Query(query_cmd::QueryArgs),
    /// Browse every run in a local web app: runs, trials filtered and searched, a trial's trajectory, compare.
    View(view_cmd::ViewArgs),
    /// Compare two runs (or two variants of one run): is the candidate better, how sure, at what cost?
    Compare(compare_cmd::CompareArgs),
    /// Pass or fail a candidate run against a baseline, for CI (exit 1 on a regression).
    Gate(gate_cmd::GateArgs),
    /// Inspect and validate task suites.
    #[command(subcommand)]
    Suite(SuiteCommand),
    /// Try permission rules on a command: allow, ask or deny, and which rule decided.
    #[command(subcommand)]
    Permissions(permissions_cmd::PermissionsCommand),
    /// Show what the kernel enforces here and which sandbox profiles can run.
    Doctor(doctor_cmd::DoctorArgs),
    /// Run a command in the sandbox the agent's bash tool uses.
    #[command(subcommand)]
    Sandbox(sandbox_cmd::SandboxCommand),
}

impl Command {
    /// Whether it runs commands in the sandbox (and so wants the spawner).
    fn runs_commands(&self) -> bool {
        matches!(
            self,
            Command::Run(_)
                | Command::Exec(_)
                | Command::Chat(_)
                | Command::Replay(_)
                | Command::Suite(SuiteCommand::Check(_))
                | Command::Sandbox(_)
        )
    }

    /// Whether it reads recorded runs a batch of parts at a time (and so
    /// frees a batch's memory before the next is read).
    fn reads_runs(&self) -> bool {
        matches!(
            self,
            Command::Report(_)
                | Command::Compare(_)
                | Command::Gate(_)
                | Command::Query(_)
                | Command::View(_)
                | Command::Show(_)
                | Command::Export(_)
                | Command::Merge(_)
        )
    }
}

#[derive(Debug, Subcommand)]
enum SuiteCommand {
    /// Prove a suite sound: each task's checks fail untouched, pass with its reference solution
    /// and fail with each of its decoys.
    Check(suite_cmd::CheckArgs),
    /// List a suite's variants and tasks.
    Show {
        /// The suite directory (holding suite.toml).
        suite: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How soon commands that read runs return freed memory, in milliseconds.
/// At a million trials (the bench's run, alternating, three each): 20 ms
/// peaks at 195-207 MB in 4.66-4.87 s, 50 ms at 220-235 MB in 4.57-4.71 s,
/// 0 at 168-195 MB in 5.2-5.4 s (every free a system call).
const PURGE_DELAY_MS: std::ffi::c_long = 20;

/// mimalloc option `mi_option_purge_delay` (its place in mimalloc v3's
/// `mi_option_e`; libmimalloc-sys names only the options mimalloc calls
/// stable).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Hands memory a command freed back to the system after `ms` milliseconds
/// (ten times that for whole arenas) rather than mimalloc v3's default of a
/// second. A command that reads a run a batch of parts at a time frees each
/// batch before the next one; purged a second late, the batches' pages add
/// up and peak memory grows with the run: `tack report` on a million trials
/// peaked at 325 MB by default, 270 MB at 50 ms, for 2% more time (best of
/// three, at the time; now see [`PURGE_DELAY_MS`]). `tack run` keeps the
/// default: a thousand trials in flight free and reuse memory all the time.
fn purge_freed_memory_after(ms: std::ffi::c_long) {
    #[allow(unsafe_code, reason = "mimalloc's option setter, an FFI call")]
    // SAFETY: mi_option_set takes any option number and value (an unknown
    // number is ignored) and may be called at any time from any thread.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms)
    };
}

fn main() -> ExitCode {
    // A trial's sandbox init is this binary, started by tack: it serves
    // and never returns. Before anything else, while this is one thread.
    tack_sandbox::serve_init_if_asked();
    // Before anything is forked: nothing tack was handed reaches a command.
    tack_sandbox::keep_inherited_descriptors_from_children();
    let cli: Cli = help::parse();
    let wants_json = help::json_asked();
    if cli.command.reads_runs() {
        purge_freed_memory_after(PURGE_DELAY_MS);
    }
    // Before the async runtime starts any thread: see tack_sandbox::spawner.
    if cli.command.runs_commands()
        && let Err(error) = tack_sandbox::spawner::start()
    {
        errln!("warning: {error}; confined commands will be forked from tack itself");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            errln!("error: could not start the async runtime: {error}");
            return exit::Failure::Internal.into();
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run_cmd::run(args).await,
            Command::Exec(args) => exec_cmd::run(args).await,
            Command::Events(args) => events_cmd::run(args).await,
            Command::Chat(args) => chat_cmd::run(args).await,
            Command::Replay(args) => replay_cmd::run(args).await,
            Command::Merge(args) => merge_cmd::run(args).await,
            Command::Report(args) => report_cmd::run(args).await,
            Command::Show(args) => show_cmd::run(args).await,
            Command::Proxy(args) => proxy_cmd::run(args).await,
            Command::Import(command) => import_cmd::run(command),
            Command::Query(args) => query_cmd::run(args).await,
            Command::View(args) => view_cmd::run(args).await,
            Command::Export(command) => export_cmd::run(command).await,
            Command::Compare(args) => compare_cmd::run(args).await,
            Command::Gate(args) => gate_cmd::run(args).await,
            Command::Suite(SuiteCommand::Check(args)) => suite_cmd::check(args).await,
            Command::Suite(SuiteCommand::Show { suite, json }) => suite_cmd::show(&suite, json),
            Command::Permissions(command) => permissions_cmd::run(command),
            Command::Doctor(args) => doctor_cmd::run(args),
            Command::Sandbox(command) => sandbox_cmd::run(command).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(failure) => {
            let message = exit::message(&failure.error);
            errln!("error: {message}");
            // A script asked for JSON: it gets an object on stdout either
            // way, unless the command had printed its own.
            if wants_json && !out::wrote() {
                let code = exit::code(failure.kind);
                let object = serde_json::json!({ "error": message, "exit_code": code });
                let _ = out::write(format_args!("{object}\n"));
            }
            failure.kind.into()
        }
    }
}
