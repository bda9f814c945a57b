//! Sessions: conversation history and state that outlive one run (SPEC R1.1).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::message::Message;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the data half-written in a way that matters
    // here (every critical section is a single map or vector operation), so recover from poison.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The mutable state map of a session: JSON values under string keys, with typed helpers.
///
/// Cloning gives another handle to the *same* map.
#[derive(Clone, Default)]
pub struct SessionState(Arc<StateInner>);

#[derive(Default)]
struct StateInner {
    map: Mutex<Map<String, Value>>,
    /// Bumped by every call that may change the map, so a checkpointer can skip diffing an
    /// unchanged state.
    version: AtomicU64,
}

impl SessionState {
    fn read(&self) -> MutexGuard<'_, Map<String, Value>> {
        lock(&self.0.map)
    }

    fn write(&self) -> MutexGuard<'_, Map<String, Value>> {
        self.0.version.fetch_add(1, Ordering::Relaxed);
        lock(&self.0.map)
    }

    /// A number that changes whenever the map may have changed (every write, and every
    /// [`with`](Self::with)).
    pub fn version(&self) -> u64 {
        self.0.version.load(Ordering::Relaxed)
    }

    /// Replaces the whole map.
    pub fn replace(&self, map: Map<String, Value>) {
        *self.write() = map;
    }
}

impl SessionState {
    /// The value under `key` deserialized as `T`; `None` when absent or of another shape.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let v = self.read().get(key).cloned()?;
        serde_json::from_value(v).ok()
    }

    /// The raw JSON value under `key`.
    pub fn get_value(&self, key: &str) -> Option<Value> {
        self.read().get(key).cloned()
    }

    /// Stores `value` under `key`. Values that cannot be serialized are an error.
    pub fn insert<T: Serialize>(&self, key: impl Into<String>, value: T) -> crate::Result<()> {
        let v = serde_json::to_value(value)?;
        self.write().insert(key.into(), v);
        Ok(())
    }

    /// Stores a raw JSON value under `key`.
    pub fn insert_value(&self, key: impl Into<String>, value: Value) {
        self.write().insert(key.into(), value);
    }

    /// Removes `key`.
    pub fn remove(&self, key: &str) -> Option<Value> {
        self.write().remove(key)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.read().contains_key(key)
    }

    /// Runs `f` with the map locked (do not await inside).
    pub fn with<R>(&self, f: impl FnOnce(&mut Map<String, Value>) -> R) -> R {
        f(&mut self.write())
    }

    /// A copy of the whole map.
    pub fn snapshot(&self) -> Map<String, Value> {
        self.read().clone()
    }

    /// Whether two handles share one map.
    pub fn ptr_eq(&self, other: &SessionState) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.read().iter()).finish()
    }
}

struct Inner {
    session_id: String,
    service_session_id: Mutex<Option<String>>,
    state: SessionState,
    messages: Mutex<Vec<Message>>,
}

/// A conversation: its id, its history and its state map.
///
/// `AgentSession` is a handle: clones share the same session, so a tool that writes
/// `ctx.session` state is seen by the caller after the run. A run given the session reads its
/// history first and appends the new messages at the end, so a second `run` continues the
/// conversation. It serializes to `{session_id, service_session_id, state, messages}`.
#[derive(Clone)]
pub struct AgentSession {
    inner: Arc<Inner>,
}

impl AgentSession {
    /// A new session with a random id.
    pub fn new() -> Self {
        Self::with_id(uuid::Uuid::new_v4().to_string())
    }

    /// A new session with the given id.
    pub fn with_id(id: impl Into<String>) -> Self {
        AgentSession {
            inner: Arc::new(Inner {
                session_id: id.into(),
                service_session_id: Mutex::new(None),
                state: SessionState::default(),
                messages: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A session with the same id and the *same* state map as `self`, an empty history and no
    /// service session id. Used by agents run as tools with `propagate_session`.
    pub fn sharing_state(&self) -> Self {
        AgentSession {
            inner: Arc::new(Inner {
                session_id: self.inner.session_id.clone(),
                service_session_id: Mutex::new(None),
                state: self.inner.state.clone(),
                messages: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.inner.session_id
    }

    /// The id of a conversation kept by the model service, if any.
    pub fn service_session_id(&self) -> Option<String> {
        lock(&self.inner.service_session_id).clone()
    }

    /// Sets the service-side conversation id.
    pub fn set_service_session_id(&self, id: Option<String>) {
        *lock(&self.inner.service_session_id) = id;
    }

    /// The state map.
    pub fn state(&self) -> &SessionState {
        &self.inner.state
    }

    /// A copy of the history.
    pub fn messages(&self) -> Vec<Message> {
        lock(&self.inner.messages).clone()
    }

    /// Number of messages in the history.
    pub fn message_count(&self) -> usize {
        lock(&self.inner.messages).len()
    }

    /// Appends messages to the history.
    pub fn append_messages(&self, messages: impl IntoIterator<Item = Message>) {
        lock(&self.inner.messages).extend(messages);
    }

    /// Replaces the history.
    pub fn set_messages(&self, messages: Vec<Message>) {
        *lock(&self.inner.messages) = messages;
    }

    /// Whether two handles are the same session object.
    pub fn ptr_eq(&self, other: &AgentSession) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Serializes the session to JSON.
    pub fn to_json(&self) -> crate::Result<String> {
        Ok(serde_json::to_string(self)?)
    }

    /// Restores a session from [`to_json`](Self::to_json) output.
    pub fn from_json(s: &str) -> crate::Result<Self> {
        Ok(serde_json::from_str(s)?)
    }
}

impl Default for AgentSession {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for AgentSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSession")
            .field("session_id", &self.inner.session_id)
            .field("messages", &self.message_count())
            .finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    #[serde(rename = "type", default = "session_type")]
    kind: String,
    session_id: String,
    #[serde(default)]
    service_session_id: Option<String>,
    #[serde(default)]
    state: Map<String, Value>,
    #[serde(default)]
    messages: Vec<Message>,
}

fn session_type() -> String {
    "session".into()
}

impl Serialize for AgentSession {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Snapshot {
            kind: session_type(),
            session_id: self.inner.session_id.clone(),
            service_session_id: self.service_session_id(),
            state: self.inner.state.snapshot(),
            messages: self.messages(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for AgentSession {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let snap = Snapshot::deserialize(d)?;
        let s = AgentSession::with_id(snap.session_id);
        s.set_service_session_id(snap.service_session_id);
        s.state().with(|m| *m = snap.state);
        s.set_messages(snap.messages);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_shared_between_handles_and_round_trips() {
        let s = AgentSession::new();
        let h = s.clone();
        h.state().insert("topic", "budget").unwrap();
        assert_eq!(s.state().get::<String>("topic").as_deref(), Some("budget"));
        s.append_messages([Message::user("hi")]);
        let back = AgentSession::from_json(&s.to_json().unwrap()).unwrap();
        assert_eq!(back.id(), s.id());
        assert_eq!(back.messages(), s.messages());
        assert_eq!(
            back.state().get::<String>("topic").as_deref(),
            Some("budget")
        );
        let child = s.sharing_state();
        assert!(child.state().ptr_eq(s.state()));
        assert_eq!(child.message_count(), 0);
    }
}
