//! An MCP server's tool as a cairn [`Tool`]: named `mcp__<server>__<tool>`, the server's JSON
//! schema passed through, results mapped to tool output, and every failure turned into an
//! `Error: …` result the model reads.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::{
    ApprovalMode, BoxFuture, Concurrency, Content, FunctionInvocationContext, Tool, ToolError,
    ToolOutput, ToolSpec,
};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool as McpToolDef};
use serde_json::Value;

use crate::config::ServerConfig;
use crate::error::ClientError;
use crate::toolset::ServerHandle;

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// The separator between server and tool (`mcp__<server>__<tool>`).
pub const DELIMITER: &str = "__";

/// Longest model-visible tool name (OpenAI, Anthropic and Gemini all cap at 64).
pub const MAX_NAME_LEN: usize = 64;

/// The model-visible name of `tool` on `server`: `mcp__<server>__<tool>`, each part reduced to
/// `[A-Za-z0-9_-]` (other characters become `_`). A name longer than [`MAX_NAME_LEN`] is cut
/// and ends with 8 hex digits of a hash of the full name, so two long names stay distinct.
pub fn qualified_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let name = format!("{PREFIX}{}{DELIMITER}{}", clean(server), clean(tool));
    if name.len() <= MAX_NAME_LEN {
        return name;
    }
    with_hash_suffix(&name, &format!("{server}\u{0}{tool}"))
}

/// `name` cut to fit [`MAX_NAME_LEN`] with `_` and 8 hex digits of a hash of `key` appended.
pub(crate) fn with_hash_suffix(name: &str, key: &str) -> String {
    let suffix = format!("_{:08x}", fnv1a(key.as_bytes()) as u32);
    let keep = MAX_NAME_LEN - suffix.len();
    // ASCII only after cleaning, so any cut is a char boundary.
    let mut out: String = name.chars().take(keep).collect();
    out.push_str(&suffix);
    out
}

/// FNV-1a, 64 bits: a hash that is the same in every build (names end up in threads).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Whether a call of `def` needs approval: unless the config trusts it, every tool that does
/// not declare itself read-only (`readOnlyHint: true` and not `destructiveHint: true`) does.
/// The hints come from the server and are only a default for asking, never a permission: a
/// tool the server calls read-only is still guarded when it also says destructive.
pub fn needs_approval(config: &ServerConfig, def: &McpToolDef) -> bool {
    if config.trusts(&def.name) {
        return false;
    }
    let read_only = def
        .annotations
        .as_ref()
        .is_some_and(|a| a.read_only_hint == Some(true) && a.destructive_hint != Some(true));
    !read_only
}

/// One tool of one MCP server.
pub struct McpTool {
    spec: ToolSpec,
    server: Arc<ServerHandle>,
    remote_name: String,
    timeout: Duration,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.spec.name)
            .field("server", &self.server.name())
            .field("remote_name", &self.remote_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(crate) fn new(
        server: Arc<ServerHandle>,
        def: &McpToolDef,
        name: String,
        guard: bool,
    ) -> Self {
        let config = server.config();
        let description = def
            .description
            .as_deref()
            .map(str::to_owned)
            .or_else(|| def.title.clone())
            .or_else(|| def.annotations.as_ref().and_then(|a| a.title.clone()))
            .unwrap_or_else(|| {
                format!(
                    "The `{}` tool of the MCP server `{}`.",
                    def.name,
                    server.name()
                )
            });
        let mut schema = Value::Object((*def.input_schema).clone());
        // Some servers omit `type` or `properties` for tools without arguments; providers
        // reject such schemas.
        if let Value::Object(o) = &mut schema {
            o.entry("type").or_insert_with(|| Value::from("object"));
            o.entry("properties")
                .or_insert_with(|| Value::Object(Default::default()));
        }
        let mut spec = ToolSpec::new(name, description, schema);
        let approval = guard && needs_approval(config, def);
        if approval {
            spec.approval_mode = ApprovalMode::AlwaysRequire;
        }
        let read_only = def
            .annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true));
        if !read_only {
            // A tool that may change things runs alone in its turn, as cairn's write tools do.
            spec.concurrency = Concurrency::Exclusive;
        }
        McpTool {
            spec,
            timeout: config.tool_timeout_duration(),
            remote_name: def.name.to_string(),
            server,
        }
    }

    /// The name the server gives the tool.
    pub fn remote_name(&self) -> &str {
        &self.remote_name
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        self.server.name()
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let arguments = match &ctx.arguments {
                Value::Object(o) => o.clone(),
                Value::Null => Default::default(),
                other => {
                    return Ok(ToolOutput::error(format!(
                        "Error: {} takes a JSON object of arguments, not {other}.",
                        self.spec.name
                    )));
                }
            };
            let span = tracing::debug_span!(
                "tools/call",
                otel.name = %format_args!("tools/call {}", self.remote_name),
                mcp.method.name = "tools/call",
                gen_ai.tool.name = %self.remote_name,
                mcp.server = %self.server.name(),
            );
            let result = tracing::Instrument::instrument(
                self.server
                    .call_tool(&self.remote_name, arguments, self.timeout),
                span,
            )
            .await;
            Ok(match result {
                Ok(r) => map_result(r),
                Err(e) => error_output(self.server.name(), &self.remote_name, &e),
            })
        })
    }
}

