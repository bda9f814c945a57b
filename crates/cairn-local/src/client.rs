//! [`LocalClient`]: the local model behind cairn's [`ChatClient`] trait.

use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    ChatResponseUpdate, ChatStream, Content, FinishReason, FunctionCall, Message, Role, ToolChoice,
    ToolSpec, UpdateEvent, Usage,
};
use std::collections::VecDeque;

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::engine::{GenerateRequest, Generation, LocalModel, Sampling, StopReason, ToolGrammar};
use crate::error::LocalError;
use crate::grammar::tool_call_grammar;
use crate::parse::{constrained_head, parse_constrained, parse_reply, streamable_text};
use crate::prompt::{RenderOptions, assistant_body, render};

/// The suffix of a constrained call after its arguments.
const CALL_TAIL: &str = "}\n</tool_call>";

/// The name of the built-in answer action (see [`answer_tool_spec`]).
pub const ANSWER_TOOL: &str = "answer";

/// The built-in answer action that [`LocalConfig::answer_tool`](crate::LocalConfig::answer_tool)
/// adds: `answer(text)`, the reply to the user.
pub fn answer_tool_spec() -> ToolSpec {
    ToolSpec::new(
        ANSWER_TOOL,
        "Reply to the user when every step of the request is done, with the result (the number, file name or command output asked for).",
        serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"]
        }),
    )
}

/// The text of an answer call's arguments (`{"text": "…"}`), also when generation stopped
/// inside the string.
fn answer_text(arguments: &str) -> String {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(arguments)
        && let Some(t) = v.get("text").and_then(serde_json::Value::as_str)
    {
        return t.to_owned();
    }
    // Cut off: close the string and the object, dropping a dangling escape.
    let mut cut = arguments.to_owned();
    for _ in 0..4 {
        for tail in ["\"}", "}"] {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&format!("{cut}{tail}"))
                && let Some(t) = v.get("text").and_then(serde_json::Value::as_str)
            {
                return t.to_owned();
            }
        }
        cut.pop();
    }
    String::new()
}

/// A [`ChatClient`] over a [`LocalModel`]. Cheap to clone; clones share the model, its worker and
/// its KV cache (requests are served one at a time).
///
/// How a turn is run:
/// - The prompt is rendered by cairn (see [`crate::prompt`]): instructions and the tool list in
///   the system block, then the conversation. The tool list is rendered whenever tools are
///   offered, even when the tool choice is `None`, so the system block stays byte-identical
///   across turns and its KV entries are reused.
/// - **Constrained turns** sample under a GBNF grammar built from the tools' schemas (see
///   [`crate::grammar`]), so the reply is exactly one well-formed call of an offered tool. A turn is
///   constrained when the tool choice is `Required` (all tools) or `Tool(name)` (that tool), and,
///   with `Auto` under the default [`ToolGrammar::OnUserTurns`], when the last message is the
///   user's: the agent must act on a new request.
/// - **Free turns** (`Auto` after a tool result) let the model answer in prose; its reply is read
///   by the lenient parser ([`crate::parse::parse_reply`]), which still picks up calls written
///   as `<tool_call>` blocks, fenced JSON or bare JSON. This is how the agent finishes.
/// - With `ToolChoice::None` the reply is text only; nothing is parsed as a call (with the
///   answer action below, the reply is an answer action, that is: text).
/// - With [`LocalConfig::answer_tool`](crate::LocalConfig::answer_tool), an `answer` action
///   ([`answer_tool_spec`]) is listed after the tools whenever tools are offered, and is one more
///   branch of the grammar of every constrained `Auto` turn: the model replies to the user by
///   calling it, and the client returns that call as the assistant's text (so the agent loop
///   sees an ordinary final answer). With [`ToolGrammar::Always`] every turn is then an action
///   and the model cannot drift into prose while work remains (issue #17). A tool of the
///   caller's named `answer` takes precedence: no action is added then.
///
/// The model's raw output is remembered (keyed by the canonical rendering of the message cairn
/// returns), so when the agent sends the conversation back, the assistant turn is rendered from
/// the exact bytes the model produced and the KV cache prefix stays valid. Usage reports prompt
/// tokens, generated tokens and `cached_input_tokens` (prompt tokens served from the KV cache).
///
/// Errors: a prompt longer than the context window is a [`ChatErrorKind::ContextOverflow`].
///
/// Diagnostics: with the environment variable `CAIRN_LOCAL_TRACE` set, each turn prints its
/// prompt tokens (and how many came from the KV cache), prefill and decode times to stderr.
#[derive(Debug, Clone)]
pub struct LocalClient {
    model: LocalModel,
}

