//! Manifests written before fingerprints still read, and read as what they
//! are: schema version 1, no fingerprint.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::Path;

use tack_trace::{MANIFEST_SCHEMA_VERSION, Manifest, RunFingerprint, Side, drift};

fn read_v1() -> Manifest {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifest-v1.json"),
        dir.path().join(Manifest::FILE_NAME),
    )
    .unwrap();
    Manifest::read(dir.path()).unwrap()
}

#[test]
fn a_manifest_from_before_fingerprints_reads() {
    let manifest = read_v1();
    assert_eq!(manifest.schema_version, 1);
    assert!(manifest.fingerprint.is_none());
    assert_eq!(manifest.run_id, "20261201-074246-demo-5463");
    assert_eq!(manifest.variants.len(), 7);
    assert_eq!(manifest.price_table.as_deref(), Some("2026-11-01"));
}

#[test]
fn a_fingerprinted_manifest_round_trips() {
    let mut manifest = read_v1();
    manifest.schema_version = MANIFEST_SCHEMA_VERSION;
    let mut fingerprint = RunFingerprint::default();
    fingerprint.environment.kernel = "6.8.0".to_string();
    fingerprint
        .environment
        .toolchains
        .insert("python3 --version".to_string(), "Python 3.12.3".to_string());
    manifest.fingerprint = Some(fingerprint);
    let dir = tempfile::tempdir().unwrap();
    manifest.write(dir.path()).unwrap();
    assert_eq!(Manifest::read(dir.path()).unwrap(), manifest);
}

#[test]
fn an_old_manifest_is_compared_by_what_it_records() {
    let old = read_v1();
    let mut new = old.clone();
    new.schema_version = MANIFEST_SCHEMA_VERSION;
    new.fingerprint = Some(RunFingerprint::default());
    let drift = drift(&old, &new);
    assert_eq!(drift.unfingerprinted, vec![Side::Base]);
    assert!(drift.same_suite_content);
    assert!(drift.tasks.is_empty(), "{:?}", drift.tasks);
    assert!(drift.variants.is_empty(), "{:?}", drift.variants);
    let lines = drift.describe();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("base run was recorded before fingerprints"));
    assert!(lines[0].contains("its tasks are the same"));
}
