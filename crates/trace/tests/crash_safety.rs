//! A crash loses nothing: finished trials are in whole Parquet parts or
//! still in their journals, and left-over journals are recovered.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::io::Write;

use std::collections::HashSet;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StringArray, UInt32Array};
use tack_protocol::{
    Event, EventSink, Message, ModelCallRecord, RunTotals, SpanStatus, StopReason, TrialFinished,
    TrialOutcome, TrialStarted, Usage,
};
use tack_trace::{HostInfo, Manifest, RunStatus, RunWriter, SuiteInfo};

fn manifest() -> Manifest {
    Manifest {
        schema_version: tack_trace::MANIFEST_SCHEMA_VERSION,
        run_id: "run-1".to_string(),
        tack_version: "test".to_string(),
        suite: SuiteInfo {
            name: "s".to_string(),
            path: "suites/s".to_string(),
            content_hash: "0".repeat(64),
        },
        variants: vec![],
        tasks: vec!["t".to_string()],
        trials_per_task: 1,
        seed: 1,
        jobs: 1,
        host: HostInfo::current(),
        command_line: vec![],
        started_at: "2026-11-30T00:00:00Z".to_string(),
        finished_at: None,
        status: RunStatus::Running,
        price_table: None,
        fingerprint: None,
        shard: None,
        merged_from: Vec::new(),
        resumes: Vec::new(),
    }
}

fn started(id: &str) -> TrialStarted {
    TrialStarted {
        run_id: "run-1".to_string(),
        trial_id: id.to_string(),
        variant: "v".to_string(),
        task: "t".to_string(),
        trial_index: 0,
        attempt: 0,
        seed: 9,
        model: "sim".to_string(),
        started_at_ms: 1,
        environment: None,
    }
}

fn model_call(span_id: u32) -> Event {
    Event::ModelCall(ModelCallRecord {
        span_id,
        step: span_id,
        provider: "tack".to_string(),
        request_model: "sim".to_string(),
        response_model: "sim".to_string(),
        started_at_ms: 2,
        duration_ms: 1,
        finish_reason: Some("tool_calls".to_string()),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        },
        cost_usd: None,
        messages: vec![0],
        attempt: 1,
        retry_wait_ms: 0,
        rate_limit_wait_ms: 0,
        fault: None,
        purpose: None,
        parent_span_id: None,
        status: SpanStatus::Ok,
        error: None,
    })
}

fn finished() -> Event {
    Event::TrialFinished(TrialFinished {
        outcome: TrialOutcome::Passed,
        stop_reason: StopReason::Completed,
        totals: RunTotals {
            steps: 1,
            ..RunTotals::default()
        },
        feedback_rounds: 0,
        tampered: false,
        checks_passed: Some(true),
        duration_ms: 5,
        finished_at_ms: 6,
        error: None,
    })
}

fn outcomes(run_dir: &std::path::Path) -> Vec<String> {
    let mut all = Vec::new();
    for batch in tack_trace::read_table(run_dir, "trials").unwrap() {
        let column = batch.column_by_name("outcome").unwrap();
        let values = column.as_any().downcast_ref::<StringArray>().unwrap();
        all.extend((0..values.len()).map(|i| values.value(i).to_string()));
    }
    all.sort();
    all
}