/// How a prepared turn reads its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Constrained,
    Lenient,
    TextOnly,
}

#[derive(Debug)]
struct Prepared {
    request: GenerateRequest,
    mode: Mode,
}

impl LocalClient {
    /// A client for a loaded model.
    pub fn new(model: LocalModel) -> Self {
        LocalClient { model }
    }

    /// The model.
    pub fn model(&self) -> &LocalModel {
        &self.model
    }

    /// The context window in tokens.
    pub fn context_size(&self) -> usize {
        self.model.context_size()
    }

    /// Tokens in `text` for this model.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.model.count_tokens(text)
    }

    /// The exact prompt a request would send (useful to measure a harness's system prompt).
    pub fn render_prompt(&self, messages: &[Message], options: &ChatOptions) -> String {
        let raw = self.model.raw_replies().lock().ok();
        let mut tools = options.tools.clone();
        tools.extend(self.answer_spec(&options.tools));
        render(
            messages,
            RenderOptions {
                format: self.model.info().format,
                instructions: options.instructions.as_deref(),
                tools: &tools,
                add_generation_prompt: true,
                tools_first: self.model.config().tools_first,
                remind: self.model.config().remind && !options.tools.is_empty(),
            },
            raw.as_deref(),
        )
    }

    /// The answer action to add to `tools`, if configured and not shadowed by a caller's tool.
    fn answer_spec(&self, tools: &[ToolSpec]) -> Option<ToolSpec> {
        (self.model.config().answer_tool
            && !tools.is_empty()
            && !tools.iter().any(|t| t.name == ANSWER_TOOL))
        .then(answer_tool_spec)
    }

    fn prepare(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        attempt: u32,
    ) -> Result<Prepared, ChatError> {
        let cfg = self.model.config();
        let choice = options.tool_choice.clone().unwrap_or_default();
        let tools = &options.tools;
        let last_is_user = messages
            .iter()
            .rev()
            .find(|m| m.role != Role::System)
            .is_some_and(|m| m.role == Role::User && m.function_results().next().is_none());
        let answer = self.answer_spec(tools);
        let with_answer = || {
            let mut all = tools.clone();
            all.extend(answer.clone());
            all
        };
        let constrained: Option<Vec<ToolSpec>> = if tools.is_empty() {
            None
        } else {
            match &choice {
                // With the answer action, a turn that may not call tools still answers through it
                // (the small model otherwise wrote call-shaped text or chat markup).
                ToolChoice::None => answer.clone().map(|a| vec![a]),
                ToolChoice::Required => Some(tools.clone()),
                ToolChoice::Tool(name) => {
                    let t = tools.iter().find(|t| &t.name == name).ok_or_else(|| {
                        ChatError::new(
                            ChatErrorKind::Config,
                            format!("tool_choice names `{name}`, which is not among the tools"),
                        )
                    })?;
                    Some(vec![t.clone()])
                }
                // `Auto`, and any choice added later (`ToolChoice` is non-exhaustive).
                _ => match cfg.tool_grammar {
                    ToolGrammar::Always => Some(with_answer()),
                    ToolGrammar::OnUserTurns if last_is_user => Some(with_answer()),
                    _ => None,
                },
            }
        };
        let mode = if constrained.is_some() {
            Mode::Constrained
        } else if tools.is_empty() || choice == ToolChoice::None {
            Mode::TextOnly
        } else {
            Mode::Lenient
        };
        let grammar = constrained.as_deref().and_then(tool_call_grammar);
        let prompt = self.render_prompt(messages, options);
        let temperature = options.temperature.unwrap_or(cfg.temperature);
        let sampling = if attempt > 0 {
            // A resample of a repeated call (LocalConfig::resample_repeats).
            Sampling::Random {
                temperature: cfg.resample_temperature,
                top_p: options.top_p,
                seed: cfg.seed.wrapping_add(attempt),
            }
        } else if temperature > 0.0 {
            Sampling::Random {
                temperature,
                top_p: options.top_p,
                seed: options.seed.map(|s| s as u32).unwrap_or(cfg.seed),
            }
        } else {
            Sampling::Greedy
        };
        let max_tokens = options.max_tokens.unwrap_or(cfg.max_tokens);
        Ok(Prepared {
            request: GenerateRequest {
                prompt,
                grammar,
                max_tokens,
                sampling,
                stop: options.stop.clone(),
                stop_after: (mode == Mode::Constrained).then(|| "</tool_call>".to_owned()),
            },
            mode,
        })
    }

    /// Renders and submits a turn; the receiver yields the pieces and the result.
    fn start_turn(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        attempt: u32,
    ) -> Result<(Mode, bool, mpsc::UnboundedReceiver<WorkerMsg>), ChatError> {
        let answer = self.answer_spec(&options.tools).is_some();
        let prepared = self.prepare(messages, options, attempt)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let piece_tx = tx.clone();
        self.model
            .generate_with(
                prepared.request,
                move |piece| piece_tx.send(WorkerMsg::Piece(piece.to_owned())).is_ok(),
                move |result| {
                    let _ = tx.send(WorkerMsg::Done(result));
                },
            )
            .map_err(ChatError::from)?;
        Ok((prepared.mode, answer, rx))
    }

    /// Whether a constrained turn's `response` after `attempt` extra samples is sampled again
    /// ([`LocalConfig::resample_repeats`](crate::LocalConfig::resample_repeats)).
    fn resample(&self, messages: &[Message], response: &ChatResponse, attempt: u32) -> bool {
        if attempt >= self.model.config().resample_repeats {
            return false;
        }
        let Some(call) = response
            .messages
            .iter()
            .flat_map(Message::function_calls)
            .next()
        else {
            return false;
        };
        let again = repeats_call(messages, call);
        if again && std::env::var_os("CAIRN_LOCAL_TRACE").is_some() {
            eprintln!(
                "[local] {} repeats a call that failed or the previous one: sampling again ({}/{})",
                call.name,
                attempt + 1,
                self.model.config().resample_repeats
            );
        }
        again
    }

    fn model_name(&self) -> String {
        self.model.info().name.clone()
    }

    fn trace(g: &Generation) {
        if std::env::var_os("CAIRN_LOCAL_TRACE").is_some() {
            eprintln!(
                "[local] prompt {} (cached {}) prefill {:.1}s · generated {} in {:.1}s · {:?}",
                g.prompt_tokens,
                g.cached_tokens,
                g.prefill.as_secs_f64(),
                g.generated_tokens,
                g.decode.as_secs_f64(),
                g.stop
            );
        }
    }

    fn remember(&self, canonical: String, raw: String) {
        if let Ok(mut r) = self.model.raw_replies().lock() {
            r.insert(canonical, raw);
        }
    }
}

