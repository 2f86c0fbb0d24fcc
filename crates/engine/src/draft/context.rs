//! Context copies: drafts from the request's own tokens (prompt lookup), and the trait every such proposer shares.

use crate::request::GenerateParams;

/// What a proposer sees of a request.
pub struct DraftRequest<'a> {
    /// The prompt, then the output so far.
    pub tokens: &'a [u32],
    pub prompt_len: usize,
    pub params: &'a GenerateParams,
}

/// A drafter that proposes from a request's tokens alone.
pub trait Proposer: Send {
    /// Up to `max` tokens likely to follow `req.tokens`; empty when it has no guess.
    fn propose(&mut self, req: &DraftRequest<'_>, max: usize) -> Vec<u32>;
}

/// Prompt lookup: the latest earlier occurrence of the last n tokens (longest n first) and what followed it.
#[derive(Clone, Copy, Debug)]
pub struct PromptLookup {
    pub max_ngram: usize,
    pub min_ngram: usize,
}

impl Default for PromptLookup {
    fn default() -> Self {
        PromptLookup {
            max_ngram: 4,
            min_ngram: 2,
        }
    }
}

impl Proposer for PromptLookup {
    fn propose(&mut self, req: &DraftRequest<'_>, max: usize) -> Vec<u32> {
        lookup(req.tokens, self.min_ngram, self.max_ngram, max)
    }
}

/// Up to `max` tokens copied from after the latest earlier match of the last n tokens, n from `max_ngram` down to `min_ngram`; a copy that reaches the end continues with itself (a loop repeats).
pub fn lookup(tokens: &[u32], min_ngram: usize, max_ngram: usize, max: usize) -> Vec<u32> {
    let len = tokens.len();
    for n in (min_ngram.max(1)..=max_ngram).rev() {
        if n >= len || max == 0 {
            continue;
        }
        let tail = &tokens[len - n..];
        let Some(i) = (0..len - n).rev().find(|&i| &tokens[i..i + n] == tail) else {
            continue;
        };
        let from = i + n;
        let mut out = Vec::with_capacity(max);
        while out.len() < max {
            let p = from + out.len();
            out.push(if p < len { tokens[p] } else { out[p - len] });
        }
        return out;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_what_followed_the_latest_longest_match() {
        let t = [1, 2, 3, 9, 1, 2, 3, 7, 8, 5, 2, 3];
        assert_eq!(lookup(&t, 2, 4, 3), vec![7, 8, 5], "the later `2 3` wins");
        assert_eq!(
            lookup(&[5, 1, 2, 3, 4, 6, 2, 3, 4], 2, 3, 2),
            vec![6, 2],
            "three tokens match"
        );
        assert_eq!(lookup(&[1, 2, 3, 4], 2, 4, 3), Vec::<u32>::new(), "no match");
        assert_eq!(lookup(&[1, 2, 3, 1, 2], 2, 4, 0), Vec::<u32>::new());
    }

    #[test]
    fn a_loop_is_continued_past_the_end() {
        assert_eq!(lookup(&[4, 7, 8, 7, 8], 2, 4, 5), vec![7, 8, 7, 8, 7]);
        assert_eq!(lookup(&[3, 3, 3], 2, 4, 4), vec![3, 3, 3, 3]);
    }
}
