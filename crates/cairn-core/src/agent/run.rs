//! One run: agent middleware around the loop of model calls and tool batches.

use super::durable::{Committer, DurableStart};
use super::telemetry;
use super::tools::*;
#[allow(clippy::wildcard_imports)]
use super::*;
use crate::checkpoint::{LoopCounters, RunStatus, StepDelta, StepKind, Transcript};

/// A run inside its `invoke_agent` span. The span is made here, before the future is first
/// polled, so a run that is spawned (`stream`) still nests under the caller's current span.
pub(super) fn execute(
    agent: Agent,
    input: Vec<Message>,
    opts: RunOptions,
) -> impl Future<Output = crate::Result<AgentResponse>> + Send + 'static {
    let span = telemetry::agent_span(
        agent.inner.name.as_deref(),
        opts.options
            .model
            .as_deref()
            .or(agent.inner.default_options.model.as_deref()),
        &agent.inner.client,
        opts.thread
            .as_ref()
            .map(|t| t.thread_id.as_str())
            .or(opts.session.as_ref().map(|s| s.id())),
    );
    let traced = span.clone();
    async move {
        let result = execute_run(agent, input, opts).await;
        telemetry::record_run(&traced, &result);
        result
    }
    .instrument(span)
}

pub(super) async fn execute_run(
    agent: Agent,
    input: Vec<Message>,
    opts: RunOptions,
) -> crate::Result<AgentResponse> {
    let inner = &agent.inner;
    let RunOptions {
        session,
        function_invocation_kwargs,
        client_kwargs,
        middleware: run_mw,
        tools,
        options,
        mut extensions,
        updates,
        thread,
        resume,
        decisions,
    } = opts;
    let mut session = session;
    let durable = match thread {
        Some(cursor) => {
            let transcript = cursor.load().await?;
            check_start(&cursor, &transcript, &input, resume)?;
            // The thread is the history: the session (the caller's, or one made for the run)
            // takes its messages and state.
            // A new thread instead starts from what the caller's session holds.
            let s = session.get_or_insert_with(|| AgentSession::with_id(cursor.thread_id.clone()));
            if transcript.steps > 0 {
                s.set_messages(transcript.messages.clone());
                s.state().replace(transcript.state.clone());
            }
            extensions.insert(cursor.clone());
            // Decisions given to this run are checked strictly; a sub-run (a subagent resumed
            // by its `task` call) picks its own out of those its parent received.
            let (decisions, strict) = match decisions {
                Some(d) => (d, true),
                None => (
                    extensions
                        .get::<InheritedDecisions>()
                        .map(|d| d.0.clone())
                        .unwrap_or_default(),
                    false,
                ),
            };
            extensions.insert_arc(Arc::new(DurableStart {
                cursor,
                transcript,
                resume,
                decisions,
                strict,
            }));
            true
        }
        None if resume || decisions.is_some() => {
            return Err(Error::InvalidInput(
                "resume and decisions need a thread (RunRequest::thread)".into(),
            ));
        }
        None => {
            // A run without a thread inside one that has (a subagent handed the parent's
            // extensions) must not commit into the parent's namespace.
            extensions.remove::<DurableStart>();
            extensions.remove::<crate::checkpoint::ThreadCursor>();
            extensions.remove::<InheritedDecisions>();
            false
        }
    };
    let ctx = AgentContext {
        agent_name: inner.name.clone(),
        messages: input,
        session,
        options: inner.default_options.merged(&options),
        tools,
        function_invocation_kwargs,
        client_kwargs,
        extensions,
        result: None,
        stream: updates.is_some(),
        updates,
    };
    let chain = concat(&inner.middleware.agent, &run_mw.agent);
    let endpoint: Endpoint<AgentContext> = {
        let agent = agent.clone();
        let chat = concat(&inner.middleware.chat, &run_mw.chat);
        let function = concat(&inner.middleware.function, &run_mw.function);
        Arc::new(move |ctx| {
            Box::pin(run_loop(
                agent.clone(),
                Arc::clone(&chat),
                Arc::clone(&function),
                ctx,
            ))
        })
    };
    let ctx = Next::new(chain, endpoint).run(ctx).await?;
    // Agent middleware that skipped `next` must have set a result: an empty reply is never
    // made up (issue #14).
    let mut response = ctx
        .result
        .ok_or(Error::MissingResult(MiddlewareKind::Agent))?;
    if response.agent_name.is_none() {
        response.agent_name = inner.name.clone();
    }
    if let Some(session) = ctx.session.as_ref().filter(|_| !durable) {
        session.append_messages(
            ctx.messages
                .iter()
                .cloned()
                .chain(response.messages.iter().cloned()),
        );
    }
    if let Some(sink) = &ctx.updates {
        if !response.interrupts.is_empty() {
            sink.emit(AgentEventKind::Interrupted(response.interrupts.clone()));
        }
        sink.emit(AgentEventKind::RunCompleted(Box::new(response.clone())));
    }
    Ok(response)
}