enum WorkerMsg {
    Piece(String),
    Done(Result<Generation, LocalError>),
}

impl ChatClient for LocalClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let ChatRequest {
            messages, options, ..
        } = request;
        Box::pin(async move {
            let mut attempt = 0;
            'turn: loop {
                let (mode, answer, mut rx) = self.start_turn(messages, options, attempt)?;
                let mut decoder = TurnDecoder::new(mode, answer, self.model_name());
                let mut sink = Vec::new();
                while let Some(msg) = rx.recv().await {
                    match msg {
                        WorkerMsg::Piece(p) => {
                            decoder.push(&p, &mut sink);
                            sink.clear();
                        }
                        WorkerMsg::Done(result) => {
                            let g = result.map_err(ChatError::from)?;
                            Self::trace(&g);
                            let (response, canonical) = decoder.finish(&g, &mut sink);
                            if mode == Mode::Constrained
                                && self.resample(messages, &response, attempt)
                            {
                                attempt += 1;
                                continue 'turn;
                            }
                            self.remember(canonical, g.text);
                            return Ok(response);
                        }
                    }
                }
                return Err(LocalError::WorkerGone.into());
            }
        })
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let ChatRequest {
            messages, options, ..
        } = request;
        let state = StreamState {
            client: self,
            messages,
            options,
            start: true,
            attempt: 0,
            rx: None,
            decoder: None,
            queue: VecDeque::new(),
            held: None,
        };
        futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(ev) = st.queue.pop_front() {
                    return Some((Ok(ChatResponseUpdate::new(ev)), st));
                }
                if st.start {
                    st.start = false;
                    match st.client.start_turn(st.messages, st.options, st.attempt) {
                        Ok((mode, answer, rx)) => {
                            st.rx = Some(rx);
                            st.decoder =
                                Some(TurnDecoder::new(mode, answer, st.client.model_name()));
                            // A turn that may be sampled again is sent when it is accepted.
                            st.held = (mode == Mode::Constrained
                                && st.client.model.config().resample_repeats > 0)
                                .then(Vec::new);
                        }
                        Err(e) => return Some((Err(e), st)),
                    }
                }
                let rx = st.rx.as_mut()?;
                let msg = rx.recv().await;
                let mut out = Vec::new();
                match msg {
                    Some(WorkerMsg::Piece(p)) => {
                        if let Some(d) = st.decoder.as_mut() {
                            d.push(&p, &mut out);
                        }
                    }
                    Some(WorkerMsg::Done(Ok(g))) => {
                        st.rx = None;
                        LocalClient::trace(&g);
                        let decoder = st.decoder.take()?;
                        let (response, canonical) = decoder.finish(&g, &mut out);
                        if st.held.is_some()
                            && st.client.resample(st.messages, &response, st.attempt)
                        {
                            st.attempt += 1;
                            st.start = true;
                            st.held = None;
                            continue;
                        }
                        st.client.remember(canonical, g.text);
                        if let Some(held) = st.held.take() {
                            st.queue.extend(held);
                        }
                    }
                    Some(WorkerMsg::Done(Err(e))) => {
                        st.rx = None;
                        return Some((Err(e.into()), st));
                    }
                    None => {
                        st.rx = None;
                        return Some((Err(LocalError::WorkerGone.into()), st));
                    }
                }
                match st.held.as_mut() {
                    Some(held) => held.extend(out),
                    None => st.queue.extend(out),
                }
            }
        })
        .boxed()
    }

    fn describe(&self) -> String {
        format!("local:{}", self.model.info().name)
    }
}