#[test]
fn interrupted_trials_are_recovered_from_their_journals() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();

    let mut done = writer.trial(started("done")).unwrap();
    done.record(Event::Message {
        index: 0,
        message: Message::user("go"),
    })
    .unwrap();
    done.record(model_call(1)).unwrap();
    done.record(finished()).unwrap();
    done.finish().unwrap();
    writer.flush().unwrap();

    // This one is cut off mid-trial, its last journal line torn.
    let mut crashed = writer.trial(started("crashed")).unwrap();
    crashed
        .record(Event::Message {
            index: 0,
            message: Message::user("go"),
        })
        .unwrap();
    crashed.record(model_call(1)).unwrap();
    drop(crashed);
    let journal = writer.dir().join("journal/crashed.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap()
        .write_all(b"{\"seq\":3,\"event\":{\"type\":\"mod")
        .unwrap();

    assert_eq!(outcomes(writer.dir()), ["passed"]);
    // While the writing process lives, its journals are trials in progress.
    assert!(tack_trace::run_in_progress(writer.dir()));
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 0);
    // A crash leaves the id of a process that no longer exists.
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 1);
    assert_eq!(
        Manifest::read(writer.dir()).unwrap().status,
        RunStatus::Interrupted
    );
    assert_eq!(outcomes(writer.dir()), ["cancelled", "passed"]);
    // The cut-off trial lasted until its journal's last write, not 0 ms.
    let durations: Vec<u64> = tack_trace::read_table(writer.dir(), "trials")
        .unwrap()
        .iter()
        .flat_map(|batch| {
            let outcome = batch
                .column_by_name("outcome")
                .unwrap()
                .as_string::<i32>()
                .clone();
            let duration = batch
                .column_by_name("duration_ms")
                .unwrap()
                .as_primitive::<arrow_array::types::UInt64Type>()
                .clone();
            (0..batch.num_rows())
                .filter(move |&i| outcome.value(i) == "cancelled")
                .map(move |i| duration.value(i))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(durations.len(), 1);
    assert!(durations[0] > 0, "{durations:?}");
    assert!(!journal.exists());
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 2);
    // Both trials said "go": the run stores it once.
    assert_eq!(tack_trace::count_rows(writer.dir(), "messages").unwrap(), 1);
    for trial in ["done", "crashed"] {
        let transcript = tack_trace::trial_transcript(writer.dir(), trial).unwrap();
        assert_eq!(transcript.len(), 1);
        assert_eq!(transcript[0].message, Message::user("go"));
    }
    // Nothing left to recover the second time.
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 0);
}

#[test]
fn no_partial_files_are_left_and_readers_skip_them() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    let mut trial = writer.trial(started("a")).unwrap();
    trial.record(finished()).unwrap();
    trial.finish().unwrap();
    writer.flush().unwrap();
    std::fs::write(writer.dir().join("trials/.b.parquet.partial"), b"torn").unwrap();
    assert_eq!(tack_trace::count_rows(writer.dir(), "trials").unwrap(), 1);
    let manifest = Manifest::read(writer.dir()).unwrap();
    assert_eq!(manifest.status, RunStatus::Running);
}

fn record_finished(writer: &RunWriter, id: &str) {
    let mut trial = writer.trial(started(id)).unwrap();
    trial
        .record(Event::Message {
            index: 0,
            message: Message::user(format!("task {id}")),
        })
        .unwrap();
    trial.record(model_call(1)).unwrap();
    trial.record(finished()).unwrap();
    trial.finish().unwrap();
}

fn part_files(run_dir: &std::path::Path, table: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run_dir.join(table))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

#[test]
fn finished_trials_of_a_part_not_yet_written_are_recovered_as_they_ended() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "a");
    record_finished(&writer, "b");
    // Killed before the open part was written: its rows were in memory only.
    assert_eq!(outcomes(writer.dir()), Vec::<String>::new());
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 2);
    assert_eq!(outcomes(writer.dir()), ["passed", "passed"]);
    assert_eq!(part_files(writer.dir(), "trials").len(), 1);
}

#[test]
fn a_journal_of_a_trial_already_in_a_part_is_not_recovered_twice() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "a");
    let journal = writer.dir().join("journal/a.jsonl");
    let kept = std::fs::read(&journal).unwrap();
    writer.flush().unwrap();
    // As if killed between the part's rename and the journal's removal.
    std::fs::write(&journal, kept).unwrap();
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 0);
    assert_eq!(outcomes(writer.dir()), ["passed"]);
    assert!(!journal.exists());
}

/// A run in `root` whose parts close at two trials, five trials recorded.
fn five_trials_two_a_part(root: &std::path::Path) -> RunWriter {
    let limits = tack_trace::PartLimits {
        trials: 2,
        ..tack_trace::PartLimits::default()
    };
    let writer = RunWriter::create_with_limits(root, &manifest(), limits).unwrap();
    for id in ["a", "b", "c", "d", "e"] {
        record_finished(&writer, id);
    }
    writer
}

