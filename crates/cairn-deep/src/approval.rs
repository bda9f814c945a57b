//! Human approval of tool calls (`interrupt_on`, SPEC R9).
//!
//! The types live in [`cairn_core::interrupt`], where the agent loop enforces them for every
//! agent: a guarded call (named in `interrupt_on`, or of a tool whose spec says
//! `approval_mode = always_require`) never runs without a decision. With an
//! [`ApprovalHandler`] (the CLI's terminal prompt) the loop asks it; without one the run pauses
//! and is resumed with decisions (`Agent::resume(thread).decisions(…)`). The deep builder's
//! `interrupt_on` and `approval_handler` configure the agent and every subagent alike.

pub use cairn_core::interrupt::{
    ApprovalHandler, ApprovalRequest, Decision, DecisionKind, Decisions, Interrupt, InterruptOn,
};