struct StreamState<'a> {
    client: &'a LocalClient,
    messages: &'a [Message],
    options: &'a ChatOptions,
    /// A turn is to be started (the first, or a resample).
    start: bool,
    /// Extra samples taken so far ([`LocalConfig::resample_repeats`](crate::LocalConfig::resample_repeats)).
    attempt: u32,
    rx: Option<mpsc::UnboundedReceiver<WorkerMsg>>,
    decoder: Option<TurnDecoder>,
    queue: VecDeque<UpdateEvent>,
    /// The updates of a turn that may still be sampled again, sent once it is accepted.
    held: Option<Vec<UpdateEvent>>,
}

/// Whether `call` repeats the conversation's previous call, or a call made for the current
/// request (after the last user message) whose result was an error: the same tool with the
/// same arguments (compared as JSON values).
fn repeats_call(messages: &[Message], call: &FunctionCall) -> bool {
    let args = |a: &str| serde_json::from_str::<serde_json::Value>(a).ok();
    let wanted = args(&call.arguments);
    let same = |c: &FunctionCall| {
        c.name == call.name
            && match (&wanted, args(&c.arguments)) {
                (Some(a), Some(b)) => *a == b,
                _ => c.arguments == call.arguments,
            }
    };
    let start = messages
        .iter()
        .rposition(|m| m.role == Role::User && m.function_results().next().is_none())
        .map_or(0, |i| i + 1);
    let turn = &messages[start..];
    let failed = |id: &str| {
        turn.iter()
            .flat_map(Message::function_results)
            .any(|r| r.call_id == id && (r.is_error || r.text().trim_start().starts_with("Error")))
    };
    let mut calls = turn.iter().flat_map(Message::function_calls).peekable();
    let mut last = None;
    while let Some(c) = calls.next() {
        if same(c) && failed(&c.call_id) {
            return true;
        }
        if calls.peek().is_none() {
            last = Some(c);
        }
    }
    last.is_some_and(same)
}

/// Folds a turn's raw text into updates and, at the end, the response.
struct TurnDecoder {
    mode: Mode,
    /// Whether a call of [`ANSWER_TOOL`] is the answer action (text, not a call).
    answer: bool,
    model_name: String,
    raw: String,
    /// Bytes of the streamable text already sent (lenient/text modes).
    text_sent: usize,
    /// The call started in constrained mode: (call id, offset of the arguments in `raw`).
    call: Option<(String, usize)>,
    /// Bytes of the arguments already sent.
    args_sent: usize,
}

