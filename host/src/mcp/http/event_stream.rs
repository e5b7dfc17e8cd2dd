//! A small, strict `text/event-stream` parser (the WHATWG "server-sent events" rules),
//! sans I/O: feed it bytes as they arrive, take complete events out.
//!
//! Lines end in CRLF, LF or a lone CR (also split across chunks); `:` lines are
//! comments; `data` lines join with `\n`; `id` sets the last event id (ignored if it
//! holds NUL); `retry` takes digits only. An event is dispatched on an empty line even
//! when its data is empty (the priming events servers send before a reply). One event
//! may hold at most `max_event` bytes; beyond that the stream is refused rather than
//! buffered.

/// Longest event id kept; longer ones are ignored like ids holding NUL.
pub const MAX_ID_BYTES: usize = 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event` field; empty means `message`.
    pub event: String,
    pub data: String,
    /// The last event id in force when this event was dispatched.
    pub id: Option<String>,
}

/// The stream broke a limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an event of the server's stream exceeds {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

#[derive(Debug)]
pub struct EventStream {
    max_event: usize,
    /// The current, incomplete line.
    line: Vec<u8>,
    /// The previous chunk ended in CR: a leading LF of the next one belongs to it.
    after_cr: bool,
    started: bool,
    data: String,
    event: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<u64>,
}

impl EventStream {
    pub fn new(max_event: usize) -> EventStream {
        EventStream {
            max_event,
            line: Vec::new(),
            after_cr: false,
            started: false,
            data: String::new(),
            event: String::new(),
            has_data: false,
            last_id: None,
            retry: None,
        }
    }

    /// The last event id seen, for `Last-Event-ID` when reconnecting.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the server asked for, in milliseconds.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// Parses `chunk`, passing each completed event to `emit`.
    pub fn feed(&mut self, chunk: &[u8], mut emit: impl FnMut(SseEvent)) -> Result<(), TooLarge> {
        let mut chunk = chunk;
        if !self.started {
            // A UTF-8 BOM may open the stream; it is not part of the first line.
            let bom = b"\xEF\xBB\xBF";
            let have = self.line.len() + chunk.len();
            if have < bom.len() && bom.starts_with(&[self.line.as_slice(), chunk].concat()) {
                self.line.extend_from_slice(chunk);
                return Ok(());
            }
            let mut joined = std::mem::take(&mut self.line);
            joined.extend_from_slice(chunk);
            self.started = true;
            let rest = joined.strip_prefix(bom).unwrap_or(&joined).to_vec();
            return self.feed(&rest, emit);
        }
        // (An empty chunk, which an HTTP/2 DATA frame may be, says nothing of it.)
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_line_bytes(&chunk[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, &mut emit);
            self.line = line;
            self.line.clear();
            if chunk[end] == b'\r' {
                match chunk.get(end + 1) {
                    Some(b'\n') => chunk = &chunk[end + 2..],
                    Some(_) => chunk = &chunk[end + 1..],
                    None => {
                        self.after_cr = true;
                        chunk = &[];
                    }
                }
            } else {
                chunk = &chunk[end + 1..];
            }
        }
        self.push_line_bytes(chunk)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), TooLarge> {
        if self.line.len() + bytes.len() + self.data.len() > self.max_event {
            return Err(TooLarge {
                limit: self.max_event,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], emit: &mut impl FnMut(SseEvent)) {
        if line.is_empty() {
            self.dispatch(emit);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                self.data.push_str(&value);
                self.data.push('\n');
                self.has_data = true;
            }
            b"event" => self.event = value.into_owned(),
            // A longer id would go back to the server as a header on resumption.
            b"id" if !value.contains('\0') && value.len() <= MAX_ID_BYTES => {
                self.last_id = Some(value.into_owned())
            }
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, emit: &mut impl FnMut(SseEvent)) {
        let event = std::mem::take(&mut self.event);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        emit(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_chunks(chunks: &[&[u8]]) -> (Vec<SseEvent>, EventStream) {
        let mut p = EventStream::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, |e| out.push(e)).unwrap_or_else(|e| panic!("{e}"));
        }
        (out, p)
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            id: id.map(str::to_owned),
        }
    }

    proptest::proptest! {
        /// Any events, written with any line endings, comments between fields and a
        /// BOM or not, read back the same however the stream is cut into chunks.
        #[test]
        fn any_stream_reads_back_its_events_however_it_is_cut(
            events in proptest::collection::vec(
                (
                    "[a-z]{0,8}",
                    proptest::collection::vec("[^\r\n]{0,40}", 1..4),
                    proptest::option::of("[a-zA-Z0-9-]{1,12}"),
                ),
                0..6,
            ),
            endings in proptest::collection::vec(0..3usize, 1..16),
            comments in proptest::prelude::any::<bool>(),
            bom in proptest::prelude::any::<bool>(),
            cuts in proptest::collection::vec(0..2000usize, 0..8),
        ) {
            let mut ending = endings.iter().cycle().map(|&e| ["\n", "\r\n", "\r"][e]);
            let mut text = String::from(if bom { "\u{feff}" } else { "" });
            // Each line written with the next ending; an LF right after a CR would make
            // one CRLF ending of two, so it is written as a CR there.
            let mut line = |text: &mut String, s: &str| {
                text.push_str(s);
                let e = ending.next().unwrap_or("\n");
                text.push_str(if e == "\n" && text.ends_with('\r') { "\r" } else { e });
            };
            let mut expected = Vec::new();
            let mut last_id = None;
            for (event, data, id) in &events {
                if comments {
                    line(&mut text, ": keep-alive");
                }
                if !event.is_empty() {
                    line(&mut text, &format!("event: {event}"));
                }
                if let Some(id) = id {
                    line(&mut text, &format!("id:{id}"));
                    last_id = Some(id.clone());
                }
                for d in data {
                    line(&mut text, &format!("data: {d}"));
                }
                line(&mut text, "");
                expected.push(ev(event, &data.join("\n"), last_id.as_deref()));
            }
            let bytes = text.as_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut from = 0;
            for cut in at {
                chunks.push(&bytes[from..cut]);
                from = cut;
            }
            chunks.push(&bytes[from..]);
            proptest::prop_assert_eq!(parse_chunks(&chunks).0, expected);
        }
    }

    #[test]
    fn multi_line_data_comments_and_fields() {
        let (out, p) = parse_chunks(&[
            b": a comment\nevent: message\nid: 7\nretry: 500\ndata: {\"a\":\ndata: 1}\n\n",
        ]);
        assert_eq!(out, vec![ev("message", "{\"a\":\n1}", Some("7"))]);
        assert_eq!(p.retry(), Some(500));
        assert_eq!(p.last_id(), Some("7"));
    }

    #[test]
    fn line_endings_split_anywhere() {
        let text = b"data: one\r\n\r\ndata: two\r\rdata:three\n\n";
        let whole = parse_chunks(&[text]).0;
        assert_eq!(
            whole,
            vec![
                ev("", "one", None),
                ev("", "two", None),
                ev("", "three", None)
            ]
        );
        for i in 0..text.len() {
            for j in i..text.len() {
                let (a, rest) = text.split_at(i);
                let (b, c) = rest.split_at(j - i);
                assert_eq!(parse_chunks(&[a, b, c]).0, whole, "split at {i}, {j}");
            }
        }
    }

    #[test]
    fn an_empty_chunk_between_cr_and_lf_keeps_them_one_line_end() {
        // Found by the property test above: the empty chunk forgot the CR, and the LF
        // after it ended a second, empty line, which dropped the event's type.
        let (out, _) = parse_chunks(&[b"event: a\r", b"", b"\ndata: x\n\n"]);
        assert_eq!(out, vec![ev("a", "x", None)]);
    }

    #[test]
    fn priming_events_and_ids() {
        // The empty priming event a server sends before its reply is dispatched, empty.
        let (out, p) = parse_chunks(&[b"id: event-0\nretry: 500\ndata: \n\n"]);
        assert_eq!(out, vec![ev("", "", Some("event-0"))]);
        assert_eq!(p.last_id(), Some("event-0"));
        // No data at all: nothing is dispatched, but the id still counts.
        let (out, p) = parse_chunks(&[b"id: 3\n\n"]);
        assert!(out.is_empty());
        assert_eq!(p.last_id(), Some("3"));
    }

    #[test]
    fn bad_fields_are_ignored() {
        let (out, p) = parse_chunks(&[b"retry: 5x\nid: a\0b\nbogus: 1\ndata\n\n"]);
        assert_eq!(out, vec![ev("", "", None)]);
        assert_eq!(p.retry(), None);
        assert_eq!(p.last_id(), None);
        let long = format!("id: {}\ndata: x\n\n", "9".repeat(MAX_ID_BYTES + 1));
        let (out, p) = parse_chunks(&[long.as_bytes()]);
        assert_eq!(out, vec![ev("", "x", None)]);
        assert_eq!(p.last_id(), None);
    }

    #[test]
    fn a_bom_is_skipped_even_when_split() {
        let (out, _) = parse_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(out, vec![ev("", "x", None)]);
    }

    #[test]
    fn events_over_the_limit_are_refused() {
        let mut p = EventStream::new(64);
        let long = vec![b'a'; 100];
        assert_eq!(p.feed(&long, |_| {}), Err(TooLarge { limit: 64 }));
        let mut p = EventStream::new(64);
        let mut err = Ok(());
        for _ in 0..10 {
            err = p.feed(b"data: 0123456789\n", |_| {});
            if err.is_err() {
                break;
            }
        }
        assert_eq!(err, Err(TooLarge { limit: 64 }));
    }
}