/// A finished run of five trials as it arrives from elsewhere: its parts
/// written, no writer holding it (no claim).
fn received_run(root: &std::path::Path) -> std::path::PathBuf {
    let writer = five_trials_two_a_part(root);
    writer.flush().unwrap();
    let run = writer.dir().to_path_buf();
    drop(writer);
    for file in [tack_trace::PID_FILE, tack_trace::CLAIM_FILE] {
        std::fs::remove_file(run.join(file)).ok();
    }
    run
}

#[test]
fn parts_close_at_their_limit_and_compaction_combines_small_ones() {
    let root = tempfile::tempdir().unwrap();
    let writer = five_trials_two_a_part(root.path());
    // Two parts of two trials are written; the fifth trial's part is open.
    assert_eq!(part_files(writer.dir(), "trials").len(), 2);
    assert_eq!(outcomes(writer.dir()).len(), 4);
    writer.flush().unwrap();
    assert_eq!(
        part_files(writer.dir(), "spans"),
        part_files(writer.dir(), "trials")
    );
    assert_eq!(part_files(writer.dir(), "trials").len(), 3);
    // The journals went with their parts.
    assert_eq!(part_files(writer.dir(), "journal").len(), 0);

    let combined = tack_trace::compact(writer.dir(), tack_trace::PartLimits::default()).unwrap();
    assert_eq!((combined.parts_before, combined.parts_after), (3, 1));
    assert_eq!(part_files(writer.dir(), "trials").len(), 1);
    assert_eq!(part_files(writer.dir(), "messages").len(), 1);
    assert_eq!(outcomes(writer.dir()).len(), 5);
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 5);
    for id in ["a", "e"] {
        let transcript = tack_trace::trial_transcript(writer.dir(), id).unwrap();
        assert_eq!(transcript[0].message, Message::user(format!("task {id}")));
    }
    // Compacting a compact run changes nothing.
    let again = tack_trace::compact(writer.dir(), tack_trace::PartLimits::default()).unwrap();
    assert_eq!((again.parts_before, again.parts_after), (1, 1));
}

/// Rewrites a part's spans file as a tack before `messages_sent` wrote it.
fn without_sent_counts(path: &std::path::Path) {
    without_column(path, "messages_sent");
}

/// Rewrites a part's file of one table without column `name`.
fn without_column(path: &std::path::Path, name: &str) {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let schema = batches[0].schema();
    let kept: Vec<usize> = (0..schema.fields().len())
        .filter(|&i| schema.field(i).name() != name)
        .collect();
    let batches: Vec<_> = batches.iter().map(|b| b.project(&kept).unwrap()).collect();
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    for batch in &batches {
        writer.write(batch).unwrap();
    }
    writer.close().unwrap();
}

#[test]
fn compaction_combines_parts_of_the_same_columns_only() {
    let root = tempfile::tempdir().unwrap();
    let writer = five_trials_two_a_part(root.path());
    writer.flush().unwrap();
    // The second part as an older tack wrote it, as in a run it began and a
    // newer one resumed.
    let names = part_files(writer.dir(), "spans");
    assert_eq!(names.len(), 3);
    without_sent_counts(&writer.dir().join("spans").join(&names[1]));

    let combined = tack_trace::compact(writer.dir(), tack_trace::PartLimits::default()).unwrap();
    assert_eq!((combined.parts_before, combined.parts_after), (3, 3));
    assert_eq!(outcomes(writer.dir()).len(), 5);
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 5);
}

