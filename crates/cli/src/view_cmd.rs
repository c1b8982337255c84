//! `tack view`: serve the local web app over every run under the given
//! traces directories (or run directories, or object-store prefixes).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use tack_store::Location;
use tack_view::{Viewer, ViewerOptions};

use crate::exit::{Classify, CommandResult, Failure, usage};
use crate::out::{errln, outln};

const AFTER_HELP: &str = "\
Opens nothing by itself: it prints an address with a fresh access token, like Jupyter; open it in
a browser. Every page needs the token (the first visit trades it for a cookie named for the port),
so other users of this machine cannot read the traces through the port. A browser sends that
cookie to every port of 127.0.0.1: open only addresses you trust there, or another user's server
that you browse to gets the token.

Pages:
  /          the runs: suite, status (running / finished / interrupted / shard),
             trials done, each variant's pass rate and cost; reloads every
             --refresh seconds, so a running run advances and new runs appear
  /trials    every final trial across the chosen runs, filtered by run, variant,
             task, outcome, stop reason, and a search over tool calls, their
             output, checks and errors; sorted by steps, tokens, cost or
             duration; 50 a page; the filter is in the URL, to share
  /trial     one trial's trajectory: model calls, tool calls with output,
             approvals, checks, a jump to the first failing step
  /compare   any two variants (of one run or two), as `tack compare` computes
             it, and each flipped task's two trials side by side from their
             first divergence
  /tasks     the tasks, flakiest first: how often identical configurations
             (run × variant) disagree on each; exported as a quarantine list
             that `tack gate --quarantine FILE` leaves out (and says so)
  /task      one task across every run: passed / trials per run and variant,
             better or worse than the variant's run before

Everything shown came from an agent or a task and is shown as text: escaped, with a
Content-Security-Policy that allows no script. The viewer only reads.

Examples:
  tack view                          # every run under ./traces
  tack view traces other/traces      # several directories
  tack view traces/20261204-101500-demo-4f60   # one run
  # the runs under a prefix, fetched into the cache first
  tack view s3://bucket/runs
  # reachable from the network (a warning says so)
  tack view --host 0.0.0.0 --port 8765

On stderr: `tack view: open http://HOST:PORT/?token=…`; with --json, stdout gets
{\"type\":\"view_listening\",\"url\":…,\"roots\":[…]}. Stop it with Ctrl-C (or SIGTERM).

Exit codes:
  0  stopped by a signal
  2  bad flags (the address cannot be bound, a remote prefix cannot be read)
  3  the viewer could not start";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ViewArgs {
    /// Traces directories, run directories, or object-store URLs (s3://, gs://, az://, file://)
    /// of runs or of a prefix holding runs.
    #[arg(value_name = "TRACES", default_value = "traces")]
    roots: Vec<PathBuf>,
    /// The address (or a name this machine resolves, e.g. localhost) to listen on; anything but
    /// loopback shares the traces on a network.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port; 0 picks a free one (printed once bound).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Seconds between reloads of the runs list; 0 never reloads.
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    refresh: u32,
    /// Print a JSON line on stdout once listening.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: ViewArgs) -> CommandResult {
    let mut roots = Vec::new();
    for root in &args.roots {
        match crate::store_arg::location(root)? {
            Location::Local(dir) => {
                if dir.exists() && !dir.is_dir() {
                    return Err(usage(format!(
                        "{} is a file; tack view shows directories of runs (traces/, or one \
                         run's directory)",
                        dir.display()
                    )));
                }
                if !dir.is_dir() {
                    errln!(
                        "tack view: {} does not exist yet; runs written there will appear",
                        dir.display()
                    );
                }
                roots.push(dir);
            }
            Location::Remote(url) => roots.extend(remote_runs(&url).await?),
        }
    }
    let token = tack_view::access_token().or_fail(Failure::Internal)?;
    let viewer = Viewer::new(ViewerOptions {
        roots: roots.clone(),
        token: token.clone(),
        refresh_secs: args.refresh,
    })
    .or_fail(Failure::Internal)?;
    let addr = resolve(&args.host, args.port).await?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| tack_view::ViewError::Listen {
            addr: addr.to_string(),
            source,
        })
        .or_fail(Failure::Usage)?;
    let bound = listener.local_addr().or_fail(Failure::Internal)?;
    let url = format!("http://{bound}/?token={token}");
    if !bound.ip().is_loopback() {
        errln!(
            "tack view: warning: listening on {bound}, reachable from other machines; anyone with \
             the address (and its token) can read these traces"
        );
    }
    for (hidden, shown) in tack_view::hidden_duplicates(&roots) {
        let (hidden, shown) = (hidden.display().to_string(), shown.display().to_string());
        errln!(
            "tack view: warning: {} has the run id of {}, which is shown; view it on its own \
             (tack view {})",
            tack_protocol::printable(&hidden),
            tack_protocol::printable(&shown),
            tack_protocol::printable(&hidden)
        );
    }
    errln!("tack view: open {url}");
    errln!("tack view: {} (Ctrl-C to stop)", describe(&roots));
    if args.json {
        let line = serde_json::json!({ "type": "view_listening", "url": url, "roots": roots });
        outln!("{line}")?;
    }
    tack_view::serve(listener, Arc::new(viewer), crate::stop::stop_signal()).await;
    Ok(ExitCode::SUCCESS)
}

/// The first address `host` names (an IP address, or a name such as
/// `localhost`).
async fn resolve(host: &str, port: u16) -> Result<SocketAddr, crate::exit::CommandError> {
    let cannot = |why: String| {
        usage(format!(
            "--host {host}: {why}; give an address (127.0.0.1, 0.0.0.0, ::1) or a name this \
             machine resolves"
        ))
    };
    let mut addrs = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| cannot(format!("cannot resolve it ({e})")))?;
    addrs
        .next()
        .ok_or_else(|| cannot("it resolves to no address".to_string()))
}

fn describe(roots: &[PathBuf]) -> String {
    let roots: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    format!("showing the runs under {}", roots.join(", "))
}

/// The run a URL names, or every run under it (a prefix), each fetched
/// into the cache: the viewer reads local copies.
async fn remote_runs(
    url: &tack_store::RemoteUrl,
) -> Result<Vec<PathBuf>, crate::exit::CommandError> {
    let runs = if tack_store::run_exists(url)
        .await
        .map_err(crate::store_arg::failure)?
    {
        vec![url.clone()]
    } else {
        tack_store::list_runs(url)
            .await
            .map_err(crate::store_arg::failure)?
    };
    let mut dirs = Vec::with_capacity(runs.len());
    for run in &runs {
        errln!("tack view: fetching {run}");
        dirs.push(crate::store_arg::fetch(run).await?);
    }
    Ok(dirs)
}
