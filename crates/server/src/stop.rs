//! Stop strings matched across chunk boundaries: text that could still begin a stop string is held back.

/// Holds back the tail of the text that may be the start of a stop string.
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> StopMatcher {
        StopMatcher {
            stops,
            pending: String::new(),
        }
    }

    /// Adds `delta`; returns the text now safe to send and whether a stop string was found (text before it only).
    pub fn push(&mut self, delta: &str) -> (String, bool) {
        self.pending.push_str(delta);
        if let Some(at) = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min() {
            let out = self.pending[..at].to_string();
            self.pending.clear();
            return (out, true);
        }
        let keep = self.held_back();
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        (out, false)
    }

    /// The rest of the text once generation ends without a match.
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// Bytes at the end of `pending` that are a proper prefix of some stop string.
    fn held_back(&self) -> usize {
        let p = &self.pending;
        let mut best = 0;
        for s in &self.stops {
            for (i, _) in p.char_indices() {
                let tail = &p[i..];
                if tail.len() < s.len() && s.starts_with(tail) {
                    best = best.max(tail.len());
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_chunks_and_is_omitted() {
        let mut m = StopMatcher::new(vec!["END".into(), "xyz".into()]);
        assert_eq!(m.push("abc E"), ("abc ".to_string(), false));
        assert_eq!(m.push("N"), (String::new(), false));
        assert_eq!(m.push("Dtail"), (String::new(), true));
    }

    #[test]
    fn releases_a_false_start() {
        let mut m = StopMatcher::new(vec!["END".into()]);
        assert_eq!(m.push("EN"), (String::new(), false));
        assert_eq!(m.push("X"), ("ENX".to_string(), false));
        assert_eq!(m.push("E"), (String::new(), false));
        assert_eq!(m.flush(), "E");
    }
}