#[test]
fn compaction_keeps_a_message_stored_by_two_runs_once() {
    let root = tempfile::tempdir().unwrap();
    let merged = root.path().join("merged");
    std::fs::create_dir_all(&merged).unwrap();
    for run in ["one", "two"] {
        let mut m = manifest();
        m.run_id = run.to_string();
        let writer = RunWriter::create(root.path(), &m).unwrap();
        // Same content in both runs: the same message id.
        record_finished(&writer, &format!("{run}-x"));
        let mut trial = writer.trial(started(&format!("{run}-y"))).unwrap();
        trial
            .record(Event::Message {
                index: 0,
                message: Message::user("shared"),
            })
            .unwrap();
        trial.record(finished()).unwrap();
        trial.finish().unwrap();
        writer.close(&m).unwrap();
        tack_trace::adopt_parts(writer.dir(), &merged).unwrap();
    }
    assert_eq!(part_files(&merged, "trials").len(), 2);
    assert_eq!(tack_trace::count_rows(&merged, "messages").unwrap(), 4);
    let done = tack_trace::compact(&merged, tack_trace::PartLimits::default()).unwrap();
    assert_eq!(done.messages_deduplicated, 1);
    assert_eq!(tack_trace::count_rows(&merged, "messages").unwrap(), 3);
    assert_eq!(part_files(&merged, "trials").len(), 1);
    assert_eq!(tack_trace::stored_trial_ids(&merged).unwrap().len(), 4);
    // The merged run's parts were linked, not copied, and compacting it
    // rewrote them: the runs it adopted still hold every row of their own.
    for run in ["one", "two"] {
        let dir = root.path().join(run);
        assert_eq!(
            tack_trace::count_rows(&dir, "messages").unwrap(),
            2,
            "{run}"
        );
        assert_eq!(
            tack_trace::stored_trial_ids(&dir).unwrap().len(),
            2,
            "{run}"
        );
        let transcript = tack_trace::trial_transcript(&dir, &format!("{run}-y")).unwrap();
        assert_eq!(transcript[0].message, Message::user("shared"));
    }
}

#[test]
fn a_journal_cut_off_before_its_first_line_is_discarded() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "a");
    let journals = writer.dir().join("journal");
    std::fs::write(journals.join("empty.jsonl"), b"").unwrap();
    std::fs::write(journals.join("torn.jsonl"), b"{\"seq\":0,\"event\":{\"ty").unwrap();
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 1);
    assert_eq!(outcomes(writer.dir()), ["passed"]);
    assert_eq!(part_files(writer.dir(), "journal").len(), 0);
    // A journal that is not one is not silently dropped.
    let line = serde_json::json!({"seq": 0, "event": {"type": "message", "index": 0,
        "message": {"role": "user", "content": "hi"}}});
    std::fs::write(journals.join("other.jsonl"), format!("{line}\n")).unwrap();
    assert!(tack_trace::recover_journals(writer.dir()).is_err());
}

#[test]
fn a_part_closes_once_its_first_trial_has_waited_long_enough() {
    let root = tempfile::tempdir().unwrap();
    let limits = tack_trace::PartLimits {
        age: std::time::Duration::ZERO,
        ..tack_trace::PartLimits::default()
    };
    let writer = RunWriter::create_with_limits(root.path(), &manifest(), limits).unwrap();
    record_finished(&writer, "a");
    // Readable while the run goes on, without waiting for a thousand trials.
    assert_eq!(outcomes(writer.dir()), ["passed"]);
    record_finished(&writer, "b");
    assert_eq!(part_files(writer.dir(), "trials").len(), 2);
    writer.close(&manifest()).unwrap();
    assert_eq!(part_files(writer.dir(), "trials").len(), 1);
    assert_eq!(outcomes(writer.dir()), ["passed", "passed"]);
}

#[test]
fn a_part_cut_off_between_its_renames_is_replaced_from_the_journals() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "a");
    writer.flush().unwrap();
    record_finished(&writer, "b");
    let journal = writer.dir().join("journal/b.jsonl");
    let kept = std::fs::read(&journal).unwrap();
    writer.flush().unwrap();
    // As if killed after the second part's spans and messages were renamed
    // into place, before its trials were: no trials file, the journal kept.
    let second = &part_files(writer.dir(), "trials")[1];
    std::fs::remove_file(writer.dir().join("trials").join(second)).unwrap();
    std::fs::write(&journal, kept).unwrap();
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 1);
    assert_eq!(outcomes(writer.dir()), ["passed", "passed"]);
    // One span per trial: the orphaned spans file is gone.
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 2);
}