/// Refuses to start a run that would leave the thread inconsistent.
fn check_start(
    cursor: &crate::checkpoint::ThreadCursor,
    t: &Transcript,
    input: &[Message],
    resume: bool,
) -> crate::Result<()> {
    let unfinished = t.steps > 0
        && matches!(
            t.status,
            RunStatus::Running | RunStatus::Failed | RunStatus::Interrupted
        );
    if resume {
        if !input.is_empty() {
            return Err(Error::InvalidInput(
                "a resumed run takes no new input; resume, then run again with the input".into(),
            ));
        }
        if !unfinished {
            return Err(Error::InvalidInput(format!(
                "thread {} has no unfinished run to resume (its last run is {})",
                cursor.thread_id,
                if t.steps == 0 {
                    "missing"
                } else {
                    t.status.as_str()
                }
            )));
        }
    } else if t.status == RunStatus::Interrupted || !t.unanswered().is_empty() {
        return Err(Error::InvalidInput(format!(
            "thread {} has a run waiting on tool calls; resume it before adding input",
            cursor.thread_id
        )));
    }
    Ok(())
}

/// The counters after a finished tool batch of `n` calls.
fn after_batch(c: &mut LoopCounters, n: usize, any_error: bool, config: &LoopConfig) {
    c.function_calls += n;
    if any_error {
        c.consecutive_errors += 1;
        if c.consecutive_errors >= config.max_consecutive_errors {
            c.force_final = true;
        }
    } else {
        c.consecutive_errors = 0;
    }
    if config
        .max_function_calls
        .is_some_and(|max| c.function_calls >= max)
    {
        c.force_final = true;
    }
    c.iteration += 1;
}

async fn commit(
    committer: Option<&Committer>,
    delta: impl FnOnce() -> StepDelta,
) -> crate::Result<u64> {
    match committer {
        Some(c) => Ok(c.commit(delta()).await?),
        None => Ok(0),
    }
}

pub(super) fn chat_endpoint(client: Arc<dyn ChatClient>) -> Endpoint<ChatContext> {
    Arc::new(move |mut c: ChatContext| {
        let client = Arc::clone(&client);
        Box::pin(async move {
            let response = crate::stream::call_model(
                client.as_ref(),
                &c.messages,
                &c.options,
                &c.client_kwargs,
                c.updates.as_ref(),
            )
            .await?;
            c.result = Some(response);
            Ok(c)
        })
    })
}

