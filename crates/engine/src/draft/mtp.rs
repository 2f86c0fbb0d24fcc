//! MTP drafts: the MTP layer follows each sequence one position behind the main layers and chains its own guesses.

use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::{Dsv4Cache, Stage};

use crate::runner::Runner;
use crate::sampler::{SamplingParams, sample};

/// One sequence's MTP work this round.
pub struct MtpLane {
    pub seq: SeqSlot,
    /// The MTP layer's position (the main layers' minus one: it needs the token after its row).
    pub from: usize,
    /// Tokens after positions `from..`: the known ones to catch up on, then the last sampled one when proposing.
    pub next: Vec<u32>,
    /// Main-layer streams of positions `from..`, one row per entry of `next`.
    pub streams: Vec<f32>,
    /// Drafts to chain after the known tokens (0: catch up only).
    pub propose: usize,
    pub sampling: SamplingParams,
    pub key: u64,
}

impl MtpLane {
    /// Rows that stay in the MTP layer's state: those whose next token has been fed to the main layers.
    fn kept(&self) -> usize {
        self.next.len() - (self.propose > 0) as usize
    }
}

/// Runs every lane's catch-up rows and proposal row in one pass, then one pass per chained draft; proposals keyed like the target's draws at the positions they guess.
pub fn run(runner: &dyn Runner, cache: &mut Dsv4Cache, lanes: &[MtpLane]) -> Result<Vec<Vec<u32>>, String> {
    let geometry = runner.geometry();
    let mut batch = Batch::default();
    let (mut streams, mut logit_rows, mut last_row) = (Vec::new(), Vec::new(), Vec::new());
    for l in lanes {
        if l.propose > 0 {
            let seq = cache.seqs.get_mut(&l.seq).expect("a running sequence has state");
            seq.mark(Stage::Mtp(0), l.next.len() + l.propose - 1, geometry);
        }
        batch.push_seq(l.seq, l.from as u32, &l.next);
        streams.extend_from_slice(&l.streams);
        last_row.push(batch.len().wrapping_sub(1));
        if l.propose > 0 {
            logit_rows.push(batch.len() - 1);
        }
    }
    if batch.is_empty() {
        return Ok(vec![Vec::new(); lanes.len()]);
    }
    let mut out = runner.forward_mtp(&batch, &streams, cache, &logit_rows)?;
    let (vocab, width) = (runner.vocab_size(), runner.stream_width());
    let mut drafts: Vec<Vec<u32>> = vec![Vec::new(); lanes.len()];
    // Lanes still chaining and the row of their last output in `out`; their logits come in this order.
    let mut active: Vec<(usize, usize)> = (0..lanes.len())
        .filter(|&i| lanes[i].propose > 0)
        .map(|i| (i, last_row[i]))
        .collect();
    while !active.is_empty() {
        let (mut next, mut next_streams, mut still) = (Batch::default(), Vec::new(), Vec::new());
        for (k, &(i, row)) in active.iter().enumerate() {
            let l = &lanes[i];
            let position = l.from + l.next.len() + 1 + drafts[i].len();
            let token = sample(
                &out.logits[k * vocab..(k + 1) * vocab],
                &l.sampling,
                l.key,
                position as u64,
            );
            drafts[i].push(token);
            if drafts[i].len() < l.propose {
                still.push((i, next.len()));
                next.push_seq(l.seq, (position - 1) as u32, &[token]);
                next_streams.extend_from_slice(&out.streams[row * width..(row + 1) * width]);
            }
        }
        if !still.is_empty() {
            let all: Vec<usize> = (0..next.len()).collect();
            out = runner.forward_mtp(&next, &next_streams, cache, &all)?;
        }
        active = still;
    }
    for l in lanes.iter().filter(|l| l.propose > 0) {
        let seq = cache.seqs.get_mut(&l.seq).expect("a running sequence has state");
        seq.settle((l.from + l.kept()) as u32, geometry);
    }
    Ok(drafts)
}
