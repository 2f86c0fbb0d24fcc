//! Collectives over f32 buffers between the ranks serving one model, and ranks as threads of one process.

use std::sync::{Arc, Condvar, Mutex};

/// What ranks exchange: every collective is entered by every rank in the same order.
pub trait Collective: Send + Sync {
    fn rank(&self) -> usize;
    fn ranks(&self) -> usize;
    /// Every rank's buffer, in rank order (lengths may differ between ranks).
    fn all_gather(&self, mine: &[f32]) -> Vec<Vec<f32>>;
    /// Every rank's buffer in rank order on rank `root`, `None` elsewhere (a gather whose result only `root` needs).
    fn gather(&self, mine: &[f32], root: usize) -> Option<Vec<Vec<f32>>> {
        let all = self.all_gather(mine);
        (self.rank() == root).then_some(all)
    }
    /// Replaces `buf` on every rank with rank `root`'s.
    fn broadcast(&self, buf: &mut Vec<f32>, root: usize);
    /// Element-wise sum over the ranks' equal-length buffers (the plain all-reduce a gather is measured against).
    fn all_reduce_sum(&self, buf: &mut [f32]);
    /// Returns once every rank has entered it.
    fn barrier(&self);
    /// Why the collective stopped working (a rank left), once it has; every later call then fails with it.
    fn broken(&self) -> Option<String> {
        None
    }
}

#[derive(Default)]
struct Round {
    slots: Vec<Option<Vec<f32>>>,
    arrived: usize,
    left: usize,
    generation: u64,
    result: Option<Arc<Vec<Vec<f32>>>>,
}

struct Shared {
    ranks: usize,
    round: Mutex<Round>,
    turn: Condvar,
}

/// One rank's end of an in-process collective: ranks are threads sharing memory.
#[derive(Clone)]
pub struct ThreadCollective {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadCollective {
    /// The `ranks` ends of one collective, rank 0 first.
    pub fn group(ranks: usize) -> Vec<ThreadCollective> {
        let shared = Arc::new(Shared {
            ranks,
            round: Mutex::new(Round {
                slots: vec![None; ranks],
                ..Round::default()
            }),
            turn: Condvar::new(),
        });
        (0..ranks)
            .map(|rank| ThreadCollective {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    /// Deposits `mine` and returns every rank's deposit of this round, in rank order.
    fn exchange(&self, mine: Vec<f32>) -> Arc<Vec<Vec<f32>>> {
        let s = &self.shared;
        let mut r = s.round.lock().expect("collective lock");
        while r.result.is_some() {
            r = s.turn.wait(r).expect("collective lock");
        }
        r.slots[self.rank] = Some(mine);
        r.arrived += 1;
        if r.arrived == s.ranks {
            let all = r.slots.iter_mut().map(|b| b.take().unwrap_or_default()).collect();
            r.result = Some(Arc::new(all));
            r.arrived = 0;
            r.generation += 1;
            s.turn.notify_all();
        } else {
            let g = r.generation;
            while r.generation == g {
                r = s.turn.wait(r).expect("collective lock");
            }
        }
        let out = r.result.clone().expect("a finished round has a result");
        r.left += 1;
        if r.left == s.ranks {
            r.left = 0;
            r.result = None;
            s.turn.notify_all();
        }
        out
    }
}

impl Collective for ThreadCollective {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.shared.ranks
    }

    fn all_gather(&self, mine: &[f32]) -> Vec<Vec<f32>> {
        self.exchange(mine.to_vec()).to_vec()
    }

    fn broadcast(&self, buf: &mut Vec<f32>, root: usize) {
        let mine = if self.rank == root {
            std::mem::take(buf)
        } else {
            Vec::new()
        };
        *buf = self.exchange(mine)[root].clone();
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) {
        let all = self.exchange(buf.to_vec());
        buf.fill(0.0);
        for part in all.iter() {
            buf.iter_mut().zip(part).for_each(|(a, b)| *a += b);
        }
    }

    fn barrier(&self) {
        self.exchange(Vec::new());
    }
}

/// One round of all-gather, broadcast and all-reduce as rank `c.rank()` sees them (lengths and first values); every transport's test compares these across ranks.
#[cfg(test)]
pub(crate) fn exercise(c: &dyn Collective, round: usize) -> Vec<Vec<(usize, f32)>> {
    let mine = vec![(c.rank() * 100 + round) as f32; c.rank() + 1];
    let all = c.all_gather(&mine);
    let mut seen = vec![all.iter().map(|b| (b.len(), b[0])).collect::<Vec<_>>()];
    let mut b = vec![c.rank() as f32 + round as f32];
    c.broadcast(&mut b, round % c.ranks());
    seen.push(vec![(b.len(), b[0])]);
    let mut s = vec![c.rank() as f32, 1.0];
    c.all_reduce_sum(&mut s);
    seen.push(vec![(s.len(), s[0] + 10.0 * s[1])]);
    seen
}

/// Checks what three ranks saw of `exercise`: the same on each, and round 0's values.
#[cfg(test)]
pub(crate) fn agreed(out: &[Vec<Vec<(usize, f32)>>]) {
    assert_eq!(out[0], out[1]);
    assert_eq!(out[0], out[2]);
    assert_eq!(out[0][0], vec![(1, 0.0), (2, 100.0), (3, 200.0)]);
    assert_eq!(out[0][1], vec![(1, 0.0)]);
    assert_eq!(out[0][2], vec![(2, 3.0 + 30.0)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_ranks<T: Send + 'static>(n: usize, f: impl Fn(ThreadCollective) -> T + Send + Sync + 'static) -> Vec<T> {
        let f = Arc::new(f);
        let handles: Vec<_> = ThreadCollective::group(n)
            .into_iter()
            .map(|c| {
                let f = f.clone();
                std::thread::spawn(move || f(c))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
    }

    #[test]
    fn gather_broadcast_and_reduce_agree_on_every_rank() {
        let out = on_ranks(3, |c| {
            let mut seen = Vec::new();
            for round in 0..50 {
                seen.extend(exercise(&c, round));
                c.barrier();
            }
            seen
        });
        agreed(&out);
    }
}
