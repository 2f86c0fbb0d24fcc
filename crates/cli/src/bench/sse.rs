//! Server-sent events split from a byte stream that may break anywhere, even inside a line ending or a character.

/// Accumulates bytes and yields each complete event's data (its `data:` lines joined by newlines).
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: Option<String>,
    /// The last line ended in CR at the end of a push, so a LF that opens the next push belongs to it.
    skip_lf: bool,
}

impl SseParser {
    /// Feeds `bytes`; returns the data of every event completed by them, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let skip = self.skip_lf && bytes.first() == Some(&b'\n');
        if !bytes.is_empty() {
            self.skip_lf = false;
        }
        self.buf.extend_from_slice(&bytes[usize::from(skip)..]);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(off) = self.buf[start..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = start + off;
            let next = match self.buf.get(end..end + 2) {
                Some(b"\r\n") => end + 2,
                _ => end + 1,
            };
            self.skip_lf = self.buf[end] == b'\r' && next == self.buf.len();
            let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
            start = next;
            if line.is_empty() {
                events.extend(self.data.take());
                continue;
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line.as_str(), ""),
            };
            if field == "data" {
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
        }
        self.buf.drain(..start);
        events
    }
}

#[cfg(test)]
mod tests {
    use super::SseParser;

    const STREAM: &str = ": keep-alive\n\ndata: {\"a\":\"é\"}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata:[DONE]\r\r";

    fn all_at_once() -> Vec<String> {
        SseParser::default().push(STREAM.as_bytes())
    }

    #[test]
    fn events_whole() {
        assert_eq!(all_at_once(), ["{\"a\":\"é\"}", "one\ntwo", "[DONE]"]);
    }

    #[test]
    fn every_split_gives_the_same_events() {
        let bytes = STREAM.as_bytes();
        for cut in 0..=bytes.len() {
            let mut p = SseParser::default();
            let mut got = p.push(&bytes[..cut]);
            got.extend(p.push(&bytes[cut..]));
            assert_eq!(got, all_at_once(), "split at byte {cut}");
        }
        let mut p = SseParser::default();
        let got: Vec<String> = bytes.iter().flat_map(|b| p.push(&[*b])).collect();
        assert_eq!(got, all_at_once(), "one byte at a time");
    }

    #[test]
    fn a_crlf_split_after_the_cr_is_one_line_end() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: x\r").is_empty());
        assert!(p.push(b"\n").is_empty());
        assert_eq!(p.push(b"\n"), ["x"]);
    }

    #[test]
    fn an_unfinished_event_is_held() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: half").is_empty());
        assert_eq!(p.push(b"\n\n"), ["half"]);
    }
}