pub(super) async fn run_loop(
    agent: Agent,
    chat_chain: Arc<[Arc<dyn Middleware<ChatContext>>]>,
    function_chain: Arc<[Arc<dyn Middleware<FunctionInvocationContext>>]>,
    mut ctx: AgentContext,
) -> crate::Result<AgentContext> {
    let inner = &agent.inner;
    let config = &inner.config;
    let router = inner.router.merged(&ctx.tools);

    // The conversation is shared with each model call's context without copying: a chat
    // middleware that edits `messages` gets its own copy (copy-on-write), so the stored
    // conversation is never rewritten by what one call sends.
    let mut conversation: Arc<Vec<Message>> = Arc::new(match &ctx.session {
        Some(s) => s.messages(),
        None => Vec::new(),
    });
    Arc::make_mut(&mut conversation).extend(ctx.messages.iter().cloned());

    let mut env = CallEnv {
        kwargs: ctx.function_invocation_kwargs.clone(),
        session: ctx.session.clone(),
        extensions: ctx.extensions.clone(),
        updates: ctx.updates.clone(),
        chain: function_chain,
        endpoint: function_endpoint(),
        detailed: config.include_detailed_errors,
    };
    let endpoint = chat_endpoint(Arc::clone(&inner.client));

    let mut response = AgentResponse {
        agent_name: inner.name.clone(),
        ..Default::default()
    };
    let mut counters = LoopCounters::default();
    // Tool calls of the last model response still to answer, with results already committed.
    let mut pending: Option<(Arc<[FunctionCall]>, Vec<FunctionResult>)> = None;
    let mut produced_from = conversation.len();
    let mut decisions = crate::interrupt::Decisions::new();

    let start = ctx.extensions.get_arc::<DurableStart>();
    let committer = start.as_ref().map(|d| {
        Committer::new(
            d.cursor.clone(),
            &d.transcript,
            ctx.session.as_ref().map(|s| s.state().clone()),
        )
    });
    let committer = committer.as_ref();
    match start.as_deref() {
        Some(d) if d.resume => {
            let t = &d.transcript;
            produced_from = t.produced_from;
            counters = t.counters.clone();
            decisions = t.decisions.clone();
            // Take the run over before anything runs: of two processes resuming the thread at
            // once, the second stops at this commit with a conflict instead of running calls
            // again. (A paused run's decisions step, committed after they are checked, does it.)
            if t.status != RunStatus::Interrupted {
                commit(committer, || StepDelta::new(StepKind::Resumed)).await?;
            }
            if t.status == RunStatus::Interrupted {
                let given =
                    accept_decisions(t, &d.decisions, d.strict, &router, &d.cursor.namespace)?;
                let mut step = StepDelta::new(StepKind::Decisions);
                step.counters = counters.clone();
                step.extra = Some(serde_json::json!({ "decisions": given }));
                commit(committer, || step).await?;
                decisions.extend(given);
            }
            if !t.pending.is_empty() {
                pending = Some((
                    t.pending.iter().cloned().collect(),
                    t.partial_results.clone(),
                ));
                // The calls' tools see the step that made them, as in the run that was cut off.
                let mut cursor = d.cursor.clone();
                cursor.step = t.last_model_step;
                env.extensions.insert(cursor);
            } else if let Some((n, any_error)) = t.completed_batch {
                // The batch's last result was committed, the counters' update was not.
                after_batch(&mut counters, n, any_error, config);
            }
        }
        Some(d) => {
            // The first step of a thread also holds the history the caller's session brought.
            let input = if d.transcript.steps == 0 {
                conversation.as_ref().clone()
            } else {
                ctx.messages.clone()
            };
            commit(committer, || StepDelta {
                messages: input,
                ..StepDelta::new(StepKind::Input)
            })
            .await?;
        }
        None => {}
    }
    response.model_calls = counters.model_calls;
    response.usage = counters.usage;

    if !decisions.is_empty() {
        // Sub-runs of this step's calls find their decisions here.
        env.extensions.insert(InheritedDecisions(decisions.clone()));
    }
    let outcome = drive(
        &agent,
        &chat_chain,
        &endpoint,
        &router,
        &mut env,
        &mut ctx,
        committer,
        &mut conversation,
        &mut counters,
        &mut pending,
        &mut decisions,
        &mut response,
    )
    .await;
    if let Err(e) = &outcome
        && !matches!(e, Error::Checkpoint(_))
    {
        // Best effort: the run's failure is recorded so the thread shows it; the last good
        // step stays the one to resume from.
        let mut end = StepDelta::new(StepKind::End);
        end.status = RunStatus::Failed;
        end.counters = counters.clone();
        end.extra = Some(serde_json::json!({ "error": e.to_string() }));
        let _ = commit(committer, || end).await;
    }
    outcome?;
    if let (Some(_), Some(session)) = (committer, &ctx.session) {
        session.set_messages(conversation.as_ref().clone());
    }
    response.messages = match Arc::try_unwrap(conversation) {
        Ok(mut all) => all.split_off(produced_from.min(all.len())),
        Err(shared) => shared[produced_from.min(shared.len())..].to_vec(),
    };
    ctx.result = Some(response);
    Ok(ctx)
}

