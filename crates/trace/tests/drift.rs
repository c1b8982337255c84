//! Every kind of drift between two manifests, and what is not drift.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use serde_json::json;
use tack_trace::{
    EnvironmentDrift, EnvironmentKey, HostInfo, MANIFEST_SCHEMA_VERSION, Manifest, RunFingerprint,
    RunStatus, Side, SuiteInfo, TaskDrift, TaskFingerprint, TaskPart, VariantChange, VariantDrift,
    VariantFingerprint, VariantInfo, drift, variant_drift,
};

fn task(seed: &str) -> TaskFingerprint {
    TaskFingerprint {
        task_toml: format!("{seed}-toml"),
        solution: format!("{seed}-solution"),
        fixture: format!("{seed}-fixture"),
        checks: Some(format!("{seed}-checks")),
        directory: format!("{seed}-dir"),
        image: None,
        services: Default::default(),
    }
}

fn variant(name: &str, model: &str) -> VariantInfo {
    VariantInfo {
        name: name.to_string(),
        model: model.to_string(),
        simulated: model == "sim",
        description: format!("{name}, described"),
        config: json!({"name": name, "description": format!("{name}, described"),
                       "model": model, "harness": {"max_steps": 20}}),
    }
}

fn manifest() -> Manifest {
    let mut fingerprint = RunFingerprint::default();
    for id in ["a", "b"] {
        fingerprint.tasks.insert(id.to_string(), task(id));
    }
    fingerprint.environment.os = "Linux".to_string();
    fingerprint.environment.kernel = "6.8.0-40".to_string();
    fingerprint.environment.distribution = Some("Ubuntu 24.04 LTS".to_string());
    fingerprint.environment.tack_commit = "0123456789ab".to_string();
    fingerprint
        .environment
        .toolchains
        .insert("python3 --version".to_string(), "Python 3.12.3".to_string());
    for name in ["sim-full", "oracle"] {
        fingerprint.variants.insert(
            name.to_string(),
            VariantFingerprint {
                config_hash: format!("{name}-hash"),
                models_answered: vec![name.replace("-full", "")],
            },
        );
    }
    Manifest {
        schema_version: MANIFEST_SCHEMA_VERSION,
        run_id: "run-1".to_string(),
        tack_version: "0.1.0".to_string(),
        suite: SuiteInfo {
            name: "demo".to_string(),
            path: "suites/demo".to_string(),
            content_hash: "suite-hash".to_string(),
        },
        variants: vec![variant("sim-full", "sim"), variant("oracle", "oracle")],
        tasks: vec!["a".to_string(), "b".to_string()],
        trials_per_task: 3,
        seed: 42,
        jobs: 2,
        host: HostInfo {
            os: "linux".to_string(),
            arch: "x86_64".to_string(),
            cpus: 2,
            hostname: "vm".to_string(),
        },
        command_line: vec!["tack".to_string(), "run".to_string()],
        started_at: "2026-12-01T07:42:46Z".to_string(),
        finished_at: Some("2026-12-01T07:43:43Z".to_string()),
        status: RunStatus::Finished,
        price_table: Some("2026-11-01".to_string()),
        fingerprint: Some(fingerprint),
        shard: None,
        merged_from: Vec::new(),
        resumes: Vec::new(),
    }
}

fn print(m: &mut Manifest) -> &mut RunFingerprint {
    m.fingerprint.as_mut().unwrap()
}

#[test]
fn how_a_run_was_carried_out_is_not_drift() {
    let base = manifest();
    let mut candidate = manifest();
    candidate.run_id = "run-2".to_string();
    candidate.seed = 7;
    candidate.trials_per_task = 10;
    candidate.jobs = 8;
    candidate.host.hostname = "other".to_string();
    candidate.host.cpus = 64;
    candidate.command_line.push("--trials".to_string());
    candidate.started_at = "2027-01-01T00:00:00Z".to_string();
    candidate.status = RunStatus::Interrupted;
    let drift = drift(&base, &candidate);
    assert!(drift.is_empty(), "{drift:?}");
    assert!(drift.describe().is_empty());
}

#[test]
fn a_task_run_on_one_side_only_drifts() {
    let base = manifest();
    let mut candidate = manifest();
    candidate.tasks = vec!["b".to_string(), "c".to_string()];
    print(&mut candidate).tasks.remove("a");
    print(&mut candidate)
        .tasks
        .insert("c".to_string(), task("c"));
    let drift = drift(&base, &candidate);
    assert_eq!(drift.tasks.len(), 2, "{:?}", drift.tasks);
    assert_eq!(drift.tasks["a"], TaskDrift::OnlyIn(Side::Base));
    assert_eq!(drift.tasks["c"], TaskDrift::OnlyIn(Side::Candidate));
    assert!(
        drift
            .describe()
            .contains(&"task `c`: only in the candidate run".to_string())
    );
}