fn new_call_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &id[..12])
}

impl TurnDecoder {
    fn new(mode: Mode, answer: bool, model_name: String) -> Self {
        TurnDecoder {
            mode,
            answer,
            model_name,
            raw: String::new(),
            text_sent: 0,
            call: None,
            args_sent: 0,
        }
    }

    fn push(&mut self, piece: &str, out: &mut Vec<UpdateEvent>) {
        self.raw.push_str(piece);
        match self.mode {
            Mode::Constrained => {
                if self.call.is_none()
                    && let Some((name, off)) = constrained_head(&self.raw)
                {
                    if self.answer && name == ANSWER_TOOL {
                        // The answer is text: it is sent whole when the turn ends.
                        return;
                    }
                    let id = new_call_id();
                    out.push(UpdateEvent::ToolCallStart {
                        index: 0,
                        call_id: id.clone(),
                        name,
                    });
                    self.call = Some((id, off));
                }
                if let Some((_, off)) = &self.call {
                    let start = off + self.args_sent;
                    let end = self.raw.len().saturating_sub(CALL_TAIL.len());
                    if end > start && self.raw.is_char_boundary(end) {
                        out.push(UpdateEvent::ToolCallDelta {
                            index: 0,
                            arguments: self.raw[start..end].to_owned(),
                        });
                        self.args_sent += end - start;
                    }
                }
            }
            Mode::Lenient | Mode::TextOnly => {
                let s = if self.mode == Mode::Lenient {
                    streamable_text(&self.raw)
                } else {
                    self.raw.trim()
                };
                if s.len() > self.text_sent {
                    out.push(UpdateEvent::TextDelta {
                        text: s[self.text_sent..].to_owned(),
                    });
                    self.text_sent = s.len();
                }
            }
        }
    }

