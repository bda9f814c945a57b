//! Harness profiles: per-provider or per-model adjustments of the harness (SPEC R5.6).

use std::collections::{BTreeMap, BTreeSet};

use cairn_core::{
    BoxFuture, FunctionInvocationContext, RespecTool, SharedTool, Tool, ToolError, ToolOutput,
    ToolSpec,
};
use serde::{Deserialize, Serialize};

/// Adjustments of the harness for one provider or model.
///
/// Profiles merge: a model's profile over its provider's (scalars override, maps merge with the
/// override winning per key, sets union).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HarnessProfile {
    /// Replaces the base agent prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_system_prompt: Option<String>,
    /// Appended after the base prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt_suffix: Option<String>,
    /// New descriptions for tools (built-in or user), by tool name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_description_overrides: BTreeMap<String, String>,
    /// Tools the model never sees.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub excluded_tools: BTreeSet<String>,
    /// The model's input window, for context compression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<usize>,
    /// Tool results larger than this many tokens are offloaded to files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_result_tokens: Option<usize>,
    /// Cap on the tokens of each reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_reply_tokens: Option<u32>,
    /// Put the parts of the system prompt that vary between projects (the builder's custom
    /// prompt, memory, skills) after the harness's fixed sections instead of first, so the
    /// fixed text is a prefix shared by every run (an embedded model reuses its KV cache for it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub custom_prompt_last: bool,
    /// Arguments filled into a tool's calls when the model leaves them out, by tool name (e.g.
    /// `grep` → `{"output_mode": "content"}`: a small model then sees the matching lines).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_argument_defaults: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// `write_file` replaces an existing file's whole text instead of failing
    /// ([`overwriting_write_file_tool`](crate::tools::overwriting_write_file_tool)).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub write_file_overwrites: bool,
    /// Optional parameters removed from a tool's schema, by tool name: the model neither sees
    /// nor sends them, and the tool uses its default (or
    /// [`tool_argument_defaults`](Self::tool_argument_defaults)). The 1.5B model filled in
    /// every optional parameter, some with the wrong value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hidden_tool_parameters: BTreeMap<String, BTreeSet<String>>,
    /// Before the model's first turn on a request, small files the request names
    /// (`utils.py is wrong: …`) are read for it: the run's input gets a `read_file` call of each
    /// and its result (see [`crate::mentions`]). The 1.5B model edited guessed text or answered
    /// in prose when it had not read the file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_mentioned_files: bool,
    /// `read_file` shows a file's text without line numbers
    /// ([`plain_read_file_tool`](crate::tools::plain_read_file_tool)): the 1.5B model copied
    /// the numbers into the text it wrote back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plain_file_reads: bool,
    /// `edit_file` with an empty `old_string` adds `new_string` at the end of an existing file
    /// instead of failing ([`appending_edit_file_tool`](crate::tools::appending_edit_file_tool)):
    /// asked to add a line, the 1.5B model called it that way first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub edit_empty_appends: bool,
}

impl HarnessProfile {
    /// `self` with `other` laid over it.
    pub fn merged(&self, other: &HarnessProfile) -> HarnessProfile {
        let mut out = self.clone();
        if other.base_system_prompt.is_some() {
            out.base_system_prompt = other.base_system_prompt.clone();
        }
        if other.system_prompt_suffix.is_some() {
            out.system_prompt_suffix = other.system_prompt_suffix.clone();
        }
        for (k, v) in &other.tool_description_overrides {
            out.tool_description_overrides.insert(k.clone(), v.clone());
        }
        out.excluded_tools
            .extend(other.excluded_tools.iter().cloned());
        if other.max_input_tokens.is_some() {
            out.max_input_tokens = other.max_input_tokens;
        }
        if other.max_tool_result_tokens.is_some() {
            out.max_tool_result_tokens = other.max_tool_result_tokens;
        }
        if other.max_reply_tokens.is_some() {
            out.max_reply_tokens = other.max_reply_tokens;
        }
        out.custom_prompt_last |= other.custom_prompt_last;
        out.write_file_overwrites |= other.write_file_overwrites;
        out.read_mentioned_files |= other.read_mentioned_files;
        out.plain_file_reads |= other.plain_file_reads;
        out.edit_empty_appends |= other.edit_empty_appends;
        for (tool, hidden) in &other.hidden_tool_parameters {
            out.hidden_tool_parameters
                .entry(tool.clone())
                .or_default()
                .extend(hidden.iter().cloned());
        }
        for (tool, defaults) in &other.tool_argument_defaults {
            let mine = out.tool_argument_defaults.entry(tool.clone()).or_default();
            for (k, v) in defaults {
                mine.insert(k.clone(), v.clone());
            }
        }
        out
    }

    /// Applies description overrides, argument defaults and exclusions to a tool list.
    pub fn apply_to_tools(&self, tools: Vec<SharedTool>) -> Vec<SharedTool> {
        tools
            .into_iter()
            .filter(|t| !self.excluded_tools.contains(&t.spec().name))
            .map(
                |t| match self.tool_description_overrides.get(&t.spec().name) {
                    Some(d) => {
                        let d = d.clone();
                        std::sync::Arc::new(RespecTool::new(t, |s| s.description = d)) as SharedTool
                    }
                    None => t,
                },
            )
            .map(|t| match self.hidden_tool_parameters.get(&t.spec().name) {
                Some(hidden) if !hidden.is_empty() => {
                    let hidden = hidden.clone();
                    std::sync::Arc::new(RespecTool::new(t, |s| {
                        let mut schema = s.parameters.value().clone();
                        if let Some(props) = schema
                            .get_mut("properties")
                            .and_then(serde_json::Value::as_object_mut)
                        {
                            props.retain(|k, _| !hidden.contains(k));
                        }
                        if let Some(req) = schema
                            .get_mut("required")
                            .and_then(serde_json::Value::as_array_mut)
                        {
                            req.retain(|k| k.as_str().is_none_or(|k| !hidden.contains(k)));
                        }
                        s.parameters = cairn_core::ToolParameters::new(schema);
                    })) as SharedTool
                }
                _ => t,
            })
            .map(|t| match self.tool_argument_defaults.get(&t.spec().name) {
                Some(d) if !d.is_empty() => std::sync::Arc::new(DefaultArguments {
                    inner: t,
                    defaults: d.clone(),
                }) as SharedTool,
                _ => t,
            })
            .collect()
    }
}

