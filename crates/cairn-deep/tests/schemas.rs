//! Snapshots of every built-in tool's spec, and the size of the default tool set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cairn_core::SharedTool;
use cairn_deep::backend::LocalShellBackend;
use cairn_deep::tools::{filesystem_tools, schema_size, todo_tool};

fn all_tools() -> (tempfile::TempDir, Vec<SharedTool>) {
    let dir = tempfile::tempdir().unwrap();
    let mut tools = filesystem_tools(Arc::new(LocalShellBackend::new(dir.path()).unwrap()));
    tools.push(Arc::new(todo_tool()));
    (dir, tools)
}

#[test]
fn tool_specs_snapshot() {
    let (_dir, tools) = all_tools();
    let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ls",
            "read_file",
            "write_file",
            "edit_file",
            "delete",
            "glob",
            "grep",
            "execute",
            "write_todos"
        ]
    );
    for tool in &tools {
        let spec = tool.spec();
        assert!(cairn_core::tool::is_valid_tool_name(&spec.name));
        insta::assert_json_snapshot!(spec.name.clone(), spec);
    }
}

#[test]
fn default_tool_set_is_small() {
    let (_dir, tools) = all_tools();
    let total = schema_size(&tools);
    for t in &tools {
        println!(
            "{:>12}: {} bytes",
            t.spec().name,
            schema_size(std::slice::from_ref(t))
        );
    }
    println!("total: {total} bytes (deepagents: ~10,400)");
    // Half of deepagents' ~10,400 chars or less.
    assert!(total <= 5_200, "the tool schemas grew to {total} bytes");
}
