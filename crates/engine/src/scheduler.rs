//! The lane-round scheduler: a round is `{request: token count}`; prompt chunks and decode steps share it.

use crate::request::RequestId;

/// Rounds a prompt may be passed over before it goes next regardless of its length.
pub const STARVE_ROUNDS: u32 = 4;

/// What the scheduler needs to know about a running request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub id: RequestId,
    /// Tokens still to feed before the next sample (1 when decoding).
    pub tokens_left: usize,
    /// Largest chunk this request may take now (a prefix-cache block boundary caps it).
    pub max_chunk: usize,
    pub decoding: bool,
    pub background: bool,
    /// Rounds in a row it was passed over.
    pub waited: u32,
}

/// Picks this round's `{request: token count}` within `budget` tokens and `max_lanes` lanes.
pub fn plan(lanes: &[Lane], budget: usize, max_lanes: usize) -> Vec<(RequestId, usize)> {
    let mut order: Vec<&Lane> = lanes.iter().filter(|l| l.tokens_left > 0).collect();
    order.sort_by_key(|l| (l.background, !l.decoding, l.waited < STARVE_ROUNDS, l.tokens_left, l.id));
    let mut out = Vec::new();
    let mut left = budget;
    for l in order {
        if out.len() == max_lanes || left == 0 {
            break;
        }
        let n = l.tokens_left.min(l.max_chunk).min(left);
        if n > 0 {
            out.push((l.id, n));
            left -= n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(id: u64, tokens_left: usize, decoding: bool, background: bool, waited: u32) -> Lane {
        Lane {
            id: RequestId(id),
            tokens_left,
            max_chunk: usize::MAX,
            decoding,
            background,
            waited,
        }
    }

    #[test]
    fn decodes_first_then_shortest_prompt_within_budget() {
        let lanes = [
            lane(1, 300, false, false, 0),
            lane(2, 1, true, false, 0),
            lane(3, 40, false, false, 0),
        ];
        assert_eq!(
            plan(&lanes, 64, 8),
            vec![(RequestId(2), 1), (RequestId(3), 40), (RequestId(1), 23)]
        );
        assert_eq!(plan(&lanes, 64, 2), vec![(RequestId(2), 1), (RequestId(3), 40)]);
    }

    #[test]
    fn a_starved_prompt_goes_next_and_background_yields() {
        let lanes = [
            lane(1, 300, false, false, STARVE_ROUNDS),
            lane(3, 40, false, false, 0),
            lane(4, 1, true, true, 9),
        ];
        assert_eq!(plan(&lanes, 100, 8), vec![(RequestId(1), 100)]);
        assert_eq!(
            plan(&lanes, 400, 8),
            vec![(RequestId(1), 300), (RequestId(3), 40), (RequestId(4), 1)]
        );
    }

    #[test]
    fn chunks_respect_their_cap() {
        let mut l = lane(1, 300, false, false, 0);
        l.max_chunk = 128;
        assert_eq!(plan(&[l], 1000, 8), vec![(RequestId(1), 128)]);
    }
}
