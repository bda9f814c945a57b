//! A small incremental parser for server-sent events (the `text/event-stream` format).
//!
//! Bytes are fed as they arrive, split anywhere (inside a line, inside a UTF-8 sequence, between
//! `\r` and `\n`). Complete events are handed to a callback as the event name and the data bytes;
//! comments (`: keep-alive`) and unknown fields are skipped. The buffers are reused, so parsing
//! allocates only when an event is larger than any seen before.
//!
//! Parsing is linear in the input: each byte is searched for a line end once (only the newly
//! fed bytes are searched, never the partial line kept from earlier chunks) and copied at most
//! once into the partial-line buffer. Every buffer is capped: a line, or the data of an event,
//! longer than the parser's limit is an error (see
//! [`HttpOptions::max_sse_event_bytes`](crate::HttpOptions::max_sse_event_bytes)), so an endless
//! line from a server fails after the limit instead of exhausting memory.

use cairn_core::ChatError;

use crate::http_options::{DEFAULT_MAX_SSE_EVENT_BYTES, too_large};

/// What the event callback wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep parsing.
    Continue,
    /// The stream is over (its end event was seen): ignore everything after it.
    Stop,
}

/// Incremental SSE parser.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// Bytes of the current line not yet ended (never holds a line end).
    buf: Vec<u8>,
    /// The `event:` field of the event being built.
    event: Vec<u8>,
    /// The `data:` lines of the event being built, joined with `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// The previous chunk ended with `\r`: a leading `\n` belongs to that line ending.
    skip_lf: bool,
    /// How many bytes of a leading byte-order mark were seen (3: done with it).
    bom_seen: usize,
    /// The start of the stream (and a possible byte-order mark) was handled.
    started: bool,
    /// The callback said the stream is over.
    stopped: bool,
    /// The longest line, and the largest event data, accepted.
    max: usize,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_SSE_EVENT_BYTES)
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A fresh parser accepting lines and event data up to `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            event: Vec::new(),
            data: Vec::new(),
            has_data: false,
            skip_lf: false,
            bom_seen: 0,
            started: false,
            stopped: false,
            max,
        }
    }

    fn over_limit(&self) -> ChatError {
        too_large(
            "a server-sent-events line or event",
            self.max,
            "max_sse_event_bytes",
        )
    }

    /// Feeds `chunk`, calling `on_event(event_name, data)` for every complete event. Stops early
    /// and returns the callback's error if it fails, or an error when a line or an event's data
    /// exceeds the limit. After the callback returns [`Flow::Stop`] the rest is ignored.
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&[u8], &[u8]) -> Result<Flow, ChatError>,
    ) -> Result<(), ChatError> {
        if self.stopped {
            return Ok(());
        }
        let mut input = chunk;
        if !self.started {
            // Skip a byte-order mark, which may arrive split.
            while self.bom_seen < BOM.len() {
                let Some(&b) = input.first() else {
                    return Ok(());
                };
                if b != BOM[self.bom_seen] {
                    break;
                }
                self.bom_seen += 1;
                input = &input[1..];
            }
            self.started = true;
            if self.bom_seen < BOM.len() {
                // Not a byte-order mark after all: the bytes taken for one are content (they
                // hold no line end).
                self.buf.extend_from_slice(&BOM[..self.bom_seen]);
            }
        }
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if input[0] == b'\n' {
                input = &input[1..];
            }
        }
        self.process(input, &mut on_event)
    }

    /// Parses complete lines of `input`; the unterminated tail goes into `self.buf`.
    fn process(
        &mut self,
        input: &[u8],
        on_event: &mut impl FnMut(&[u8], &[u8]) -> Result<Flow, ChatError>,
    ) -> Result<(), ChatError> {
        let mut rest = input;
        while !self.stopped {
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                if self.buf.len() + rest.len() > self.max {
                    return Err(self.over_limit());
                }
                self.buf.extend_from_slice(rest);
                return Ok(());
            };
            let mut next = end + 1;
            if rest[end] == b'\r' {
                match rest.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            if self.buf.is_empty() {
                self.line(&rest[..end], on_event)?;
            } else {
                if self.buf.len() + end > self.max {
                    return Err(self.over_limit());
                }
                let mut line = std::mem::take(&mut self.buf);
                line.extend_from_slice(&rest[..end]);
                let r = self.line(&line, on_event);
                // Keep the allocation for the next partial line.
                line.clear();
                self.buf = line;
                r?;
            }
            rest = &rest[next..];
        }
        Ok(())
    }

    fn line(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(&[u8], &[u8]) -> Result<Flow, ChatError>,
    ) -> Result<(), ChatError> {
        if line.len() > self.max {
            return Err(self.over_limit());
        }
        if line.is_empty() {
            let r = if self.has_data {
                on_event(&self.event, &self.data)
            } else {
                Ok(Flow::Continue)
            };
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            if r? == Flow::Stop {
                self.stopped = true;
            }
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max {
                    return Err(self.over_limit());
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {}
        }
        Ok(())
    }

    /// The data of an event left unterminated at the end of the stream (its last line may lack a
    /// line ending), if any.
    pub(crate) fn pending_data(&mut self) -> Option<Vec<u8>> {
        if self.stopped {
            return None;
        }
        if !self.buf.is_empty() {
            let tail = std::mem::take(&mut self.buf);
            let _ = self.line(&tail, &mut |_, _| Ok(Flow::Continue));
        }
        self.has_data.then(|| std::mem::take(&mut self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect_with(p: &mut SseParser, chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, |e, d| {
                out.push((
                    String::from_utf8_lossy(e).into_owned(),
                    String::from_utf8_lossy(d).into_owned(),
                ));
                Ok(Flow::Continue)
            })
            .unwrap();
        }
        out
    }

    fn collect(chunks: &[&[u8]]) -> Vec<(String, String)> {
        collect_with(&mut SseParser::default(), chunks)
    }

    #[test]
    fn parses_events_split_anywhere() {
        let stream: &[u8] = "\u{feff}: keep-alive\r\nevent: a\r\ndata: {\"x\":\"é\"}\r\n\r\ndata: 1\ndata:2\n\nid: 3\nretry: 10\n\ndata: [DONE]\r\r".as_bytes();
        let whole = collect(&[stream]);
        assert_eq!(
            whole,
            vec![
                ("a".into(), "{\"x\":\"é\"}".into()),
                (String::new(), "1\n2".into()),
                (String::new(), "[DONE]".into()),
            ]
        );
        for size in 1..stream.len() {
            let chunks: Vec<&[u8]> = stream.chunks(size).collect();
            assert_eq!(collect(&chunks), whole, "chunk size {size}");
        }
    }

    #[test]
    fn a_partial_byte_order_mark_is_content() {
        // \xEF\xBB then 'x': not a byte-order mark; the line keeps those bytes.
        let stream: &[u8] = b"\xEF\xBBx: y\ndata: 1\n\n";
        for size in 1..stream.len() {
            let chunks: Vec<&[u8]> = stream.chunks(size).collect();
            assert_eq!(collect(&chunks), vec![(String::new(), "1".into())]);
        }
    }

    #[test]
    fn pending_data_at_eof() {
        let mut p = SseParser::default();
        p.feed(b"data: [DONE]", |_, _| Ok(Flow::Continue)).unwrap();
        assert_eq!(p.pending_data().as_deref(), Some(&b"[DONE]"[..]));
    }

    #[test]
    fn stop_ignores_the_rest() {
        let mut p = SseParser::new(16);
        let mut seen = 0;
        // After the stop, even an over-long line is ignored.
        p.feed(
            b"data: a\n\ndata: b\n\ndata: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            |_, _| {
                seen += 1;
                Ok(Flow::Stop)
            },
        )
        .unwrap();
        assert_eq!(seen, 1);
        assert_eq!(p.pending_data(), None);
    }

    #[test]
    fn lines_and_events_are_capped() {
        // A line over the cap, split or whole, with or without an end.
        for chunks in [
            vec![&b"data: 0123456789abcdef"[..]],
            vec![&b"data: 0123"[..], &b"456789abcdef\n"[..]],
            vec![&b"data: 01234567"[..], &b"89abcdef"[..]],
            vec![&b": comment 0123456789abcdef\n"[..]],
        ] {
            let mut p = SseParser::new(16);
            let r = chunks
                .iter()
                .try_for_each(|c| p.feed(c, |_, _| Ok(Flow::Continue)));
            let e = r.unwrap_err();
            assert_eq!(e.kind(), cairn_core::ChatErrorKind::Decode);
            assert!(e.message().contains("max_sse_event_bytes"), "{e}");
        }
        // Short lines adding up to an event over the cap.
        let mut p = SseParser::new(16);
        let e = p
            .feed(b"data: 012345\ndata: 012345\ndata: 012345\n", |_, _| {
                Ok(Flow::Continue)
            })
            .unwrap_err();
        assert!(e.message().contains("max_sse_event_bytes"), "{e}");
        // A line at the cap is fine.
        let mut p = SseParser::new(16);
        assert_eq!(
            collect_with(&mut p, &[b"data: 0123", b"456789\n\n"]),
            vec![(String::new(), "0123456789".into())]
        );
    }

    /// A 64 MB line fed in small chunks takes time linear in its size. The quadratic parser this
    /// replaced searched and copied the whole partial line again for every chunk: for 64 MB in
    /// 1 KiB chunks that is about 2 TB of copying (hours); linear, it is well under a second.
    /// The bound is loose on purpose (debug build, loaded machine) and checked as the line
    /// grows, so the old parser fails here instead of hanging.
    #[test]
    fn a_64_mb_line_is_linear_and_capped() {
        const SIZE: usize = 64 << 20;
        let bound = std::time::Duration::from_secs(30);
        let piece = vec![b'x'; 1 << 10];
        let started = std::time::Instant::now();
        let mut p = SseParser::new(SIZE + 64);
        p.feed(b"data: ", |_, _| Ok(Flow::Continue)).unwrap();
        for i in 0..SIZE / piece.len() {
            p.feed(&piece, |_, _| Ok(Flow::Continue)).unwrap();
            if i % 1024 == 0 {
                assert!(started.elapsed() < bound, "quadratic: {i} KiB fed");
            }
        }
        let mut len = 0;
        p.feed(b"\n\n", |_, d| {
            len = d.len();
            Ok(Flow::Continue)
        })
        .unwrap();
        assert_eq!(len, SIZE);
        // With the default cap the same line is refused once it passes 8 MiB.
        let mut p = SseParser::default();
        let mut fed = 0usize;
        let e = loop {
            match p.feed(&piece, |_, _| Ok(Flow::Continue)) {
                Ok(()) => fed += piece.len(),
                Err(e) => break e,
            }
            assert!(fed <= SIZE, "never refused");
        };
        assert!(fed <= DEFAULT_MAX_SSE_EVENT_BYTES, "{fed}");
        assert!(e.message().contains("8 MiB"), "{e}");
        assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    }
}