#[test]
fn a_trial_recorded_without_a_journal_is_stored_as_a_journalled_one() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "journalled");
    let events = vec![
        Event::TrialStarted(started("direct")),
        Event::Message {
            index: 0,
            message: Message::user("task journalled"),
        },
        model_call(1),
        finished(),
    ];
    writer.record_trial(events).unwrap();
    assert!(writer.record_trial(vec![finished()]).is_err());
    assert_eq!(part_files(writer.dir(), "journal"), ["journalled.jsonl"]);
    writer.close(&manifest()).unwrap();
    assert_eq!(outcomes(writer.dir()), ["passed", "passed"]);
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 2);
    // The same message in both trials is stored once.
    assert_eq!(tack_trace::count_rows(writer.dir(), "messages").unwrap(), 1);
    let transcript = tack_trace::trial_transcript(writer.dir(), "direct").unwrap();
    assert_eq!(transcript[0].message, Message::user("task journalled"));
}

#[test]
fn transcripts_of_several_trials_find_messages_stored_by_other_parts() {
    let root = tempfile::tempdir().unwrap();
    let limits = tack_trace::PartLimits {
        trials: 1,
        bytes: usize::MAX,
        ..tack_trace::PartLimits::default()
    };
    let writer = RunWriter::create_with_limits(root.path(), &manifest(), limits).unwrap();
    for id in ["a", "b", "c"] {
        let mut trial = writer.trial(started(id)).unwrap();
        for (index, text) in [(0, "shared prompt".to_string()), (1, format!("task {id}"))] {
            trial
                .record(Event::Message {
                    index,
                    message: Message::user(text),
                })
                .unwrap();
        }
        trial.record(finished()).unwrap();
        trial.finish().unwrap();
    }
    writer.flush().unwrap();
    assert_eq!(part_files(writer.dir(), "messages").len(), 3);
    let transcripts = tack_trace::trial_transcripts(writer.dir(), &["c", "a", "nope"]).unwrap();
    assert_eq!(transcripts.len(), 2, "a trial without a row is absent");
    for id in ["a", "c"] {
        let texts: Vec<&str> = transcripts[id]
            .iter()
            .map(|m| m.message.content.as_str())
            .collect();
        assert_eq!(texts, ["shared prompt", format!("task {id}").as_str()]);
    }
    // The shared prompt is stored once, in the first part, by its trial.
    assert_eq!(tack_trace::count_rows(writer.dir(), "messages").unwrap(), 4);
    assert!(tack_trace::trial_transcript(writer.dir(), "nope").is_err());
    let stored_by: Vec<(String, String)> = tack_trace::read_table(writer.dir(), "messages")
        .unwrap()
        .iter()
        .flat_map(|batch| {
            let column = |name| {
                let texts = batch.column_by_name(name).unwrap().as_string::<i32>();
                texts
                    .iter()
                    .map(|t| t.unwrap().to_string())
                    .collect::<Vec<_>>()
            };
            column("trial_id").into_iter().zip(column("content"))
        })
        .collect();
    let by = |trial: &str, text: &str| (trial.to_string(), text.to_string());
    assert_eq!(
        stored_by,
        [
            by("a", "shared prompt"),
            by("a", "task a"),
            by("b", "task b"),
            by("c", "task c")
        ]
    );
    // A part as a tack before messages named their trial wrote it: its
    // messages are found by their ids.
    let names = part_files(writer.dir(), "messages");
    for name in [&names[0], &names[2]] {
        without_column(&writer.dir().join("messages").join(name), "trial_id");
    }
    assert_eq!(
        tack_trace::trial_transcripts(writer.dir(), &["c", "a", "nope"]).unwrap(),
        transcripts
    );
}

/// The message ids of each model-call span of `trial`, in span order.
fn sent_ids(run_dir: &std::path::Path, trial: &str) -> Vec<Vec<String>> {
    use arrow_array::ListArray;
    let mut sent = Vec::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let trials = column("trial_id");
        let trials = trials.as_any().downcast_ref::<StringArray>().unwrap();
        let lists = column("message_ids");
        let lists = lists.as_any().downcast_ref::<ListArray>().unwrap();
        for row in (0..batch.num_rows()).filter(|&row| trials.value(row) == trial) {
            let ids = lists.value(row);
            let ids = ids.as_any().downcast_ref::<StringArray>().unwrap();
            sent.push((0..ids.len()).map(|i| ids.value(i).to_string()).collect());
        }
    }
    sent
}