/// A tool whose calls get [`HarnessProfile::tool_argument_defaults`] for the arguments they
/// leave out.
struct DefaultArguments {
    inner: SharedTool,
    defaults: serde_json::Map<String, serde_json::Value>,
}

impl Tool for DefaultArguments {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let mut ctx = ctx.clone();
            if let serde_json::Value::Object(args) = &mut ctx.arguments {
                for (k, v) in &self.defaults {
                    if args.get(k).is_none_or(serde_json::Value::is_null) {
                        args.insert(k.clone(), v.clone());
                    }
                }
            }
            self.inner.invoke(&ctx).await
        })
    }
    fn review_call(&self, arguments: &serde_json::Value) -> cairn_core::interrupt::CallReview {
        self.inner.review_call(arguments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lays_the_model_over_the_provider() {
        let mut r = ProfileRegistry::new();
        r.register(
            "openai",
            HarnessProfile {
                system_prompt_suffix: Some("p".into()),
                max_input_tokens: Some(1),
                ..Default::default()
            },
        );
        r.register(
            "openai:gpt-4.1",
            HarnessProfile {
                max_input_tokens: Some(2),
                ..Default::default()
            },
        );
        let p = r.resolve("openai:gpt-4.1");
        assert_eq!(p.system_prompt_suffix.as_deref(), Some("p"));
        assert_eq!(p.max_input_tokens, Some(2));
        assert_eq!(r.resolve("openai:gpt-4o").max_input_tokens, Some(1));
        assert_eq!(r.resolve("anthropic:claude"), HarnessProfile::default());
    }

    #[tokio::test]
    async fn argument_defaults_fill_what_a_call_leaves_out() {
        use cairn_core::FnTool;
        let echo = FnTool::new(
            "grep",
            "Echoes its arguments.",
            serde_json::json!({"type": "object"}),
            |ctx| async move { Ok(ToolOutput::text(ctx.arguments.to_string())) },
        );
        let profile = HarnessProfile {
            tool_argument_defaults: [(
                "grep".to_owned(),
                serde_json::json!({"output_mode": "content"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            )]
            .into(),
            ..Default::default()
        };
        let tools = profile.apply_to_tools(vec![std::sync::Arc::new(echo) as SharedTool]);
        let call = |args: serde_json::Value| {
            let tool = tools[0].clone();
            async move {
                let ctx = FunctionInvocationContext::new(tool.clone(), "c1", args);
                let out = tool.invoke(&ctx).await.map(|o| o.text_content());
                serde_json::from_str::<serde_json::Value>(&out.unwrap_or_default())
                    .unwrap_or_default()
            }
        };
        assert_eq!(
            call(serde_json::json!({"pattern": "x"})).await,
            serde_json::json!({"output_mode": "content", "pattern": "x"})
        );
        assert_eq!(
            call(serde_json::json!({"pattern": "x", "output_mode": "count"})).await,
            serde_json::json!({"output_mode": "count", "pattern": "x"})
        );
    }

    #[test]
    fn merge_rules() {
        let a = HarnessProfile {
            system_prompt_suffix: Some("a".into()),
            excluded_tools: ["x".to_owned()].into(),
            tool_description_overrides: [("ls".to_owned(), "one".to_owned())].into(),
            ..Default::default()
        };
        let b = HarnessProfile {
            excluded_tools: ["y".to_owned()].into(),
            tool_description_overrides: [("ls".to_owned(), "two".to_owned())].into(),
            max_input_tokens: Some(10),
            ..Default::default()
        };
        let m = a.merged(&b);
        assert_eq!(m.system_prompt_suffix.as_deref(), Some("a"));
        assert_eq!(m.excluded_tools.len(), 2);
        assert_eq!(m.tool_description_overrides["ls"], "two");
        assert_eq!(m.max_input_tokens, Some(10));
    }
}

/// Profiles keyed by provider (`openai`) or by `provider:model` (`openai:gpt-4.1`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileRegistry {
    profiles: BTreeMap<String, HarnessProfile>,
}

impl ProfileRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (merging into any profile already under `key`).
    pub fn register(&mut self, key: impl Into<String>, profile: HarnessProfile) -> &mut Self {
        let key = key.into();
        let merged = match self.profiles.get(&key) {
            Some(p) => p.merged(&profile),
            None => profile,
        };
        self.profiles.insert(key, merged);
        self
    }

    /// The profile for a `provider:model` string: the provider's, with the model's laid over it.
    pub fn resolve(&self, model: &str) -> HarnessProfile {
        let provider = model.split(':').next().unwrap_or(model);
        let mut out = self.profiles.get(provider).cloned().unwrap_or_default();
        if provider != model
            && let Some(p) = self.profiles.get(model)
        {
            out = out.merged(p);
        }
        out
    }
}
