//! Measures a GGUF model the way an agent uses it: prefill and decode speed, peak memory, and the
//! time of a conversation's second turn with and without KV prefix reuse.
//!
//! ```text
//! cargo run --release -p cairn-local --example measure -- [default|small|fixture|PATH] [--threads N] [--n-ctx N]
//! ```
//!
//! The prompt is an agent's: a short system message, nine file/shell/todo tool schemas, and the
//! request "Create /hello.py that prints hello". Numbers taken while other programs use the CPU
//! are meaningless (the load average is printed).

use std::time::Instant;

use cairn_core::{
    ChatClient, ChatOptions, ChatRequest, Content, FunctionResult, Kwargs, Message, ToolChoice,
    ToolSpec,
};
use cairn_local::{GenerateRequest, LocalClient, LocalConfig, LocalModel, resolve_model};
use serde_json::json;

fn tools() -> Vec<ToolSpec> {
    let s = |props: serde_json::Value, req: &[&str]| json!({"type": "object", "properties": props, "required": req});
    vec![
        ToolSpec::new(
            "ls",
            "List the files in a directory.",
            s(
                json!({"path": {"type": "string", "description": "Absolute directory path."}}),
                &["path"],
            ),
        ),
        ToolSpec::new(
            "read_file",
            "Read a file, with line numbers. Use offset and limit for long files.",
            s(
                json!({"file_path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}),
                &["file_path"],
            ),
        ),
        ToolSpec::new(
            "write_file",
            "Create a new file with the given content.",
            s(
                json!({"file_path": {"type": "string"}, "content": {"type": "string"}}),
                &["file_path", "content"],
            ),
        ),
        ToolSpec::new(
            "edit_file",
            "Replace an exact string in a file.",
            s(
                json!({"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}}),
                &["file_path", "old_string", "new_string"],
            ),
        ),
        ToolSpec::new(
            "glob",
            "Find files matching a glob pattern.",
            s(
                json!({"pattern": {"type": "string"}, "path": {"type": "string"}}),
                &["pattern"],
            ),
        ),
        ToolSpec::new(
            "grep",
            "Search file contents for a literal text.",
            s(
                json!({"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}}),
                &["pattern"],
            ),
        ),
        ToolSpec::new(
            "execute",
            "Run a shell command in the workspace and return its output.",
            s(json!({"command": {"type": "string"}}), &["command"]),
        ),
        ToolSpec::new(
            "write_todos",
            "Replace the todo list used to plan multi-step work.",
            s(
                json!({"todos": {"type": "array", "items": {"type": "object", "properties": {"content": {"type": "string"}, "status": {"enum": ["pending", "in_progress", "completed"]}}, "required": ["content", "status"]}}}),
                &["todos"],
            ),
        ),
        ToolSpec::new(
            "task",
            "Delegate a self-contained task to a sub-agent and get its final report.",
            s(
                json!({"description": {"type": "string"}, "subagent_type": {"type": "string"}}),
                &["description", "subagent_type"],
            ),
        ),
    ]
}

fn vm_hwm_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut spec = "default".to_owned();
    let mut config = LocalConfig {
        n_ctx: 4096,
        ..Default::default()
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--threads" => config.threads = args.next().and_then(|v| v.parse().ok()),
            "--n-ctx" => {
                config.n_ctx = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--n-ctx needs a number")?
            }
            other => spec = other.to_owned(),
        }
    }
    let path = resolve_model(&spec)?;
    println!("model: {}", path.display());
    println!("load average before: {}", loadavg());

    let t = Instant::now();
    let model = LocalModel::load(&path, config)?;
    let info = model.info().clone();
    println!(
        "loaded {} ({} params, arch {:?}, format {:?}) in {:.2}s; n_ctx {}, {} threads",
        info.name,
        info.n_params,
        info.architecture,
        info.format,
        t.elapsed().as_secs_f64(),
        info.n_ctx,
        info.threads
    );
    let client = LocalClient::new(model.clone());
    let kw = Kwargs::default();
    let options = ChatOptions {
        instructions: Some(
            "You are a coding agent working in a sandboxed workspace. Use the tools to inspect and \
             change files and to run commands. Keep answers short. When the task is done, say what \
             you did in one sentence."
                .into(),
        ),
        tools: tools(),
        max_tokens: Some(200),
        ..Default::default()
    };
    let system_only = client.render_prompt(&[], &options);
    println!(
        "system block with 9 tools: {} chars, {} tokens",
        system_only.len(),
        model.count_tokens(&system_only)
    );

    // Decode speed on free text.
    model.clear_cache()?;
    let g = model.generate(GenerateRequest::new(
        client.render_prompt(
            &[Message::user("Write a 12-line poem about rivers.")],
            &ChatOptions::default(),
        ),
        96,
    ))?;
    let decode_tps = g.generated_tokens as f64 / g.decode.as_secs_f64();
    println!(
        "free text: {} tokens in {:.2}s -> decode {:.1} tok/s",
        g.generated_tokens,
        g.decode.as_secs_f64(),
        decode_tps
    );

    // Turn 1: cold prefill of the agent prompt, constrained tool call.
    model.clear_cache()?;
    let mut msgs = vec![Message::user(
        "Create /hello.py that prints hello, then tell me when you are done.",
    )];
    let t = Instant::now();
    let r1 = client
        .get_response(
            ChatRequest::new(&msgs, &options)
                .with_function_invocation_kwargs(&kw)
                .with_client_kwargs(&kw),
        )
        .await?;
    let t1 = t.elapsed();
    let u1 = r1.usage.unwrap_or_default();
    let call = r1.function_calls().next().cloned();
    println!(
        "turn 1: {} prompt tokens ({} cached), {} generated, {:.2}s total; call {:?}",
        u1.input_tokens,
        u1.cached_input_tokens,
        u1.output_tokens,
        t1.as_secs_f64(),
        call.as_ref().map(|c| (&c.name, &c.arguments))
    );
    // Prefill speed on the same prompt, measured alone.
    model.clear_cache()?;
    let p = model.generate(GenerateRequest::new(
        client.render_prompt(&msgs, &options),
        1,
    ))?;
    let prefill_tps = p.prompt_tokens as f64 / p.prefill.as_secs_f64();
    println!(
        "prefill: {} tokens in {:.2}s -> {:.1} tok/s",
        p.prompt_tokens,
        p.prefill.as_secs_f64(),
        prefill_tps
    );

    // Turn 2 after the tool result, with and without prefix reuse.
    msgs.extend(r1.messages.clone());
    msgs.push(Message::tool_result(FunctionResult {
        call_id: call.map(|c| c.call_id).unwrap_or_default(),
        output: vec![Content::text("Updated file /hello.py")],
        is_error: false,
    }));
    let turn2 = ChatOptions {
        tool_choice: Some(ToolChoice::Auto),
        ..options.clone()
    };
    // Restore the cache state an agent has after turn 1.
    model.clear_cache()?;
    client
        .get_response(
            ChatRequest::new(&msgs[..1], &options)
                .with_function_invocation_kwargs(&kw)
                .with_client_kwargs(&kw),
        )
        .await?;
    let t = Instant::now();
    let r2 = client
        .get_response(
            ChatRequest::new(&msgs, &turn2)
                .with_function_invocation_kwargs(&kw)
                .with_client_kwargs(&kw),
        )
        .await?;
    let warm = t.elapsed();
    let u2 = r2.usage.unwrap_or_default();
    println!(
        "turn 2 with reuse: {:.2}s ({} prompt tokens, {} cached, {} generated): {:?}",
        warm.as_secs_f64(),
        u2.input_tokens,
        u2.cached_input_tokens,
        u2.output_tokens,
        r2.text_content()
    );
    model.clear_cache()?;
    let t = Instant::now();
    let r2c = client
        .get_response(
            ChatRequest::new(&msgs, &turn2)
                .with_function_invocation_kwargs(&kw)
                .with_client_kwargs(&kw),
        )
        .await?;
    let cold = t.elapsed();
    let uc = r2c.usage.unwrap_or_default();
    println!(
        "turn 2 without reuse: {:.2}s ({} prompt tokens, {} cached, {} generated)",
        cold.as_secs_f64(),
        uc.input_tokens,
        uc.cached_input_tokens,
        uc.output_tokens
    );
    // The same warm turn 2 at the engine level, to split prefill from decode.
    model.clear_cache()?;
    client
        .get_response(
            ChatRequest::new(&msgs[..1], &options)
                .with_function_invocation_kwargs(&kw)
                .with_client_kwargs(&kw),
        )
        .await?;
    let g2 = model.generate(GenerateRequest::new(
        client.render_prompt(&msgs, &turn2),
        200,
    ))?;
    println!(
        "turn 2 split (engine, warm): {} new prompt tokens in {:.2}s, {} generated in {:.2}s",
        g2.prefilled_tokens(),
        g2.prefill.as_secs_f64(),
        g2.generated_tokens,
        g2.decode.as_secs_f64()
    );
    let rss = vm_hwm_mb().unwrap_or(0.0);
    println!("peak RSS (VmHWM): {rss:.0} MB");
    println!("load average after: {}", loadavg());
    println!();
    println!(
        "| {} | {:.1} | {:.1} | {:.0} MB | {:.2} s | {:.2} s |",
        info.name,
        prefill_tps,
        decode_tps,
        rss,
        warm.as_secs_f64(),
        cold.as_secs_f64()
    );
    Ok(())
}
