//! Prints the JSON size of each default tool's schema and the total.
//!
//! `cargo run -p cairn-deep --example schema_size`

use std::sync::Arc;

use cairn_deep::backend::LocalShellBackend;
use cairn_deep::tools::{filesystem_tools, schema_size, todo_tool};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir();
    let mut tools = filesystem_tools(Arc::new(LocalShellBackend::new(&dir)?));
    tools.push(Arc::new(todo_tool()));
    for t in &tools {
        println!(
            "{:>12}: {:>5} bytes",
            t.spec().name,
            schema_size(std::slice::from_ref(t))
        );
    }
    println!("{:>12}: {:>5} bytes", "total", schema_size(&tools));
    Ok(())
}
