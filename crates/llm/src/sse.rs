//! Server-sent events: bytes arrive in chunks split anywhere; events come out whole.
//! Lines starting with `:` are comments (OpenRouter sends `: OPENROUTER PROCESSING`).

/// What one event of a model's stream meant, read by the provider's stream reader.
pub enum Progress {
    /// Nothing the model wrote.
    Nothing,
    /// The model produced text or tool input.
    Content,
    /// The reply is complete.
    Done,
}

/// One event: its `event:` name (empty when none) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` name (empty when none).
    pub name: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// Turns a stream of byte chunks into events.
#[derive(Debug, Default)]
pub struct Decoder {
    buffer: Vec<u8>,
    name: String,
    data: Vec<String>,
}

impl Decoder {
    /// Feeds a chunk and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Event> {
        self.buffer.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        events
    }

    /// Whatever was left unfinished when the stream ended.
    pub fn finish(&mut self) -> Option<Event> {
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(event) = self.line(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.name = value.to_string(),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        if self.data.is_empty() && self.name.is_empty() {
            return None;
        }
        let event = Event {
            name: std::mem::take(&mut self.name),
            data: std::mem::take(&mut self.data).join("\n"),
        };
        Some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let text = b"event: a\ndata: {\"x\":\n\n: comment\r\ndata: 1\ndata: 2\n\n";
        for size in 1..text.len() {
            let mut decoder = Decoder::default();
            let mut events = Vec::new();
            for chunk in text.chunks(size) {
                events.extend(decoder.push(chunk));
            }
            events.extend(decoder.finish());
            assert_eq!(
                events,
                [
                    Event {
                        name: "a".into(),
                        data: "{\"x\":".into()
                    },
                    Event {
                        name: String::new(),
                        data: "1\n2".into()
                    },
                ],
                "chunk size {size}"
            );
        }
    }
}