#[test]
fn a_model_call_keeps_the_list_of_messages_it_sent_and_old_journals_their_prefix() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    let history = [
        Message::system("be brief"),
        Message::user("go"),
        Message::tool_result("call-1", "[result dropped]"),
    ];
    // A call that sent the system prompt and the stub, not the instruction.
    let mut trial = writer.trial(started("listed")).unwrap();
    for (index, message) in history.iter().enumerate() {
        trial
            .record(Event::Message {
                index: index as u32,
                message: message.clone(),
            })
            .unwrap();
    }
    let Event::ModelCall(mut call) = model_call(1) else {
        unreachable!()
    };
    call.messages = vec![0, 2];
    trial.record(Event::ModelCall(call)).unwrap();
    trial.record(finished()).unwrap();
    trial.finish().unwrap();
    writer.flush().unwrap();

    // A journal from before calls listed their messages: a range instead.
    let journal = writer.dir().join("journal/old.jsonl");
    let mut lines = Vec::new();
    let mut push = |event: serde_json::Value| {
        let seq = lines.len();
        lines.push(serde_json::json!({"seq": seq, "event": event}).to_string());
    };
    push(serde_json::to_value(Event::TrialStarted(started("old"))).unwrap());
    for (index, message) in history[..2].iter().enumerate() {
        let event = Event::Message {
            index: index as u32,
            message: message.clone(),
        };
        push(serde_json::to_value(event).unwrap());
    }
    let mut legacy = serde_json::to_value(model_call(1)).unwrap();
    let fields = legacy.as_object_mut().unwrap();
    fields.remove("messages");
    fields.insert("messages_from".into(), 0.into());
    fields.insert("messages_to".into(), 2.into());
    push(legacy);
    push(
        serde_json::to_value(Event::Message {
            index: 2,
            message: history[2].clone(),
        })
        .unwrap(),
    );
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 1);

    let ids = |trial: &str| -> Vec<String> {
        let transcript = tack_trace::trial_transcript(writer.dir(), trial).unwrap();
        transcript.into_iter().map(|m| m.id).collect()
    };
    let listed = ids("listed");
    assert_eq!(
        sent_ids(writer.dir(), "listed"),
        [vec![listed[0].clone(), listed[2].clone()]]
    );
    // The old call sent what was recorded before it, not the later message.
    let old = ids("old");
    assert_eq!(old.len(), 3);
    assert_eq!(sent_ids(writer.dir(), "old"), [old[..2].to_vec()]);

    // Each call's count is written beside its list, and a reader that asks
    // for the counts alone is not given the lists.
    let wanted: HashSet<&str> = ["listed", "old"].into();
    let rows = tack_trace::read_trial_rows(
        writer.dir(),
        "spans",
        tack_trace::Columns::AllButSentIds,
        &wanted,
    )
    .unwrap();
    let mut counts = Vec::new();
    for (_, batch) in &rows {
        assert!(batch.column_by_name("message_ids").is_none());
        assert!(batch.column_by_name("stdout").is_some());
        let sent = batch.column_by_name("messages_sent").unwrap();
        let sent = sent.as_any().downcast_ref::<UInt32Array>().unwrap();
        counts.extend(sent.iter());
    }
    assert_eq!(counts, [Some(2), Some(2)]);
}

#[test]
fn a_running_runs_journals_say_which_trials_finished_and_how() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    record_finished(&writer, "done");
    let mut running = writer.trial(started("running")).unwrap();
    running.record(model_call(1)).unwrap();
    let mut trials = tack_trace::journaled_trials(writer.dir());
    trials.sort_by(|a, b| a.trial_id.cmp(&b.trial_id));
    let seen: Vec<(&str, &str, Option<TrialOutcome>)> = trials
        .iter()
        .map(|t| (t.trial_id.as_str(), t.variant.as_str(), t.outcome))
        .collect();
    assert_eq!(
        seen,
        [
            ("done", "v", Some(TrialOutcome::Passed)),
            ("running", "v", None)
        ]
    );
    // Once its part is written, a trial's journal is gone, and so is it.
    running.record(finished()).unwrap();
    running.finish().unwrap();
    writer.flush().unwrap();
    assert!(tack_trace::journaled_trials(writer.dir()).is_empty());
}

