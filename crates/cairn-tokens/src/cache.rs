//! [`CachedCounter`]: per-message count caching so a growing history is counted incrementally.
//!
//! # Design
//!
//! - **Key = content fingerprint.** Each message is keyed by a 64-bit SipHash of everything that
//!   can change its count (role, author name, and every part with a tag byte and its strings:
//!   text, reasoning, image URL and media type, call name and arguments, result parts and error
//!   flag), paired with the total byte length of those strings. The key does not depend on the
//!   message's position or address, so a message edited in place (a tool result offloaded to a
//!   file, arguments truncated) gets a new key and is recounted, while identical messages share
//!   one entry. Two different messages would have to collide on both the 64-bit hash and the
//!   length to return a wrong count: with the default bound of 16,384 entries the probability is
//!   below 10⁻¹¹.
//! - **Cost.** Hashing is two orders of magnitude cheaper than BPE (GB/s against ≈ 20 MB/s),
//!   so re-counting a history of `n` cached messages plus `k` new ones costs a hash pass over the
//!   history and a BPE pass over the `k` new messages only: for a 170k-token history, ≈ 0.2 ms
//!   per step against ≈ 30–50 ms cold (the repository's `BENCHMARKS.md`).
//! - **Bounded memory.** Two generations of at most `capacity` entries each (default 8,192, i.e.
//!   ≤ 16,384 entries of 24 bytes plus map overhead, well under 1 MiB). A hit in the old
//!   generation is promoted to the current one; when the current generation is full it becomes
//!   the old one and the previous old generation is dropped. This approximates LRU with O(1)
//!   work per operation and no per-entry bookkeeping.
//! - **Thread-safe.** The maps sit behind one `Mutex`, held only for lookups and inserts, never
//!   while tokenizing: [`count_messages`](TokenCounter::count_messages) fingerprints all messages
//!   first, looks them all up under one lock, counts the misses unlocked, and inserts them under a
//!   second lock. Two threads that miss on the same message both count it, with the same result.
//! - Counts of bare text ([`count_text`](TokenCounter::count_text)) and images are not cached;
//!   they pass through to the inner counter.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_core::message::{Content, Message};

use crate::counter::TokenCounter;

/// Default number of entries per cache generation (the cache holds at most twice this).
pub const DEFAULT_CACHE_CAPACITY: usize = 8192;

/// A cache key: a 64-bit content hash and the content's byte length.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Key(u64, u64);

/// The keys are already hashes; the map only needs to pass the bits through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

type Map = HashMap<Key, usize, BuildHasherDefault<PassThrough>>;

#[derive(Default)]
struct Generations {
    current: Map,
    previous: Map,
}

impl Generations {
    fn get(&mut self, key: Key) -> Option<usize> {
        if let Some(n) = self.current.get(&key) {
            return Some(*n);
        }
        let n = self.previous.remove(&key)?;
        self.current.insert(key, n);
        Some(n)
    }

    fn insert(&mut self, key: Key, n: usize, capacity: usize) {
        if self.current.len() >= capacity {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current.insert(key, n);
    }
}

/// Cache statistics of a [`CachedCounter`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Messages served from the cache.
    pub hits: u64,
    /// Messages counted by the inner counter.
    pub misses: u64,
    /// Entries currently held.
    pub entries: usize,
}