#[test]
fn each_changed_part_of_a_task_is_named() {
    let base = manifest();
    type Edit = fn(&mut TaskFingerprint);
    let cases: Vec<(Edit, Vec<TaskPart>, &str)> = vec![
        (
            |t| t.fixture = "new".into(),
            vec![TaskPart::Fixture],
            "fixture changed",
        ),
        (
            |t| t.checks = None,
            vec![TaskPart::Checks],
            "checks changed",
        ),
        (
            |t| t.task_toml = "new".into(),
            vec![TaskPart::TaskToml],
            "task.toml changed",
        ),
        (
            |t| {
                t.task_toml = "new".into();
                t.solution = "new".into();
            },
            vec![TaskPart::TaskToml, TaskPart::Solution],
            "task.toml (its solution included) changed",
        ),
        (
            |t| {
                t.fixture = "new".into();
                t.checks = Some("new".into());
            },
            vec![TaskPart::Fixture, TaskPart::Checks],
            "fixture, checks changed",
        ),
        (
            |t| t.image = Some("sha256:new".into()),
            vec![TaskPart::Image],
            "container image changed",
        ),
        (
            |t| {
                t.services.insert("db".into(), "sha256:new".into());
            },
            vec![TaskPart::Image],
            "container image changed",
        ),
        (
            |t| t.directory = "new".into(),
            vec![TaskPart::OtherFiles],
            "other files of the task directory changed",
        ),
    ];
    for (change, parts, message) in cases {
        let mut candidate = manifest();
        change(print(&mut candidate).tasks.get_mut("b").unwrap());
        let drift = drift(&base, &candidate);
        assert_eq!(drift.tasks.len(), 1, "{message}: {:?}", drift.tasks);
        assert_eq!(drift.tasks["b"], TaskDrift::Changed(parts), "{message}");
        assert_eq!(drift.describe(), vec![format!("task `b`: {message}")]);
    }
}

#[test]
fn environment_keys_that_differ_are_listed() {
    let base = manifest();
    let mut candidate = manifest();
    candidate.tack_version = "0.2.0".to_string();
    candidate.price_table = None;
    let env = &mut print(&mut candidate).environment;
    env.kernel = "6.9.1".to_string();
    env.tack_commit = "ba9876543210-dirty".to_string();
    env.toolchains
        .insert("python3 --version".to_string(), "Python 3.13.0".to_string());
    env.toolchains.insert(
        "bash --version | head -1".to_string(),
        "GNU bash, 5.2".to_string(),
    );
    let drift = drift(&base, &candidate);
    assert!(drift.tasks.is_empty() && drift.variants.is_empty());
    let keys: Vec<&EnvironmentKey> = drift.environment.iter().map(|d| &d.key).collect();
    assert_eq!(
        keys,
        [
            &EnvironmentKey::Kernel,
            &EnvironmentKey::TackVersion,
            &EnvironmentKey::TackCommit,
            &EnvironmentKey::PriceTable,
            &EnvironmentKey::Toolchain("bash --version | head -1".to_string()),
            &EnvironmentKey::Toolchain("python3 --version".to_string()),
        ]
    );
    assert_eq!(
        drift.environment[0],
        EnvironmentDrift {
            key: EnvironmentKey::Kernel,
            base: Some("6.8.0-40".to_string()),
            candidate: Some("6.9.1".to_string()),
        }
    );
    let lines = drift.describe();
    assert!(lines.contains(&"environment: price table 2026-11-01 → (not recorded)".to_string()));
    assert!(lines.contains(
        &"environment: `bash --version | head -1` (not recorded) → GNU bash, 5.2".to_string()
    ));
    assert!(
        lines.contains(
            &"environment: `python3 --version` Python 3.12.3 → Python 3.13.0".to_string()
        )
    );
}

#[test]
fn variants_differing_in_config_or_models_are_reported() {
    let base = manifest();
    let mut candidate = manifest();
    candidate.variants[1].model = "sim".to_string();
    let prints = &mut print(&mut candidate).variants;
    prints.get_mut("sim-full").unwrap().config_hash = "other".to_string();
    prints.get_mut("oracle").unwrap().models_answered = vec![];
    candidate.variants.push(variant("sim-stdout", "sim"));
    let drift = drift(&base, &candidate);
    assert!(drift.tasks.is_empty() && drift.environment.is_empty());
    assert_eq!(
        drift.variants["sim-full"],
        VariantDrift::Changed(vec![VariantChange::Config])
    );
    assert_eq!(
        drift.variants["oracle"],
        VariantDrift::Changed(vec![
            VariantChange::ModelRequested {
                base: "oracle".to_string(),
                candidate: "sim".to_string()
            },
            VariantChange::ModelsAnswered {
                base: vec!["oracle".to_string()],
                candidate: vec![]
            },
        ])
    );
    assert_eq!(
        drift.variants["sim-stdout"],
        VariantDrift::OnlyIn(Side::Candidate)
    );
    assert!(
        drift.describe().contains(
            &"variant `oracle`: model asked for oracle → sim; models that answered oracle → (none)"
                .to_string()
        )
    );
}