/// A model call's span and the answer recorded right after it reach the
/// journal in one write: the span alone is not in the journal yet, the
/// pair is once the answer comes. A failed call (a retry may wait before
/// the next event) is written at once, and a recorder dropped unfinished
/// writes what it held.
#[test]
fn a_call_span_is_journalled_with_the_message_that_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(dir.path(), &manifest()).unwrap();
    let journal = |id: &str| {
        let path = writer.dir().join("journal").join(format!("{id}.jsonl"));
        std::fs::read_to_string(path).unwrap().lines().count()
    };
    let mut recorder = writer.trial(started("held")).unwrap();
    assert_eq!(journal("held"), 1);
    recorder.record(model_call(1)).unwrap();
    assert_eq!(journal("held"), 1, "the span waits for its message");
    recorder
        .record(Event::Message {
            index: 1,
            message: Message::assistant("done", vec![]),
        })
        .unwrap();
    assert_eq!(journal("held"), 3);
    let Event::ModelCall(mut failed) = model_call(2) else {
        unreachable!()
    };
    failed.status = SpanStatus::Error;
    recorder.record(Event::ModelCall(failed)).unwrap();
    assert_eq!(journal("held"), 4, "a failed call is written at once");
    recorder.record(model_call(3)).unwrap();
    assert_eq!(journal("held"), 4);
    drop(recorder);
    assert_eq!(journal("held"), 5, "dropped, it writes what it held");
}

/// A run's compaction plan comes with the run, which may come from
/// elsewhere: one naming files outside the run's tables is refused before
/// anything is renamed or removed; one written where the run was before
/// it moved is carried out in the run as it is now.
#[test]
fn a_compaction_plan_touches_only_the_runs_own_parts() {
    let root = tempfile::tempdir().unwrap();
    let writer = five_trials_two_a_part(root.path());
    writer.flush().unwrap();
    let run = writer.dir().to_path_buf();
    let victim = root.path().join("victim.parquet");
    std::fs::write(&victim, "the user's file").unwrap();
    let parts = part_files(&run, "trials");
    for plan in [
        serde_json::json!({"rename": [], "remove": [victim]}),
        serde_json::json!({"rename": [[run.join("trials/.x.parquet.partial"), run.join("../victim.parquet")]], "remove": []}),
        serde_json::json!({"rename": [], "remove": [run.join("journal").join(&parts[0])]}),
        serde_json::json!({"rename": [], "remove": [run.join("trials").join(&parts[0]), "/etc/hostname"]}),
    ] {
        std::fs::write(run.join("compaction.json"), plan.to_string()).unwrap();
        let error = tack_trace::finish_pending(&run).unwrap_err().to_string();
        assert!(error.contains("not a part file of this run"), "{error}");
        assert!(victim.exists());
        assert_eq!(part_files(&run, "trials"), parts, "nothing was removed");
    }
    // Written before the run moved: the same table and name, here.
    let elsewhere = std::path::Path::new("/moved/run-1/trials");
    let plan = serde_json::json!({"rename": [], "remove": [elsewhere.join(&parts[0])]});
    std::fs::write(run.join("compaction.json"), plan.to_string()).unwrap();
    tack_trace::finish_pending(&run).unwrap();
    assert_eq!(part_files(&run, "trials"), parts[1..]);
    assert!(!run.join("compaction.json").exists());
}

/// `f`, failing the test if it has not returned within a minute (the
/// failure it guards against is a read that blocks for ever).
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()));
    result
        .recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not return: it waits on a pipe or reads for ever"))
}

fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