/// Wraps a [`TokenCounter`] and caches the count of each message by content fingerprint, so
/// re-counting a growing history only tokenizes the new (or edited) messages. See the
/// [module docs](self) for the design.
///
/// ```
/// use cairn_core::message::Message;
/// use cairn_tokens::{BpeCounter, CachedCounter, TokenCounter};
///
/// let counter = CachedCounter::new(BpeCounter::o200k());
/// let mut history = vec![Message::system("Be brief."), Message::user("hello world")];
/// let before = counter.count_messages(&history);
/// history.push(Message::assistant("Hi!"));
/// let after = counter.count_messages(&history); // tokenizes only the new message
/// assert!(after > before);
/// assert_eq!(counter.stats().misses, 3);
/// ```
pub struct CachedCounter<C> {
    inner: C,
    capacity: usize,
    maps: Mutex<Generations>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl<C: TokenCounter + std::fmt::Debug> std::fmt::Debug for CachedCounter<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedCounter")
            .field("inner", &self.inner)
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<C: TokenCounter> CachedCounter<C> {
    /// A cache of [`DEFAULT_CACHE_CAPACITY`] entries per generation around `inner`.
    pub fn new(inner: C) -> Self {
        CachedCounter::with_capacity(inner, DEFAULT_CACHE_CAPACITY)
    }

    /// A cache of `capacity` entries per generation (at least 1) around `inner`.
    pub fn with_capacity(inner: C, capacity: usize) -> Self {
        CachedCounter {
            inner,
            capacity: capacity.max(1),
            maps: Mutex::new(Generations::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The wrapped counter.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// Hit and miss counters and the current number of entries.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.with_maps(|g| g.current.len() + g.previous.len()),
        }
    }

    /// Drops every cached count.
    pub fn clear(&self) {
        self.with_maps(|g| *g = Generations::default());
    }

    fn with_maps<R>(&self, f: impl FnOnce(&mut Generations) -> R) -> R {
        // A panic while holding the lock cannot leave the maps inconsistent for our purposes
        // (at worst an entry is missing), so a poisoned lock is simply reused.
        let mut guard = match self.maps.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }
}

impl<C: TokenCounter> TokenCounter for CachedCounter<C> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn is_exact(&self) -> bool {
        self.inner.is_exact()
    }

    fn count_text(&self, text: &str) -> usize {
        self.inner.count_text(text)
    }

    fn count_image(&self, url: &str, media_type: Option<&str>) -> usize {
        self.inner.count_image(url, media_type)
    }

    fn count_message(&self, message: &Message) -> usize {
        let key = fingerprint(message);
        if let Some(n) = self.with_maps(|g| g.get(key)) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return n;
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let n = self.inner.count_message(message);
        self.with_maps(|g| g.insert(key, n, self.capacity));
        n
    }

    fn count_messages(&self, messages: &[Message]) -> usize {
        let keys: Vec<Key> = messages.iter().map(fingerprint).collect();
        let mut total = 0usize;
        let mut missing: Vec<usize> = Vec::new();
        self.with_maps(|g| {
            for (i, key) in keys.iter().enumerate() {
                match g.get(*key) {
                    Some(n) => total += n,
                    None => missing.push(i),
                }
            }
        });
        let hits = (messages.len() - missing.len()) as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        self.misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        if missing.is_empty() {
            return total;
        }
        let counted: Vec<(Key, usize)> = missing
            .iter()
            .map(|&i| (keys[i], self.inner.count_message(&messages[i])))
            .collect();
        self.with_maps(|g| {
            for (key, n) in &counted {
                g.insert(*key, *n, self.capacity);
            }
        });
        total + counted.iter().map(|(_, n)| n).sum::<usize>()
    }
}

/// Hashes everything in a message that can change its count.
fn fingerprint(message: &Message) -> Key {
    let mut h = DefaultHasher::new();
    let mut len = 0u64;
    let mut put = |h: &mut DefaultHasher, s: &str| {
        s.hash(h);
        len += s.len() as u64;
    };
    put(&mut h, message.role.as_str());
    match &message.author_name {
        Some(name) => {
            h.write_u8(1);
            put(&mut h, name);
        }
        None => h.write_u8(0),
    }
    hash_parts(&mut h, &mut put, &message.contents);
    Key(h.finish(), len)
}

fn hash_parts(
    h: &mut DefaultHasher,
    put: &mut impl FnMut(&mut DefaultHasher, &str),
    parts: &[Content],
) {
    h.write_usize(parts.len());
    for part in parts {
        match part {
            Content::Text { text } => {
                h.write_u8(1);
                put(h, text);
            }
            Content::Reasoning { text } => {
                h.write_u8(2);
                put(h, text);
            }
            Content::Image { url, media_type } => {
                h.write_u8(3);
                put(h, url);
                put(h, media_type.as_deref().unwrap_or("\u{0}none"));
            }
            Content::FunctionCall(call) => {
                h.write_u8(4);
                put(h, &call.call_id);
                put(h, &call.name);
                put(h, &call.arguments);
            }
            Content::FunctionResult(result) => {
                h.write_u8(5);
                put(h, &result.call_id);
                h.write_u8(u8::from(result.is_error));
                hash_parts(h, put, &result.output);
            }
            other => {
                // A part kind added to cairn-core after this crate was written: hash its debug
                // form, slow but correct.
                h.write_u8(255);
                put(h, &format!("{other:?}"));
            }
        }
    }
}