#[test]
fn differently_named_variants_can_be_compared_by_configuration() {
    let mut base = manifest();
    let mut candidate = manifest();
    for m in [&mut base, &mut candidate] {
        m.variants = vec![variant("left", "sim"), variant("right", "sim")];
        let prints = &mut print(m).variants;
        prints.clear();
        for name in ["left", "right"] {
            let print = VariantFingerprint {
                config_hash: "same".to_string(),
                models_answered: vec!["sim".to_string()],
            };
            prints.insert(name.to_string(), print);
        }
    }
    assert_eq!(variant_drift(&base, "left", &candidate, "right"), None);
    print(&mut candidate)
        .variants
        .get_mut("right")
        .unwrap()
        .config_hash = "other".to_string();
    assert_eq!(
        variant_drift(&base, "left", &candidate, "right"),
        Some(VariantDrift::Changed(vec![VariantChange::Config]))
    );
    assert_eq!(
        variant_drift(&base, "left", &candidate, "missing"),
        Some(VariantDrift::OnlyIn(Side::Base))
    );
}

#[test]
fn without_fingerprints_configurations_are_compared_as_recorded() {
    let mut base = manifest();
    let mut candidate = manifest();
    candidate.run_id = format!("{}-again", base.run_id);
    base.fingerprint = None;
    candidate.fingerprint = None;
    // Name and description identify a variant; they configure nothing.
    candidate.variants[0].config["description"] = json!("reworded");
    let quiet = drift(&base, &candidate);
    assert!(quiet.variants.is_empty(), "{:?}", quiet.variants);
    assert_eq!(quiet.unfingerprinted, vec![Side::Base, Side::Candidate]);
    assert!(quiet.tasks.is_empty());
    candidate.variants[0].config["harness"]["max_steps"] = json!(5);
    candidate.suite.content_hash = "changed".to_string();
    let loud = drift(&base, &candidate);
    assert_eq!(
        loud.variants["sim-full"],
        VariantDrift::Changed(vec![VariantChange::Config])
    );
    assert!(!loud.same_suite_content);
    assert!(loud.describe()[0].contains("whether its tasks changed is unknown"));
}

/// Runs imported from other tools' logs hashed no suite: two of them are
/// not "the same suite content" for having the same empty hash, and runs
/// of two suites are said to be.
#[test]
fn imported_runs_and_other_suites_are_said_to_differ() {
    let mut base = manifest();
    let mut candidate = manifest();
    candidate.run_id = format!("{}-other", base.run_id);
    for (m, name) in [(&mut base, "arith"), (&mut candidate, "other")] {
        m.fingerprint = None;
        m.suite.content_hash = String::new();
        m.suite.name = name.to_string();
    }
    let imported = drift(&base, &candidate);
    assert!(!imported.same_suite_content);
    assert_eq!(imported.imported, vec![Side::Base, Side::Candidate]);
    assert!(imported.unfingerprinted.is_empty());
    let lines = imported.describe();
    assert!(
        lines[0].contains("different suites (`arith` and `other`)"),
        "{lines:?}"
    );
    assert!(lines[1].contains("base run hashed no suite"), "{lines:?}");
    // Two variants of one imported run: nothing to say of its tasks.
    assert!(drift(&base, &base).describe().is_empty());
}

/// A shard holds a slice of its plan's trials: compared with a whole run,
/// tasks it did not run would pass for missing results; said.
#[test]
fn a_shard_compared_with_a_whole_run_is_said_to_be_one() {
    let base = {
        let mut m = manifest();
        m.run_id = format!("{}-shard1of3", m.run_id);
        m.shard = Some(tack_trace::Shard {
            index: 1,
            count: 3,
            plan: "p".into(),
        });
        m
    };
    let whole = manifest();
    let found = drift(&base, &whole);
    assert_eq!(found.shards, vec![(Side::Base, 1, 3)]);
    let lines = found.describe();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the base run is shard 1/3 of its plan")),
        "{lines:?}"
    );
    assert!(
        drift(&base, &base).shards.is_empty(),
        "one run's two variants"
    );
}

#[test]
fn drift_serializes_for_json_output() {
    let base = manifest();
    let mut candidate = manifest();
    print(&mut candidate).tasks.get_mut("a").unwrap().fixture = "new".into();
    let value = serde_json::to_value(drift(&base, &candidate)).unwrap();
    assert_eq!(value["tasks"]["a"], json!({"changed": ["fixture"]}));
}