/// The loop itself: answer pending tool calls, ask the model, repeat.
#[allow(clippy::too_many_arguments)]
async fn drive(
    agent: &Agent,
    chat_chain: &Arc<[Arc<dyn Middleware<ChatContext>>]>,
    endpoint: &Endpoint<ChatContext>,
    router: &ToolRouter,
    env: &mut CallEnv,
    ctx: &mut AgentContext,
    committer: Option<&Committer>,
    conversation: &mut Arc<Vec<Message>>,
    counters: &mut LoopCounters,
    pending: &mut Option<(Arc<[FunctionCall]>, Vec<FunctionResult>)>,
    decisions: &mut crate::interrupt::Decisions,
    response: &mut AgentResponse,
) -> crate::Result<()> {
    let inner = &agent.inner;
    let config = &inner.config;
    let specs = router.specs();
    loop {
        if let Some((calls, done)) = pending.take() {
            let todo: Vec<FunctionCall> = calls
                .iter()
                .filter(|c| !done.iter().any(|r| r.call_id == c.call_id))
                .cloned()
                .collect();
            // Interrupt ids name the step that made the calls (without a thread: the model
            // call's number), so they are unique in the run.
            let step = match committer {
                Some(_) => env
                    .extensions
                    .get::<crate::checkpoint::ThreadCursor>()
                    .map_or(0, |c| c.step),
                None => counters.model_calls as u64,
            };
            let namespace = committer.map_or(String::new(), |c| c.cursor().namespace.clone());
            let reviewed = review(
                todo,
                router,
                &inner.guards,
                inner.approver.as_deref(),
                decisions,
                &namespace,
                step,
                committer,
                counters,
            )
            .await?;
            let (to_run, notes, mut fresh) = match reviewed {
                Reviewed::Ready {
                    run,
                    notes,
                    rejected,
                } => {
                    if let Some(sink) = &env.updates {
                        for r in &rejected {
                            sink.emit(AgentEventKind::ToolResult(r.clone()));
                        }
                    }
                    (run, notes, rejected)
                }
                Reviewed::Waiting(interrupts) => {
                    return pause(
                        committer, counters, response, interrupts, pending, calls, done,
                    )
                    .await;
                }
            };
            let to_run: Arc<[FunctionCall]> = to_run.into();
            let outcomes = run_batch(
                &to_run,
                router,
                env,
                config.concurrent_tool_calls,
                committer,
                &notes,
            )
            .await;
            let mut terminate = false;
            let mut waiting = Vec::new();
            for r in outcomes {
                match r {
                    Ok((result, stop)) => {
                        terminate |= stop;
                        fresh.push(result);
                    }
                    Err(Error::Interrupted(i)) => waiting.extend(i),
                    Err(e) => return Err(e),
                }
            }
            if !waiting.is_empty() {
                let done: Vec<FunctionResult> = done.into_iter().chain(fresh).collect();
                return pause(committer, counters, response, waiting, pending, calls, done).await;
            }
            let any_error = done.iter().chain(&fresh).any(|r| r.is_error);
            let results = in_call_order(&calls, done.into_iter().chain(fresh).collect());
            Arc::make_mut(conversation).extend(results.into_iter().map(Message::tool_result));
            if terminate {
                response.terminated = true;
                counters.function_calls += calls.len();
                let mut end = StepDelta::new(StepKind::End);
                end.status = RunStatus::Completed;
                end.counters = counters.clone();
                commit(committer, || end).await?;
                return Ok(());
            }
            after_batch(counters, calls.len(), any_error, config);
        }

        let final_call =
            counters.force_final || counters.iteration >= config.max_iterations || specs.is_empty();
        let mut options = ctx.options.clone();
        if !specs.is_empty() {
            options.tools = specs.to_vec();
            if final_call {
                options.tool_choice = Some(ToolChoice::None);
            } else if counters.iteration > 0 && options.tool_choice == Some(ToolChoice::Required) {
                options.tool_choice = Some(ToolChoice::Auto);
            }
        }
        let chat_ctx = ChatContext {
            agent_name: inner.name.clone(),
            messages: Arc::clone(conversation),
            options,
            client_kwargs: ctx.client_kwargs.clone(),
            session: ctx.session.clone(),
            extensions: ctx.extensions.clone(),
            result: None,
            terminate: false,
            iteration: counters.iteration,
            updates: ctx.updates.clone(),
        };
        let span = telemetry::chat_span(&chat_ctx, &inner.client);
        let chat_ctx = Next::new(Arc::clone(chat_chain), Arc::clone(endpoint))
            .run(chat_ctx)
            .instrument(span.clone())
            .await;
        telemetry::record_chat(&span, &chat_ctx);
        let chat_ctx = chat_ctx?;
        response.model_calls += 1;
        counters.model_calls += 1;
        let ChatResponse {
            messages: mut produced,
            finish_reason,
            usage,
            response_id,
            ..
        } = chat_ctx
            .result
            .ok_or(Error::MissingResult(MiddlewareKind::Chat))?;
        // Drop the call's handle on the conversation before appending to it, so the append
        // does not copy it.
        let stop_requested = chat_ctx.terminate;
        drop(chat_ctx.messages);
        if let Some(u) = usage {
            response.usage.add(&u);
            counters.usage.add(&u);
        }
        response.finish_reason = finish_reason;
        if response_id.is_some() {
            response.response_id = response_id;
        }
        for m in &mut produced {
            if m.author_name.is_none() {
                m.author_name = inner.name.clone();
            }
        }
        unique_call_ids(&mut produced);
        let calls: Arc<[FunctionCall]> = produced
            .iter()
            .flat_map(Message::function_calls)
            .cloned()
            .collect();
        if final_call && !specs.is_empty() {
            // The model was told not to call tools; calls it made anyway are dropped so the
            // history never holds a call without a result.
            for m in &mut produced {
                m.contents
                    .retain(|c| !matches!(c, Content::FunctionCall(_)));
            }
            produced.retain(|m| !m.contents.is_empty());
            let has_text = produced.iter().any(|m| !m.text().trim().is_empty());
            if !has_text && (counters.force_final || counters.iteration >= config.max_iterations) {
                produced.push(Message::assistant(LIMIT_REACHED_TEXT));
            }
        }
        let ends = stop_requested || calls.is_empty() || final_call;
        if let Some(c) = committer {
            let mut step = StepDelta::new(StepKind::Model);
            step.messages = produced.clone();
            step.status = if ends {
                RunStatus::Completed
            } else {
                RunStatus::Running
            };
            step.counters = counters.clone();
            let seq = c.commit(step).await?;
            // The batch's tools (a subagent's `task`) find the step that called them.
            let mut cursor = c.cursor().clone();
            cursor.step = seq;
            env.extensions.insert(cursor);
        }
        Arc::make_mut(conversation).extend(produced);
        if stop_requested {
            response.terminated = true;
        }
        if ends {
            return Ok(());
        }
        *pending = Some((calls, Vec::new()));
        // Decisions belong to the calls of one response.
        decisions.clear();
        env.extensions.remove::<InheritedDecisions>();
    }
}