/// A run may come from elsewhere: a named pipe or a link to /dev/zero
/// among its files is an error naming the file, not a reader that waits
/// for ever or fills memory.
#[test]
fn a_runs_pipes_and_links_are_refused_not_read() {
    let root = tempfile::tempdir().unwrap();
    let run = received_run(root.path());
    std::fs::create_dir_all(run.join("journal")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", run.join("journal/zero.jsonl")).unwrap();
    let dir = run.clone();
    let error = within_a_minute("recover_journals", move || {
        tack_trace::recover_journals(&dir).unwrap_err().to_string()
    });
    assert!(
        error.contains("zero.jsonl") && error.contains("symbolic link"),
        "{error}"
    );
    std::fs::remove_file(run.join("journal/zero.jsonl")).unwrap();
    mkfifo(&run.join("journal/pipe.jsonl"));
    let dir = run.clone();
    let error = within_a_minute("recover_journals", move || {
        tack_trace::recover_journals(&dir).unwrap_err().to_string()
    });
    assert!(
        error.contains("pipe.jsonl") && error.contains("not a regular file"),
        "{error}"
    );
    let dir = run.clone();
    assert!(
        within_a_minute("journaled_trials", move || tack_trace::journaled_trials(
            &dir
        ))
        .is_empty()
    );
    std::fs::remove_file(run.join("journal/pipe.jsonl")).unwrap();

    mkfifo(&run.join(tack_trace::PID_FILE));
    let dir = run.clone();
    assert!(!within_a_minute("run_in_progress", move || {
        tack_trace::run_in_progress(&dir)
    }));
    std::fs::remove_file(run.join(tack_trace::PID_FILE)).unwrap();

    let part = run.join("trials").join(&part_files(&run, "trials")[0]);
    std::fs::remove_file(&part).unwrap();
    mkfifo(&part);
    let dir = run.clone();
    let error = within_a_minute("read_table", move || {
        tack_trace::read_table(&dir, "trials")
            .unwrap_err()
            .to_string()
    });
    assert!(error.contains("not a regular file"), "{error}");
}

/// A received run whose journal or table directory is a link to another
/// place: nothing there is read, copied or removed.
#[test]
fn a_runs_linked_directories_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let run = received_run(root.path());
    let victim = root.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("dataset.jsonl"), "{\"precious\": 1}\n").unwrap();
    std::fs::write(victim.join("notes.parquet.partial"), "mine").unwrap();
    for linked in ["journal", "spans"] {
        let dir = run.join(linked);
        let kept = root.path().join(format!("kept-{linked}"));
        if dir.exists() {
            std::fs::rename(&dir, &kept).unwrap();
        }
        std::os::unix::fs::symlink(&victim, &dir).unwrap();
        let recovered = tack_trace::recover_journals(&run).unwrap_err().to_string();
        assert!(
            recovered.contains("not the run's own directory"),
            "{recovered}"
        );
        assert!(tack_trace::Manifest::read(&run).is_err());
        let merged = root.path().join("merged");
        assert!(tack_trace::adopt_parts(&run, &merged).is_err());
        assert!(!merged.join("journal/dataset.jsonl").exists());
        assert_eq!(
            std::fs::read_dir(&victim).unwrap().count(),
            2,
            "nothing removed"
        );
        std::fs::remove_file(&dir).unwrap();
        if kept.exists() {
            std::fs::rename(&kept, &dir).unwrap();
        }
    }
    assert!(tack_trace::Manifest::read(&run).is_ok());
}

/// A link left at a temporary's name in a received run (the manifest's,
/// a part's) is replaced, not written through: recovering the run, which
/// rewrites its manifest, leaves the file the link leads to as it was and
/// makes none where it leads nowhere.
#[test]
fn a_link_at_a_temporary_name_is_not_written_through() {
    let root = tempfile::tempdir().unwrap();
    let run = received_run(root.path());
    let mut manifest = tack_trace::Manifest::read(&run).unwrap();
    manifest.status = RunStatus::Running;
    manifest.write(&run).unwrap();
    let victim = root.path().join("victim");
    std::fs::write(&victim, "the user's file").unwrap();
    let nowhere = root.path().join("made-by-tack");
    std::os::unix::fs::symlink(&victim, run.join(".manifest.json.partial")).unwrap();
    let part = part_files(&run, "trials")[0].clone();
    std::os::unix::fs::symlink(
        &nowhere,
        run.join("trials").join(format!(".{part}.partial")),
    )
    .unwrap();
    std::fs::create_dir_all(run.join("journal")).unwrap();
    tack_trace::recover_journals(&run).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's file");
    assert!(!nowhere.exists());
    assert_eq!(
        tack_trace::Manifest::read(&run).unwrap().status,
        RunStatus::Interrupted
    );
}
