//! What confinement costs per command: `true` run N times under `strict`
//! and under `off`, interleaved so both see the same machine load, with
//! the median and p90 wall time of each and their ratio.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark fails loudly

use std::time::{Duration, Instant};

use tack_sandbox::{CommandSpec, Confinement, SandboxProfile, run};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn once(confinement: &Confinement, cwd: &std::path::Path) -> Duration {
    let spec = CommandSpec {
        script: "true",
        cwd,
        env: &[],
        timeout: Duration::from_secs(30),
        output_limit: 1024,
        confinement,
    };
    let started = Instant::now();
    let out = run(&spec).await.unwrap();
    assert!(out.success(), "{out:?}");
    started.elapsed()
}

fn main() {
    let n: usize = std::env::var("TACK_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    if let Err(error) = tack_sandbox::check_profile(SandboxProfile::Strict, tack_sandbox::probe()) {
        eprintln!("strict cannot run here, nothing to compare: {error}");
        return;
    }
    // As in a trial: the workspace inside the sealed directory of all
    // trials' workspaces (which costs a listing of its parent per command).
    let sealed = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir_in(sealed.path()).unwrap();
    let strict = Confinement::strict(dir.path()).sealing([sealed.path()]);
    let off = Confinement::off();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut confined, mut unconfined) = runtime.block_on(async {
        // Warm up: the probe, the compiled filters, the page cache.
        once(&strict, dir.path()).await;
        once(&off, dir.path()).await;
        let mut confined = Vec::with_capacity(n);
        let mut unconfined = Vec::with_capacity(n);
        for _ in 0..n {
            confined.push(once(&strict, dir.path()).await);
            unconfined.push(once(&off, dir.path()).await);
        }
        (confined, unconfined)
    });
    confined.sort();
    unconfined.sort();
    let (s50, s90) = (percentile(&confined, 0.5), percentile(&confined, 0.9));
    let (o50, o90) = (percentile(&unconfined, 0.5), percentile(&unconfined, 0.9));
    println!("`true`, {n} runs each, interleaved");
    println!("profile   median ms   p90 ms");
    println!("strict    {:>9.2}   {:>6.2}", ms(s50), ms(s90));
    println!("off       {:>9.2}   {:>6.2}", ms(o50), ms(o90));
    println!(
        "strict/off: median {:.2}x, p90 {:.2}x",
        ms(s50) / ms(o50),
        ms(s90) / ms(o90)
    );
}
