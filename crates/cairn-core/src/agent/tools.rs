//! Tool calls of one model turn: lookup, argument checks, function middleware, batches.

use super::durable::Committer;
use super::telemetry;
#[allow(clippy::wildcard_imports)]
use super::*;
use crate::checkpoint::{StepDelta, StepKind};

pub(super) struct CallEnv {
    pub(super) kwargs: Kwargs,
    pub(super) session: Option<AgentSession>,
    pub(super) extensions: Extensions,
    pub(super) updates: Option<UpdateSink>,
    pub(super) chain: Arc<[Arc<dyn Middleware<FunctionInvocationContext>>]>,
    pub(super) endpoint: Endpoint<FunctionInvocationContext>,
    pub(super) detailed: bool,
}

pub(super) fn function_endpoint() -> Endpoint<FunctionInvocationContext> {
    Arc::new(|mut ctx: FunctionInvocationContext| {
        Box::pin(async move {
            let tool = Arc::clone(&ctx.function);
            let outcome = AssertUnwindSafe(tool.invoke(&ctx)).catch_unwind().await;
            let name = ctx.tool_name().to_owned();
            ctx.result = Some(match outcome {
                Ok(Ok(out)) => out,
                Ok(Err(ToolError::Interrupted(interrupts))) => {
                    return Err(Error::Interrupted(interrupts));
                }
                Ok(Err(ToolError::InvalidArguments(msg))) => ToolOutput::error(format!(
                    "Error: Argument parsing failed for {name}: {msg}. Call {name} again with arguments that match its schema."
                )),
                Ok(Err(e)) => ToolOutput::error(format!("Error: {name} failed: {e}")),
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_owned());
                    ToolOutput::error(format!("Error: {name} crashed: {msg}"))
                }
            });
            Ok(ctx)
        })
    })
}

pub(super) fn error_result(call_id: &str, text: String) -> FunctionResult {
    FunctionResult {
        call_id: call_id.to_owned(),
        output: vec![Content::text(text)],
        is_error: true,
    }
}

/// Runs one tool call through function middleware. Returns the result and whether the loop
/// must stop.
pub(super) async fn invoke_call(
    call: FunctionCall,
    router: &ToolRouter,
    env: &CallEnv,
    turn_calls: &Arc<[FunctionCall]>,
) -> crate::Result<(FunctionResult, bool)> {
    let span = telemetry::tool_span(&call, router);
    let outcome = invoke_call_traced(call, router, env, turn_calls)
        .instrument(span.clone())
        .await;
    telemetry::record_tool(&span, &outcome);
    outcome
}

pub(super) async fn invoke_call_traced(
    call: FunctionCall,
    router: &ToolRouter,
    env: &CallEnv,
    turn_calls: &Arc<[FunctionCall]>,
) -> crate::Result<(FunctionResult, bool)> {
    let Some(tool) = router.get(&call.name) else {
        let names: Vec<&str> = router.specs().iter().map(|s| s.name.as_str()).collect();
        let text = if names.is_empty() {
            format!(
                "Error: Requested function \"{}\" not found: no tools are available. Answer without calling a tool.",
                call.name
            )
        } else {
            format!(
                "Error: Requested function \"{}\" not found. Available tools: {}.",
                call.name,
                names.join(", ")
            )
        };
        return Ok((error_result(&call.call_id, text), false));
    };
    let raw = call.arguments.trim();
    let arguments = if raw.is_empty() {
        Value::Object(Default::default())
    } else {
        match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => v,
            Ok(Value::Null) => Value::Object(Default::default()),
            Ok(other) => {
                let text = format!(
                    "Error: Argument parsing failed for {}: expected a JSON object, got {}. Call {} again with a JSON object that matches its schema.",
                    call.name,
                    kind_of(&other),
                    call.name
                );
                return Ok((error_result(&call.call_id, text), false));
            }
            Err(e) => {
                let text = format!(
                    "Error: Argument parsing failed for {}: the arguments are not valid JSON ({e}). Call {} again with a JSON object that matches its schema.",
                    call.name, call.name
                );
                return Ok((error_result(&call.call_id, text), false));
            }
        }
    };
    let ctx = FunctionInvocationContext {
        function: Arc::clone(tool),
        call_id: call.call_id.clone(),
        arguments,
        kwargs: env.kwargs.clone(),
        session: env.session.clone(),
        result: None,
        extensions: env.extensions.clone(),
        terminate: false,
        updates: env.updates.clone(),
        turn_calls: Arc::clone(turn_calls),
    };
    let ctx = Next::new(Arc::clone(&env.chain), Arc::clone(&env.endpoint))
        .run(ctx)
        .await?;
    let out = ctx
        .result
        .ok_or(Error::MissingResult(MiddlewareKind::Function))?;
    let output = if out.is_error && !env.detailed {
        vec![Content::text("Error: Function failed.")]
    } else {
        out.parts
    };
    let result = FunctionResult {
        call_id: call.call_id,
        output,
        is_error: out.is_error,
    };
    if let Some(sink) = &env.updates {
        sink.emit(AgentEventKind::ToolResult(result.clone()));
    }
    Ok((result, ctx.terminate))
}

pub(super) type CallOutcome = crate::Result<(FunctionResult, bool)>;