    /// The final response, the updates not yet sent, and the canonical body of the message.
    fn finish(self, g: &Generation, out: &mut Vec<UpdateEvent>) -> (ChatResponse, String) {
        let mut contents = Vec::new();
        let mut calls = Vec::new();
        let truncated = g.stop == StopReason::Length;
        match self.mode {
            Mode::Constrained => match parse_constrained(&self.raw) {
                Some(c) if self.answer && c.name == ANSWER_TOOL => {
                    let t = answer_text(&c.arguments).trim().to_owned();
                    if !t.is_empty() {
                        out.push(UpdateEvent::TextDelta { text: t.clone() });
                        contents.push(Content::text(t));
                    }
                }
                Some(c) => {
                    let (id, sent) = match &self.call {
                        Some((id, _)) => (id.clone(), self.args_sent),
                        None => (new_call_id(), 0),
                    };
                    if self.call.is_none() {
                        out.push(UpdateEvent::ToolCallStart {
                            index: 0,
                            call_id: id.clone(),
                            name: c.name.clone(),
                        });
                    }
                    if c.arguments.len() > sent && c.arguments.is_char_boundary(sent) {
                        out.push(UpdateEvent::ToolCallDelta {
                            index: 0,
                            arguments: c.arguments[sent..].to_owned(),
                        });
                    }
                    calls.push(FunctionCall {
                        call_id: id,
                        name: c.name,
                        arguments: c.arguments,
                    });
                }
                None => {
                    let t = self.raw.trim().to_owned();
                    if !t.is_empty() {
                        out.push(UpdateEvent::TextDelta { text: t.clone() });
                        contents.push(Content::text(t));
                    }
                }
            },
            Mode::Lenient => {
                let parsed = parse_reply(&self.raw);
                let sent = &streamable_text(&self.raw)
                    [..self.text_sent.min(streamable_text(&self.raw).len())];
                if parsed.text.len() > sent.len() && parsed.text.starts_with(sent) {
                    out.push(UpdateEvent::TextDelta {
                        text: parsed.text[sent.len()..].to_owned(),
                    });
                }
                if !parsed.text.is_empty() {
                    contents.push(Content::text(parsed.text));
                }
                for (i, c) in parsed.calls.into_iter().enumerate() {
                    let id = new_call_id();
                    out.push(UpdateEvent::ToolCallStart {
                        index: i,
                        call_id: id.clone(),
                        name: c.name.clone(),
                    });
                    out.push(UpdateEvent::ToolCallDelta {
                        index: i,
                        arguments: c.arguments.clone(),
                    });
                    calls.push(FunctionCall {
                        call_id: id,
                        name: c.name,
                        arguments: c.arguments,
                    });
                }
            }
            Mode::TextOnly => {
                let t = self.raw.trim().to_owned();
                if t.len() > self.text_sent {
                    out.push(UpdateEvent::TextDelta {
                        text: t[self.text_sent..].to_owned(),
                    });
                }
                if !t.is_empty() {
                    contents.push(Content::text(t));
                }
            }
        }
        let has_calls = !calls.is_empty();
        contents.extend(calls.into_iter().map(Content::FunctionCall));
        let finish_reason = if truncated {
            FinishReason::Length
        } else if has_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        let usage = Usage {
            input_tokens: g.prompt_tokens as u64,
            output_tokens: g.generated_tokens as u64,
            cached_input_tokens: g.cached_tokens as u64,
        };
        out.push(UpdateEvent::Usage(usage));
        out.push(UpdateEvent::Finished {
            finish_reason: Some(finish_reason.clone()),
            model: Some(self.model_name.clone()),
            response_id: None,
        });
        let message = Message::new(Role::Assistant, contents);
        let canonical = assistant_body(&message);
        (
            ChatResponse {
                messages: vec![message],
                finish_reason: Some(finish_reason),
                usage: Some(usage),
                model: Some(self.model_name),
                response_id: None,
            },
            canonical,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, args: &str) -> FunctionCall {
        FunctionCall {
            call_id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn turn(id: &str, name: &str, args: &str, result: &str, is_error: bool) -> [Message; 2] {
        [
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(call(id, name, args))],
            ),
            Message::new(
                Role::Tool,
                vec![Content::FunctionResult(cairn_core::FunctionResult {
                    call_id: id.into(),
                    output: vec![Content::text(result)],
                    is_error,
                })],
            ),
        ]
    }

    #[test]
    fn a_repeat_is_the_previous_call_or_a_failed_call_of_this_request() {
        let write = r#"{"file_path": "/s.py", "content": "w * h"}"#;
        let mut m = vec![Message::user("fix s.py")];
        m.extend(turn(
            "1",
            "write_file",
            write,
            "Error: nothing changed",
            true,
        ));
        m.extend(turn(
            "2",
            "read_file",
            r#"{"file_path": "/s.py"}"#,
            "1\tw * h",
            false,
        ));
        // The failed write again, with its keys in another order: a repeat.
        let again = call(
            "3",
            "write_file",
            r#"{"content": "w * h", "file_path": "/s.py"}"#,
        );
        assert!(repeats_call(&m, &again));
        // The read again (the previous call): a repeat; another file: not.
        assert!(repeats_call(
            &m,
            &call("3", "read_file", r#"{"file_path":"/s.py"}"#)
        ));
        assert!(!repeats_call(
            &m,
            &call("3", "read_file", r#"{"file_path": "/t.py"}"#)
        ));
        // A call that worked, not the previous one, may come again (run the test after a fix).
        let mut m = vec![Message::user("make the test pass")];
        let run = r#"{"command": "python3 t.py"}"#;
        m.extend(turn("1", "execute", run, "ok", false));
        m.extend(turn(
            "2",
            "edit_file",
            r#"{"file_path": "/s.py"}"#,
            "Replaced",
            false,
        ));
        assert!(!repeats_call(&m, &call("3", "execute", run)));
        // An error is also a result that says so in its text.
        m.extend(turn("3", "execute", run, "Error: exit code 1", false));
        m.extend(turn("4", "ls", "{}", "/s.py", false));
        assert!(repeats_call(&m, &call("5", "execute", run)));
        // A new request starts afresh: its first call may be the one before it.
        m.push(Message::user("run it again"));
        assert!(!repeats_call(&m, &call("5", "execute", run)));
        assert!(!repeats_call(&m, &call("5", "ls", "{}")));
    }

    #[test]
    fn answer_text_reads_whole_and_cut_off_arguments() {
        assert_eq!(
            answer_text(r#"{"text": "It printed 42."}"#),
            "It printed 42."
        );
        assert_eq!(
            answer_text(r#"{"text": "It printed \"42"#),
            "It printed \"42"
        );
        assert_eq!(answer_text(r#"{"text": "a\"#), "a");
        assert_eq!(answer_text("{"), "");
    }
}