/// The `Error: …` result for a failed call.
pub(crate) fn error_output(server: &str, tool: &str, e: &ClientError) -> ToolOutput {
    let text = match e {
        ClientError::Timeout(_) => format!(
            "Error: the MCP server `{server}` gave {e} to the call of `{tool}`; the call was abandoned. Try again later or do without this tool."
        ),
        ClientError::Closed => format!(
            "Error: the MCP server `{server}` stopped during the call of `{tool}` (it closed the connection or exited); its tools are unavailable for now. Do without them."
        ),
        ClientError::Server(m) => {
            format!("Error: the MCP server `{server}` refused the call of `{tool}`: {m}")
        }
        other => format!("Error: the MCP server `{server}` could not run `{tool}`: {other}"),
    };
    ToolOutput::error(text)
}

/// Maps a `tools/call` result to tool output: text blocks as text, images as image parts
/// (`data:` URIs), audio, blobs and resource links as short placeholders, embedded text
/// resources as text, `structuredContent` as JSON text unless a text block already carries
/// the same JSON, and `isError: true` as an error output starting with `Error:`.
pub fn map_result(r: CallToolResult) -> ToolOutput {
    let mut parts: Vec<Content> = Vec::new();
    for block in r.content {
        match block {
            ContentBlock::Text(t) => parts.push(Content::text(t.text)),
            ContentBlock::Image(i) => parts.push(Content::Image {
                url: format!("data:{};base64,{}", i.mime_type, i.data),
                media_type: Some(i.mime_type),
            }),
            ContentBlock::Audio(a) => parts.push(Content::text(format!(
                "[audio: {}, {} bytes, not shown]",
                a.mime_type,
                a.data.len() / 4 * 3
            ))),
            ContentBlock::Resource(res) => match res.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(Content::text(format!("[resource {uri}]\n{text}")));
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => match mime_type {
                    Some(m) if m.starts_with("image/") => parts.push(Content::Image {
                        url: format!("data:{m};base64,{blob}"),
                        media_type: Some(m),
                    }),
                    m => parts.push(Content::text(format!(
                        "[resource {uri}: {}, {} bytes, not shown]",
                        m.as_deref().unwrap_or("binary"),
                        blob.len() / 4 * 3
                    ))),
                },
                _ => parts.push(Content::text("[a resource of a kind cairn does not show]")),
            },
            ContentBlock::ResourceLink(l) => parts.push(Content::text(format!(
                "[resource link: {} <{}>{}]",
                l.name,
                l.uri,
                l.description
                    .as_deref()
                    .map(|d| format!(" {d}"))
                    .unwrap_or_default()
            ))),
            _ => parts.push(Content::text("[content of a kind cairn does not show]")),
        }
    }
    if let Some(structured) = r.structured_content {
        let already = parts.iter().any(|p| {
            p.as_text()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .is_some_and(|v| v == structured)
        });
        if !already {
            parts.push(Content::text(structured.to_string()));
        }
    }
    let is_error = r.is_error == Some(true);
    if is_error {
        let starts = parts
            .iter()
            .find_map(Content::as_text)
            .is_some_and(|t| t.trim_start().starts_with("Error"));
        if !starts {
            parts.insert(0, Content::text("Error: the tool failed: "));
        }
    }
    if parts.is_empty() {
        parts.push(Content::text(if is_error {
            "Error: the tool failed and said nothing more."
        } else {
            "(no output)"
        }));
    }
    ToolOutput { parts, is_error }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;

    #[test]
    fn names_are_qualified_clean_and_short() {
        assert_eq!(qualified_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(
            qualified_name("my server", "get.thing"),
            "mcp__my_server__get_thing"
        );
        let long = qualified_name(
            "a-server-with-a-rather-long-name",
            "and_a_tool_with_an_even_longer_name_than_that",
        );
        assert_eq!(long.len(), MAX_NAME_LEN);
        assert!(cairn_core::tool::is_valid_tool_name(&long));
        let other = qualified_name(
            "a-server-with-a-rather-long-name",
            "and_a_tool_with_an_even_longer_name_than_this",
        );
        assert_ne!(long, other);
        assert_eq!(
            long,
            qualified_name(
                "a-server-with-a-rather-long-name",
                "and_a_tool_with_an_even_longer_name_than_that"
            )
        );
    }

    #[test]
    fn results_map_to_text_images_structure_and_errors() {
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("hello"),
            ContentBlock::image("aGk=", "image/png"),
        ]);
        r.structured_content = Some(serde_json::json!({"t": 1}));
        let out = map_result(r);
        assert!(!out.is_error);
        assert_eq!(out.parts[0].as_text(), Some("hello"));
        assert!(
            matches!(&out.parts[1], Content::Image { url, .. } if url == "data:image/png;base64,aGk=")
        );
        assert_eq!(out.parts[2].as_text(), Some(r#"{"t":1}"#));

        let mut r = CallToolResult::success(vec![ContentBlock::text(r#"{"t": 1}"#)]);
        r.structured_content = Some(serde_json::json!({"t": 1}));
        assert_eq!(
            map_result(r).parts.len(),
            1,
            "the same JSON is not repeated"
        );

        let out = map_result(CallToolResult::error(vec![ContentBlock::text(
            "no such file",
        )]));
        assert!(out.is_error);
        assert!(
            out.text_content().starts_with("Error: "),
            "{}",
            out.text_content()
        );
        assert!(out.text_content().contains("no such file"));
    }

    #[test]
    fn only_read_only_tools_run_without_approval_unless_trusted() {
        let mut def = McpToolDef::new("write", "Writes.", serde_json::Map::new());
        let config = ServerConfig::stdio("x", [""; 0]);
        assert!(needs_approval(&config, &def));
        def.annotations = Some(ToolAnnotations::new().read_only(true));
        assert!(!needs_approval(&config, &def));
        def.annotations = Some(ToolAnnotations::new().read_only(true).destructive(true));
        assert!(needs_approval(&config, &def));
        assert!(!needs_approval(&config.clone().trusted(true), &def));
    }
}