/// Decisions handed down to the sub-runs of a resumed step (a crate-private extension).
#[derive(Clone)]
pub(crate) struct InheritedDecisions(pub(crate) crate::interrupt::Decisions);

/// Checks the decisions a paused run is resumed with: every interrupt has one of an allowed
/// kind, an edit matches the tool's schema, and (for the run the caller resumed, `strict`)
/// no decision names an unknown interrupt. Returns the ones for this run's interrupts.
fn accept_decisions(
    t: &Transcript,
    given: &crate::interrupt::Decisions,
    strict: bool,
    router: &ToolRouter,
    namespace: &str,
) -> crate::Result<crate::interrupt::Decisions> {
    use crate::interrupt::Decision;
    if strict
        && let Some(unknown) = given
            .keys()
            .find(|id| !t.interrupts.iter().any(|i| &i.id == *id))
    {
        return Err(Error::InvalidInput(format!(
            "no pending interrupt has the id {unknown:?}; pending: {}",
            t.interrupts
                .iter()
                .map(|i| i.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let mut accepted = crate::interrupt::Decisions::new();
    for i in &t.interrupts {
        let Some(d) = given.get(&i.id).or_else(|| t.decisions.get(&i.id)) else {
            return Err(Error::InvalidInput(format!(
                "the paused run needs a decision for interrupt {:?} ({} {})",
                i.id, i.tool, i.arguments
            )));
        };
        if !i.allowed_decisions.contains(&d.kind()) {
            return Err(Error::InvalidInput(format!(
                "interrupt {:?} ({}) allows {:?}, not {:?}",
                i.id,
                i.tool,
                i.allowed_decisions,
                d.kind()
            )));
        }
        // Edits of this run's own calls are checked here; a sub-run checks its own.
        if let (Decision::Edit { arguments }, Some(tool)) = (d, router.get(&i.tool))
            && i.namespace == namespace
        {
            tool.spec().check_arguments(arguments).map_err(|why| {
                Error::InvalidInput(format!(
                    "the edit of interrupt {:?} ({}): {why}",
                    i.id, i.tool
                ))
            })?;
        }
        accepted.insert(i.id.clone(), d.clone());
    }
    // Decisions for interrupts of sub-runs ride along to them.
    for (id, d) in given {
        accepted.entry(id.clone()).or_insert_with(|| d.clone());
    }
    Ok(accepted)
}

/// The calls of a batch sorted by their decisions.
enum Reviewed {
    Ready {
        run: Vec<FunctionCall>,
        notes: std::collections::HashMap<String, String>,
        rejected: Vec<FunctionResult>,
    },
    Waiting(Vec<crate::interrupt::Interrupt>),
}

/// Decides which calls of a batch may run: unguarded ones, and guarded ones with a decision
/// (committed earlier, given on resume, or asked of the in-process handler and committed now).
#[allow(clippy::too_many_arguments)]
async fn review(
    calls: Vec<FunctionCall>,
    router: &ToolRouter,
    guards: &std::collections::BTreeMap<String, crate::interrupt::InterruptOn>,
    handler: Option<&dyn crate::interrupt::ApprovalHandler>,
    decisions: &mut crate::interrupt::Decisions,
    namespace: &str,
    step: u64,
    committer: Option<&Committer>,
    counters: &LoopCounters,
) -> crate::Result<Reviewed> {
    use crate::interrupt::{CallReview, Decision, Interrupt, InterruptOn};
    let mut run = Vec::new();
    let mut notes = std::collections::HashMap::new();
    let mut rejected = Vec::new();
    let mut waiting = Vec::new();
    // A call the tool forbids never runs: the model reads why.
    let forbidden = |c: &FunctionCall, reason: &str| FunctionResult {
        call_id: c.call_id.clone(),
        output: vec![Content::text(format!(
            "Error: this {} call is not allowed, so it did not run: {}. Do not retry it; do without it or ask the user.",
            c.name,
            reason.trim().trim_end_matches('.')
        ))],
        is_error: true,
    };
    for mut c in calls {
        let tool = router.get(&c.name);
        let arguments = serde_json::from_str::<Value>(&c.arguments).unwrap_or(Value::Null);
        let configured = guards.get(&c.name).cloned().or_else(|| {
            tool.filter(|t| t.spec().approval_mode == crate::tool::ApprovalMode::AlwaysRequire)
                .map(|_| InterruptOn::default())
        });
        let guard = match tool.map(|t| t.review_call(&arguments)).unwrap_or_default() {
            CallReview::Forbid { reason } => {
                rejected.push(forbidden(&c, &reason));
                continue;
            }
            CallReview::Allow => None,
            CallReview::Ask { reason } => {
                let mut g = configured.unwrap_or_default();
                g.description.get_or_insert(reason);
                Some(g)
            }
            _ => configured,
        };
        let Some(guard) = guard else {
            run.push(c);
            continue;
        };
        let id = format!("{namespace}/{step}.{}", c.call_id);
        let interrupt = Interrupt {
            id: id.clone(),
            namespace: namespace.to_owned(),
            tool: c.name.clone(),
            call_id: c.call_id.clone(),
            arguments,
            allowed_decisions: guard.allowed_decisions.clone(),
            description: guard.description.clone(),
        };
        let decision = match (decisions.get(&id), handler) {
            (Some(d), _) => d.clone(),
            (None, Some(h)) => {
                let d = h.review(&interrupt).await;
                if !guard.allowed_decisions.contains(&d.kind()) {
                    return Err(Error::InvalidInput(format!(
                        "the reviewer decided {:?} for {}, which allows only {:?}",
                        d.kind(),
                        c.name,
                        guard.allowed_decisions
                    )));
                }
                // Committed before the call runs: a process killed now does not ask again
                // for a call it already had an answer to.
                let mut step = StepDelta::new(StepKind::Decisions);
                step.counters = counters.clone();
                step.extra = Some(serde_json::json!({ "decisions": { id.clone(): d.clone() } }));
                commit(committer, || step).await?;
                decisions.insert(id.clone(), d.clone());
                d
            }
            (None, None) => {
                waiting.push(interrupt);
                continue;
            }
        };
        match decision {
            Decision::Approve => run.push(c),
            Decision::Edit { arguments } => {
                if let Some(CallReview::Forbid { reason }) = tool.map(|t| t.review_call(&arguments))
                {
                    rejected.push(forbidden(&c, &reason));
                    continue;
                }
                if let Some(t) = tool
                    && let Err(why) = t.spec().check_arguments(&arguments)
                {
                    rejected.push(FunctionResult {
                        call_id: c.call_id.clone(),
                        output: vec![Content::text(format!(
                            "Error: the user's edit of this {} call does not fit its schema ({why}), so it did not run.",
                            c.name
                        ))],
                        is_error: true,
                    });
                    continue;
                }
                notes.insert(
                    c.call_id.clone(),
                    format!("(The user changed the arguments of this call to {arguments}.)\n"),
                );
                c.arguments = arguments.to_string();
                run.push(c);
            }
            Decision::Reject { message } => {
                let why = message
                    .map(|m| m.trim().trim_end_matches('.').to_owned())
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(" Their reason: {m}."))
                    .unwrap_or_default();
                rejected.push(FunctionResult {
                    call_id: c.call_id.clone(),
                    output: vec![Content::text(format!(
                        "Error: the user rejected this {} call, so it did not run.{why} Do not retry it unchanged; adjust your approach or ask the user.",
                        c.name
                    ))],
                    is_error: true,
                });
            }
        }
    }
    if !waiting.is_empty() {
        return Ok(Reviewed::Waiting(waiting));
    }
    for r in &rejected {
        let mut step = StepDelta::new(StepKind::Tools);
        step.results = vec![r.clone()];
        commit(committer, || step).await?;
    }
    Ok(Reviewed::Ready {
        run,
        notes,
        rejected,
    })
}

/// Pauses the run on `interrupts`: commits the state and the interrupts, keeps the batch
/// pending for the resume.
async fn pause(
    committer: Option<&Committer>,
    counters: &LoopCounters,
    response: &mut AgentResponse,
    interrupts: Vec<crate::interrupt::Interrupt>,
    pending: &mut Option<(Arc<[FunctionCall]>, Vec<FunctionResult>)>,
    calls: Arc<[FunctionCall]>,
    done: Vec<FunctionResult>,
) -> crate::Result<()> {
    let mut end = StepDelta::new(StepKind::End);
    end.status = RunStatus::Interrupted;
    end.counters = counters.clone();
    end.extra = Some(serde_json::json!({ "interrupts": interrupts }));
    commit(committer, || end).await?;
    response.interrupts = interrupts;
    *pending = Some((calls, done));
    Ok(())
}
