//! A small incremental parser for server-sent events (the `text/event-stream` format).
//!
//! Bytes are fed as they arrive, split anywhere (inside a line, inside a UTF-8 sequence, between
//! `\r` and `\n`). Complete events are handed to a callback as the event name and the data bytes;
//! comments (`: keep-alive`) and unknown fields are skipped. The buffers are reused, so parsing
//! allocates only when an event is larger than any seen before.

/// Incremental SSE parser.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes not yet forming a complete line.
    buf: Vec<u8>,
    /// The `event:` field of the event being built.
    event: Vec<u8>,
    /// The `data:` lines of the event being built, joined with `\n`.
    data: Vec<u8>,
    has_data: bool,
    /// The previous chunk ended with `\r`: a leading `\n` belongs to that line ending.
    skip_lf: bool,
    /// Whether the start of the stream (and a possible byte-order mark) was handled.
    started: bool,
}

impl SseParser {
    /// A fresh parser.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`, calling `on_event(event_name, data)` for every complete event. Stops early
    /// and returns the callback's error if it fails.
    pub(crate) fn feed<E>(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        const BOM: &[u8] = b"\xEF\xBB\xBF";
        let mut input = chunk;
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if input[0] == b'\n' {
                input = &input[1..];
            }
        }
        if !self.started {
            self.buf.extend_from_slice(input);
            if self.buf.len() < 3 && BOM.starts_with(&self.buf) {
                // Could still be the start of a byte-order mark: wait for more.
                return Ok(());
            }
            self.started = true;
            let mut joined = std::mem::take(&mut self.buf);
            let start = if joined.starts_with(BOM) { 3 } else { 0 };
            let r = self.process(&joined[start..], &mut on_event);
            if self.buf.is_empty() {
                joined.clear();
                self.buf = joined;
            }
            return r;
        }
        if self.buf.is_empty() {
            self.process(input, &mut on_event)
        } else {
            let mut joined = std::mem::take(&mut self.buf);
            joined.extend_from_slice(input);
            let r = self.process(&joined, &mut on_event);
            // Keep the allocation when nothing is left over.
            if self.buf.is_empty() {
                joined.clear();
                self.buf = joined;
            }
            r
        }
    }

    /// Parses complete lines of `input`; the unterminated tail goes into `self.buf`.
    fn process<E>(
        &mut self,
        input: &[u8],
        on_event: &mut impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rest = input;
        loop {
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.buf.extend_from_slice(rest);
                return Ok(());
            };
            let line = &rest[..end];
            let mut next = end + 1;
            if rest[end] == b'\r' {
                match rest.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            rest = &rest[next..];
            self.line(line, on_event)?;
        }
    }

    fn line<E>(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        if line.is_empty() {
            let r = if self.has_data {
                on_event(&self.event, &self.data)
            } else {
                Ok(())
            };
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return r;
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
        if !self.buf.is_empty() {
            let tail = std::mem::take(&mut self.buf);
            let _ = self.line::<()>(&tail, &mut |_, _| Ok(()));
        }
        self.has_data.then(|| std::mem::take(&mut self.data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed::<()>(c, |e, d| {
                out.push((
                    String::from_utf8_lossy(e).into_owned(),
                    String::from_utf8_lossy(d).into_owned(),
                ));
                Ok(())
            })
            .unwrap();
        }
        out
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
    fn pending_data_at_eof() {
        let mut p = SseParser::new();
        p.feed::<()>(b"data: [DONE]", |_, _| Ok(())).unwrap();
        assert_eq!(p.pending_data().as_deref(), Some(&b"[DONE]"[..]));
    }
}
