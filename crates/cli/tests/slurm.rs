//! `deploy/slurm/array.sbatch` on a real Slurm cluster: the test starts a
//! single-node cluster of its own (`munged`, `slurmctld`, `slurmd` from
//! Debian's `slurmctld`, `slurmd`, `slurm-client` and `munge`, with a
//! generated `slurm.conf` on free ports), submits the template's job array
//! (three shards of the demo) and the dependent merge-and-report job as
//! docs/scale.md tells a user to, and reads the merged run back: every
//! planned trial once, the report written. `.ci/run` installs the packages
//! and sets `TACK_REQUIRE_SLURM=1`; elsewhere a missing daemon skips it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The daemons and clients the test needs, looked up on PATH and in the
/// sbin directories Debian puts the daemons in.
const PROGRAMS: [&str; 7] = [
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "squeue",
    "sinfo",
    "scontrol",
];

/// The dependent job docs/scale.md ("Slurm") submits after the array.
const MERGE_JOB: &str =
    "tack merge traces/*-shard*of3 --out traces/merged && tack report traces/merged";

fn find(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The programs' paths, or `None` (having said why) to skip.
fn programs() -> Option<Vec<PathBuf>> {
    let required = std::env::var("TACK_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    let found: Vec<Option<PathBuf>> = PROGRAMS.iter().map(|p| find(p)).collect();
    let missing: Vec<&str> = PROGRAMS
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(p, _)| *p)
        .collect();
    if missing.is_empty() {
        return Some(found.into_iter().flatten().collect());
    }
    assert!(
        !required,
        "TACK_REQUIRE_SLURM=1 but {} not found; run .ci/run",
        missing.join(", ")
    );
    eprintln!(
        "skipped: no Slurm here ({} missing; `apt-get install slurmctld slurmd slurm-client munge`, as .ci/run does)",
        missing.join(", ")
    );
    None
}

fn short_hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().unwrap();
    assert!(out.status.success(), "hostname -s failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn user_name() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A single-node cluster; dropping it stops the daemons.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // The last started first: slurmd, slurmctld, then munged.
        for child in self.daemons.iter_mut().rev() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Cluster {
    fn start(dir: &Path, programs: &[PathBuf]) -> Cluster {
        let program = |name: &str| {
            let index = PROGRAMS.iter().position(|p| *p == name).unwrap();
            programs[index].clone()
        };
        for sub in ["munge", "state", "spool", "log"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        // munged refuses a key others may read, in a directory others may write.
        let key = dir.join("munge/munge.key");
        let bytes: Vec<u8> = (0..1024u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        std::fs::write(&key, bytes).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::fs::set_permissions(dir.join("munge"), std::fs::Permissions::from_mode(0o711))
            .unwrap();
        let socket = dir.join("munge/munge.socket");
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
        };
        let log = |name: &str| std::fs::File::create(dir.join("log").join(name)).unwrap();
        cluster.daemons.push(
            Command::new(program("munged"))
                .arg("--foreground")
                .arg("--force")
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!(
                    "--pid-file={}",
                    dir.join("munge/munged.pid").display()
                ))
                .arg(format!(
                    "--log-file={}",
                    dir.join("log/munged.log").display()
                ))
                .arg(format!("--seed-file={}", dir.join("munge/seed").display()))
                .stdout(log("munged.out"))
                .stderr(log("munged.err"))
                .spawn()
                .unwrap(),
        );
        wait_for(Duration::from_secs(20), "munged's socket", || {
            socket.exists()
        });
        let host = short_hostname();
        let user = user_name();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let d = dir.display();
        let conf = format!(
            "ClusterName=tack-test\n\
             SlurmctldHost={host}(127.0.0.1)\n\
             SlurmctldPort={ctld}\n\
             SlurmdPort={slurmd}\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={socket}\n\
             CredType=cred/munge\n\
             SlurmUser={user}\n\
             SlurmdUser={user}\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             SwitchType=switch/none\n\
             MpiDefault=none\n\
             SchedulerType=sched/backfill\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             ReturnToService=2\n\
             MinJobAge=600\n\
             NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            ctld = common::free_port(),
            slurmd = common::free_port(),
            socket = socket.display(),
        );
        std::fs::write(&cluster.conf, conf).unwrap();
        for (daemon, args) in [("slurmctld", &["-D", "-i"][..]), ("slurmd", &["-D"][..])] {
            cluster.daemons.push(
                Command::new(program(daemon))
                    .args(args)
                    .arg("-f")
                    .arg(&cluster.conf)
                    .env("SLURM_CONF", &cluster.conf)
                    .stdout(log(&format!("{daemon}.out")))
                    .stderr(log(&format!("{daemon}.err")))
                    .spawn()
                    .unwrap(),
            );
        }
        wait_for(Duration::from_secs(60), "the node to be idle", || {
            cluster.client("sinfo", &["-h", "-o", "%t"]).trim() == "idle"
        });
        cluster
    }

    /// Runs a Slurm client against this cluster and returns its stdout.
    fn client(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(find(program).unwrap())
            .args(args)
            .env("SLURM_CONF", &self.conf)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Everything the daemons and the jobs wrote, for a failure message.
    fn logs(&self, submit: &Path) -> String {
        let mut files = Vec::new();
        common::files_below(&self.dir.join("log"), &mut files);
        for entry in std::fs::read_dir(submit).unwrap().flatten() {
            if entry
                .path()
                .extension()
                .is_some_and(|e| e == "log" || e == "out")
            {
                files.push(entry.path());
            }
        }
        let mut text = String::new();
        for file in files {
            let body = std::fs::read_to_string(&file).unwrap_or_default();
            let tail: String = body
                .chars()
                .rev()
                .take(3000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            text += &format!("\n== {}\n{tail}", file.display());
        }
        text
    }

    /// The state of each of a job's steps or array tasks, as scontrol says.
    fn job_states(&self, job: &str) -> Vec<String> {
        self.client("scontrol", &["show", "job", "-o", job])
            .lines()
            .filter_map(|line| {
                line.split_whitespace()
                    .find_map(|field| field.strip_prefix("JobState="))
                    .map(str::to_string)
            })
            .collect()
    }
}

fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `sbatch --parsable` with the test's PATH (the built `tack` first) and
/// cluster; returns the job id.
fn sbatch(cluster: &Cluster, submit: &Path, args: &[&str]) -> String {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_tack")).parent().unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path)),
    )
    .unwrap();
    let out = Command::new(find("sbatch").unwrap())
        .arg("--parsable")
        .args(args)
        .current_dir(submit)
        .env("SLURM_CONF", &cluster.conf)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sbatch {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `--parsable` prints `id` or `id;cluster`.
    let id = String::from_utf8(out.stdout).unwrap();
    id.trim().split(';').next().unwrap().to_string()
}

#[test]
fn the_slurm_array_template_runs_three_shards_and_the_dependent_job_merges_them() {
    let Some(programs) = programs() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(&dir.path().join("cluster"), &programs);

    // The directory a user submits from: the suite the template names.
    let submit = dir.path().join("submit");
    std::fs::create_dir_all(submit.join("suites")).unwrap();
    std::os::unix::fs::symlink(
        common::repo().join("suites/demo"),
        submit.join("suites/demo"),
    )
    .unwrap();
    let template = common::repo().join("deploy/slurm/array.sbatch");
    let array = sbatch(&cluster, &submit, &[template.to_str().unwrap()]);
    let merge = sbatch(
        &cluster,
        &submit,
        &[
            &format!("--dependency=afterok:{array}"),
            "--wrap",
            MERGE_JOB,
        ],
    );

    let deadline = Instant::now() + Duration::from_secs(900);
    while !cluster.client("squeue", &["-h"]).trim().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the jobs did not end in 15 minutes: {}{}",
            cluster.client("squeue", &[]),
            cluster.logs(&submit)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let shards = cluster.job_states(&array);
    let merged = cluster.job_states(&merge);
    assert!(
        shards.len() == 3
            && shards.iter().chain(&merged).all(|s| s == "COMPLETED")
            && merged.len() == 1,
        "array {array}: {shards:?}, merge {merge}: {merged:?}{}",
        cluster.logs(&submit)
    );

    // The merged run: every planned trial once, from the three shards.
    let run = submit.join("traces/merged");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "finished");
    assert_eq!(manifest["merged_from"].as_array().unwrap().len(), 3);
    let planned = manifest["variants"].as_array().unwrap().len()
        * manifest["tasks"].as_array().unwrap().len()
        * usize::try_from(manifest["trials_per_task"].as_u64().unwrap()).unwrap();
    let query = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "query",
            "--json",
            "SELECT variant, task, trial_index, count(*) AS n FROM trials \
             GROUP BY variant, task, trial_index",
            run.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let rows = common::stdout_json(&query);
    let rows = rows.as_array().unwrap();
    assert_eq!(
        rows.len(),
        planned,
        "every planned trial is in the merged run"
    );
    assert!(
        rows.iter().all(|row| row["n"] == 1),
        "a trial is in the merged run more than once: {rows:?}"
    );
    // … and the merge job reported it.
    let report = submit.join("reports/merged/index.html");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("merged"), "{}", report.display());
    let log = std::fs::read_to_string(submit.join(format!("slurm-{merge}.out"))).unwrap();
    assert!(
        log.contains(&format!("merged 3 shard runs ({planned} trial attempts)")),
        "{log}"
    );
}
