//! `--traces s3://…` against a real S3-compatible server: moto's server mode
//! (PyPI `moto[server]`, installed by `.ci/run`, found through
//! TACK_MOTO_SERVER). Two shards on "machine A" upload to one bucket; on
//! "machine B" (another cache) `merge`, `report` and `compare` read them
//! back from the bucket.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BUCKET: &str = "tack-test";

/// The moto server of this test, stopped when dropped.
struct Moto {
    child: Child,
    port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto on a free loopback port, or says why the test is skipped.
fn start_moto() -> Option<Moto> {
    let required = std::env::var("TACK_REQUIRE_MOTO").is_ok_and(|v| v == "1");
    let Some(server) = std::env::var_os("TACK_MOTO_SERVER").filter(|p| Path::new(p).exists())
    else {
        assert!(
            !required,
            "TACK_REQUIRE_MOTO=1 but TACK_MOTO_SERVER does not name moto_server; run .ci/run"
        );
        eprintln!(
            "skipped: no S3 server (set TACK_MOTO_SERVER to moto_server from `pip install 'moto[server]'`, as .ci/run does)"
        );
        return None;
    };
    let port = common::free_port();
    let child = Command::new(server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let moto = Moto { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // moto creates a bucket on a plain, unsigned PUT.
        if let Some(response) = moto.http("PUT", &format!("/{BUCKET}"))
            && response.starts_with("HTTP/1.1 200")
        {
            return Some(moto);
        }
        assert!(
            Instant::now() < deadline,
            "moto did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Moto {
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One HTTP/1.1 request; the whole response, or None if nothing listens.
    fn http(&self, method: &str, target: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        let request = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        Some(response)
    }

    /// Every key in the bucket (one page of ListObjectsV2: the test stores
    /// far fewer than 1,000).
    fn keys(&self) -> BTreeSet<String> {
        let response = self.http("GET", &format!("/{BUCKET}?list-type=2")).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.contains("<IsTruncated>false</IsTruncated>"));
        response
            .split("<Key>")
            .skip(1)
            .map(|rest| rest.split("</Key>").next().unwrap().to_string())
            .collect()
    }
}

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../suites/demo")
}

/// `tack` in `dir`, talking to moto, with `cache` as its cache: one
/// "machine".
fn tack(moto: &Moto, dir: &Path, cache: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command.args(args).current_dir(dir);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("AWS_")
            || ["JOB_COMPLETION_INDEX", "TACK_SHARDS", "SLURM_ARRAY_TASK_ID"]
                .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    command
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env("XDG_CACHE_HOME", cache);
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "exit {:?}\n{}",
        output.status.code(),
        text(&output.stderr)
    );
    output
}

fn trial_ids(run_dir: &Path) -> BTreeSet<String> {
    tack_trace::stored_trial_ids(run_dir)
        .unwrap()
        .into_iter()
        .collect()
}

#[test]
fn shards_upload_to_s3_and_merge_report_and_compare_read_from_it() {
    let Some(moto) = start_moto() else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let machine_a = temp.path().join("a");
    let machine_b = temp.path().join("b");
    for dir in [&machine_a, &machine_b] {
        std::fs::create_dir_all(dir.join("cache")).unwrap();
    }
    let a = |args: &[&str]| tack(&moto, &machine_a, &machine_a.join("cache"), args);
    let b = |args: &[&str]| tack(&moto, &machine_b, &machine_b.join("cache"), args);

    // Two shards write to one prefix.
    let demo = demo();
    let mut run_ids = Vec::new();
    for shard in ["1/2", "2/2"] {
        let output = ok(a(&[
            "run",
            demo.to_str().unwrap(),
            "-v",
            "oracle",
            "-t",
            "median-even,leap-year-400",
            "--trials",
            "2",
            "--shard",
            shard,
            "--traces",
            &format!("s3://{BUCKET}/runs"),
            "--json",
            "--no-report",
        ]));
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        let run_id = json["run"]["run_id"].as_str().unwrap().to_string();
        assert_eq!(
            json["traces"].as_str().unwrap(),
            format!("s3://{BUCKET}/runs/{run_id}")
        );
        // Uploaded, then kept as machine A's cached copy; nothing left in staging.
        let cached = machine_a
            .join("cache/tack/runs/s3")
            .join(BUCKET)
            .join("runs")
            .join(&run_id);
        assert_eq!(
            json["run"]["run_dir"].as_str().unwrap(),
            cached.to_str().unwrap()
        );
        assert_eq!(trial_ids(&cached).len(), 2);
        assert!(!machine_a.join("cache/tack/staging").join(&run_id).exists());
        run_ids.push(run_id);
    }
    let keys = moto.keys();
    for run_id in &run_ids {
        for table in ["trials", "spans", "messages"] {
            assert!(
                keys.iter()
                    .any(|k| k.starts_with(&format!("runs/{run_id}/{table}/part-"))
                        && k.ends_with(".parquet")),
                "no {table} part of {run_id} in {keys:?}"
            );
        }
        assert!(keys.contains(&format!("runs/{run_id}/manifest.json")));
        assert!(!keys.contains(&format!("runs/{run_id}/run.pid")));
    }

    // Machine B merges the shards from the bucket (a glob over the prefix)
    // into a local run, and into the bucket.
    let all_shards = format!("s3://{BUCKET}/runs/*-shard*of2");
    ok(b(&["merge", &all_shards, "--out", "traces/merged"]));
    let local_merged = machine_b.join("traces/merged");
    let expected: BTreeSet<String> = run_ids
        .iter()
        .flat_map(|id| {
            trial_ids(
                &machine_a
                    .join("cache/tack/runs/s3")
                    .join(BUCKET)
                    .join("runs")
                    .join(id),
            )
        })
        .collect();
    assert_eq!(expected.len(), 4);
    assert_eq!(trial_ids(&local_merged), expected);

    let merged_url = format!("s3://{BUCKET}/merged/demo-merged");
    let shard_urls: Vec<String> = run_ids
        .iter()
        .map(|id| format!("s3://{BUCKET}/runs/{id}"))
        .collect();
    let output = ok(b(&[
        "merge",
        &shard_urls[0],
        &shard_urls[1],
        "--out",
        &merged_url,
    ]));
    assert!(text(&output.stdout).contains(&merged_url));
    assert!(moto.keys().contains("merged/demo-merged/manifest.json"));
    let again = b(&["merge", &all_shards, "--out", &merged_url]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    assert!(text(&again.stderr).contains("already holds a run"));

    // A third machine, with an empty cache, reads the merged run back.
    let machine_c = temp.path().join("c");
    std::fs::create_dir_all(machine_c.join("cache")).unwrap();
    let c = |args: &[&str]| tack(&moto, &machine_c, &machine_c.join("cache"), args);
    let output = ok(c(&["report", &merged_url, "--out", "reports/merged"]));
    assert!(
        text(&output.stderr).contains("fetched"),
        "{}",
        text(&output.stderr)
    );
    assert!(machine_c.join("reports/merged/index.html").is_file());
    let fetched = machine_c
        .join("cache/tack/runs/s3")
        .join(BUCKET)
        .join("merged/demo-merged");
    assert_eq!(trial_ids(&fetched), expected);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(fetched.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["status"], "finished");
    assert_eq!(manifest["merged_from"].as_array().unwrap().len(), 2);
    // A second read fetches nothing.
    let output = ok(c(&["report", &merged_url, "--json"]));
    assert!(
        !text(&output.stderr).contains("fetched"),
        "{}",
        text(&output.stderr)
    );

    // compare: a run's URL, and a run id under a traces URL.
    let local_copy = local_merged.to_str().unwrap().to_string();
    let output = ok(b(&[
        "compare",
        &merged_url,
        &local_copy,
        "--variants",
        "oracle",
        "--json",
        "--no-report",
    ]));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["comparison"]["base"]["trials"], 4);
    ok(c(&[
        "compare",
        "demo-merged",
        &shard_urls[0],
        "--traces",
        &format!("s3://{BUCKET}/merged"),
        "--variants",
        "oracle",
        "--no-report",
    ]));

    // What is not a run, or not a store, exits 2 and says what to do.
    let missing = c(&["report", &format!("s3://{BUCKET}/runs")]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing.stderr));
    assert!(text(&missing.stderr).contains("is not a run"));
    let scheme = c(&["report", "http://example.invalid/runs/x"]);
    assert_eq!(scheme.status.code(), Some(2));
    assert!(text(&scheme.stderr).contains("s3://BUCKET/PREFIX"));
    // A missing bucket stops a run before its first trial, naming the
    // bucket and the endpoint.
    let no_bucket = c(&[
        "run",
        demo.to_str().unwrap(),
        "-v",
        "oracle",
        "-t",
        "median-even",
        "--trials",
        "1",
        "--traces",
        "s3://no-such-bucket/runs",
        "--no-report",
    ]);
    assert_eq!(
        no_bucket.status.code(),
        Some(2),
        "{}",
        text(&no_bucket.stderr)
    );
    let stderr = text(&no_bucket.stderr);
    assert!(
        stderr.contains("the bucket `no-such-bucket` does not exist at http://127.0.0.1"),
        "{stderr}"
    );
    assert!(!stderr.contains("<?xml"), "{stderr}");
    assert!(!text(&no_bucket.stdout).contains("passed"));
    // A plain-http endpoint without AWS_ALLOW_HTTP says what to set.
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command
        .args(["report", &merged_url])
        .current_dir(&machine_c)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env_remove("AWS_ALLOW_HTTP");
    let plain = command.output().unwrap();
    assert_eq!(plain.status.code(), Some(2), "{}", text(&plain.stderr));
    assert!(text(&plain.stderr).contains("set AWS_ALLOW_HTTP=true"));
}
