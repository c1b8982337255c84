//! A suite variant with an MCP server, through `tack run`: the model calls
//! the server's tool, and the trace's spans and the trial page name the
//! server. Needs the MCP
//! reference servers (`.ci/run` installs them).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::PathBuf;

use arrow_array::{Array, StringArray};
use tack_testkit::{Dialect, MockServer, ServerOptions, ToolLoop};

const TASK: &str = r#"
instruction = "Say hello through the echo tool."
[[checks]]
name = "never-made"
run = "test -f never-made.txt"
[solution]
[[solution.edits]]
path = "file.txt"
old = "a"
new = "b"
"#;

#[test]
fn a_run_records_which_mcp_server_each_tool_call_went_to() {
    let Some(bin) = tack_testkit::mcp_reference_servers() else {
        return;
    };
    let tool_loop = ToolLoop {
        steps: 2,
        tool: "everything__echo".to_string(),
        argument: "hello {step}".to_string(),
        ..ToolLoop::default()
    };
    let server =
        MockServer::start_tool_loop(Dialect::OpenAi, tool_loop, ServerOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("suite");
    std::fs::create_dir_all(root.join("tasks/echo/fixture")).unwrap();
    std::fs::write(root.join("tasks/echo/task.toml"), TASK).unwrap();
    std::fs::write(root.join("tasks/echo/fixture/file.txt"), "a\n").unwrap();
    let toml = format!(
        "[suite]\nname = \"mcp\"\n\n[[variants]]\nname = \"with-mcp\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.harness]\ntools = [\"read_file\"]\nsandbox = \"{}\"\n\
         [[variants.harness.mcp_servers]]\nname = \"everything\"\ncommand = \"{}\"\n\
         [variants.provider]\nbase_url = \"{}\"\n",
        common::sandbox_profile(),
        bin.join("mcp-server-everything").display(),
        server.base_url()
    );
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    let json = common::run_suite(&root, dir.path(), &[], &[]);
    // The check asks for a file no one makes, so the trial fails and its
    // page is written.
    assert_eq!(
        json["run"]["trials"][0]["outcome"], "verification_failed",
        "{json}"
    );

    let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
    let mut calls = Vec::new();
    for batch in tack_trace::read_table(&run_dir, "spans").unwrap() {
        let kind = common::column::<StringArray>(&batch, "kind");
        let name = common::column::<StringArray>(&batch, "name");
        let mcp = common::column::<StringArray>(&batch, "mcp_server");
        for i in (0..batch.num_rows()).filter(|i| kind.value(*i) == "tool_call") {
            calls.push((
                name.value(i).to_string(),
                (!mcp.is_null(i)).then(|| mcp.value(i).to_string()),
            ));
        }
    }
    let expected = vec![
        (
            "everything__echo".to_string(),
            Some("everything".to_string()),
        ),
        (
            "everything__echo".to_string(),
            Some("everything".to_string()),
        ),
    ];
    assert_eq!(calls, expected);

    let index = PathBuf::from(json["report"].as_str().unwrap());
    let page = index
        .parent()
        .unwrap()
        .join("trials/with-mcp--echo--0.html");
    let page = std::fs::read_to_string(&page).unwrap();
    assert_eq!(page.matches("MCP server everything").count(), 2, "{page}");
}