/// Runs the calls of one model turn and returns their outcomes in the calls' order.
///
/// With `concurrent` the calls run together, gated by each tool's [`Concurrency`]: an
/// `Exclusive` call waits for the calls listed before it and holds back those listed after
/// it (a fair read/write lock taken in the model's order), and a `Limited(n)` tool has at
/// most `n` of its calls running at once. Without `concurrent` they run one after another.
pub(super) async fn run_batch(
    calls: &Arc<[FunctionCall]>,
    router: &ToolRouter,
    env: &CallEnv,
    concurrent: bool,
    committer: Option<&Committer>,
    notes: &std::collections::HashMap<String, String>,
) -> Vec<CallOutcome> {
    // Each result is committed as soon as it is known, so a resumed run never runs it again.
    let invoke = |c: &FunctionCall| {
        let c = c.clone();
        async move {
            let note = notes.get(&c.call_id).cloned();
            let mut outcome = invoke_call(c, router, env, calls).await;
            if let (Some(note), Ok((result, _))) = (note, &mut outcome) {
                result.output.insert(0, Content::text(note));
            }
            if let (Some(committer), Ok((result, _))) = (committer, &outcome) {
                let mut step = StepDelta::new(StepKind::Tools);
                step.results = vec![result.clone()];
                committer.commit(step).await?;
            }
            outcome
        }
    };
    if !concurrent || calls.len() < 2 {
        let mut v = Vec::with_capacity(calls.len());
        for c in calls.iter() {
            v.push(invoke(c).await);
        }
        return v;
    }
    let concurrency = |c: &FunctionCall| {
        router
            .get(&c.name)
            .map_or(Concurrency::Parallel, |t| t.spec().concurrency)
    };
    if calls.iter().all(|c| concurrency(c).is_parallel()) {
        return futures::future::join_all(calls.iter().map(invoke)).await;
    }
    let gate = tokio::sync::RwLock::new(());
    let mut limits: std::collections::HashMap<&str, tokio::sync::Semaphore> =
        std::collections::HashMap::new();
    for c in calls.iter() {
        if let Concurrency::Limited(n) = concurrency(c) {
            limits
                .entry(c.name.as_str())
                .or_insert_with(|| tokio::sync::Semaphore::new(n.get()));
        }
    }
    let (gate, limits, invoke) = (&gate, &limits, &invoke);
    futures::future::join_all(calls.iter().map(|c| async move {
        if concurrency(c) == Concurrency::Exclusive {
            let _alone = gate.write().await;
            return invoke(c).await;
        }
        let _shared = gate.read().await;
        let _permit = match limits.get(c.name.as_str()) {
            Some(limit) => limit.acquire().await.ok(),
            None => None,
        };
        invoke(c).await
    }))
    .await
}

/// Gives every function call of one model reply its own id, in place, so each call is
/// executed and answered under an id no other call of the reply shares.
///
/// Models sometimes repeat an id (two `call_1`s) or leave it empty. Answering both calls under
/// one id would make the next request ambiguous (providers reject it, or pair the wrong
/// result with a call). The first call keeps its id; a later duplicate `id` becomes `id_2`
/// (`id_3`, … — the first suffix no call of the reply uses) and an empty id becomes
/// `call_<n>` (`n` the call's 1-based position in the reply). The renamed id is what the
/// history keeps in the assistant message and what its result answers, so the conversation
/// sent next is consistent. (Streamed `ToolCallStart` updates, emitted while the reply was
/// still arriving, carry the id as the model sent it.)
pub(super) fn unique_call_ids(produced: &mut [Message]) {
    if call_ids_unique(produced) {
        return;
    }
    let mut taken: std::collections::HashSet<String> = produced
        .iter()
        .flat_map(Message::function_calls)
        .map(|c| c.call_id.clone())
        .collect();
    let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut position = 0usize;
    for m in produced.iter_mut() {
        for c in &mut m.contents {
            let Content::FunctionCall(fc) = c else {
                continue;
            };
            position += 1;
            if !fc.call_id.is_empty() && used.insert(fc.call_id.clone()) {
                continue;
            }
            let base = if fc.call_id.is_empty() {
                "call".to_owned()
            } else {
                fc.call_id.clone()
            };
            let mut n = if fc.call_id.is_empty() { position } else { 2 };
            let mut candidate = format!("{base}_{n}");
            while taken.contains(&candidate) {
                n += 1;
                candidate = format!("{base}_{n}");
            }
            taken.insert(candidate.clone());
            used.insert(candidate.clone());
            fc.call_id = candidate;
        }
    }
}

/// A batch's results in the order of its calls (the history answers the calls in that order);
/// a call without a result is skipped. Results mostly arrive in call order, so sorting them in
/// place by searching from the first unplaced one is linear for the usual batch, with no ids
/// cloned or hashed.
pub(super) fn in_call_order(
    calls: &[FunctionCall],
    mut results: Vec<FunctionResult>,
) -> Vec<FunctionResult> {
    let mut placed = 0;
    for c in calls {
        if let Some(i) = results[placed..]
            .iter()
            .position(|r| r.call_id == c.call_id)
        {
            results.swap(placed, placed + i);
            placed += 1;
        }
    }
    results.truncate(placed);
    results
}

/// Whether every function call of a reply has a non-empty id no other call of it shares (the
/// usual case, checked on every model reply). A reply has a handful of calls, so comparing
/// pairs, without allocating or hashing, is the cheap check; long replies use a set.
fn call_ids_unique(produced: &[Message]) -> bool {
    let ids = || {
        produced
            .iter()
            .flat_map(Message::function_calls)
            .map(|c| c.call_id.as_str())
    };
    if ids().take(17).count() <= 16 {
        return ids()
            .enumerate()
            .all(|(i, id)| !id.is_empty() && !ids().take(i).any(|earlier| earlier == id));
    }
    let mut seen = std::collections::HashSet::new();
    ids().all(|id| !id.is_empty() && seen.insert(id))
}

pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
