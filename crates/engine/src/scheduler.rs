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
    /// Draft tokens it could run after its last token, granted from budget the round leaves over.
    pub drafts: usize,
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
    for (id, n) in &mut out {
        let l = lanes.iter().find(|l| l.id == *id).expect("planned lane");
        if *n == l.tokens_left {
            let extra = l.drafts.min(left);
            *n += extra;
            left -= extra;
        }
    }
    out
}

/// The running background request to send back to waiting: the most recently admitted (the least work to replay).
pub fn preemption_victim(running_background: impl IntoIterator<Item = (RequestId, u64)>) -> Option<RequestId> {
    running_background
        .into_iter()
        .max_by_key(|&(id, admitted_at)| (admitted_at, id))
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(id: u64, tokens_left: usize, decoding: bool, background: bool, waited: u32) -> Lane {
        Lane {
            id: RequestId(id),
            tokens_left,
            max_chunk: usize::MAX,
            drafts: 0,
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
    fn drafts_take_only_the_budget_left_over() {
        let mut a = lane(1, 1, true, false, 0);
        a.drafts = 4;
        let mut b = lane(2, 1, true, false, 0);
        b.drafts = 3;
        let c = lane(3, 10, false, false, 0);
        assert_eq!(
            plan(&[a, b, c], 16, 8),
            vec![(RequestId(1), 5), (RequestId(2), 1), (RequestId(3), 10)]
        );
        assert_eq!(
            plan(&[a, b, c], 11, 8),
            vec![(RequestId(1), 1), (RequestId(2), 1), (RequestId(3), 9)]
        );
        assert_eq!(
            plan(&[a, b], 100, 1),
            vec![(RequestId(1), 5)],
            "drafts never add a lane"
        );
    }

    #[test]
    fn chunks_respect_their_cap() {
        let mut l = lane(1, 300, false, false, 0);
        l.max_chunk = 128;
        assert_eq!(plan(&[l], 1000, 8), vec![(RequestId(1), 128)]);
    }

    /// Runs `rounds` rounds the way the engine does, a fresh short prompt arriving each round; returns the rounds in which request 1 ran.
    fn simulate(mut lanes: Vec<Lane>, budget: usize, rounds: u64) -> Vec<u64> {
        let mut ran = Vec::new();
        for round in 0..rounds {
            lanes.push(lane(100 + round, 30, false, false, 0));
            let planned = plan(&lanes, budget, 8);
            for l in &mut lanes {
                match planned.iter().find(|(id, _)| *id == l.id) {
                    Some(&(_, n)) => {
                        l.tokens_left -= n;
                        l.waited = 0;
                    }
                    None => l.waited += 1,
                }
            }
            if planned.iter().any(|(id, _)| *id == RequestId(1)) {
                ran.push(round);
            }
            lanes.retain(|l| l.tokens_left > 0);
        }
        ran
    }

    #[test]
    fn a_long_prompt_behind_a_stream_of_short_ones_runs_every_starve_rounds() {
        let ran = simulate(vec![lane(1, 300, false, false, 0)], 30, 20);
        assert_eq!(ran.first(), Some(&(STARVE_ROUNDS as u64)), "{ran:?}");
        for w in ran.windows(2) {
            assert!(w[1] - w[0] <= STARVE_ROUNDS as u64 + 1, "{ran:?}");
        }
    }

    #[test]
    fn background_yields_even_when_starved_and_runs_in_leftover_budget() {
        let bg = lane(1, 1, true, true, 50);
        assert_eq!(simulate(vec![bg], 30, 10), Vec::<u64>::new());
        assert_eq!(simulate(vec![bg], 31, 1), vec![0]);
        let fg = lane(2, 1, true, false, 0);
        assert_eq!(plan(&[bg, fg], 8, 1), vec![(RequestId(2), 1)]);
    }

    #[test]
    fn preemption_takes_the_most_recently_admitted_first() {
        let running = [
            (RequestId(3), 10),
            (RequestId(1), 12),
            (RequestId(2), 12),
            (RequestId(4), 5),
        ];
        assert_eq!(preemption_victim(running), Some(RequestId(2)));
        assert_eq!(preemption_victim(running[..1].to_vec()), Some(RequestId(3)));
        assert_eq!(preemption_victim(Vec::new()), None);
    }
}
