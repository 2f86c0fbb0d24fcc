//! Exact drafting: drafters propose tokens after each round, the next round runs them as extra rows of their lane, and verification keeps only what the target would have drawn.

pub mod context;
pub mod dspark;
pub mod mtp;
pub mod verify;

use tensorfold_model::dsv4::batch::SeqSlot;
use tensorfold_model::dsv4::cache::Dsv4Cache;

use crate::request::GenerateParams;
use crate::runner::Runner;
use context::{DraftRequest, PromptLookup, Proposer};
use mtp::MtpLane;

/// How many tokens each kind of drafter may propose for a lane's next round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraftConfig {
    /// Model drafts (V4's chained MTP, V4.1's DSpark block, at most its size); 0 turns the model drafter off.
    pub mtp_drafts: usize,
    /// Context-copy drafts; 0 turns proposers off.
    pub context_drafts: usize,
}

impl Default for DraftConfig {
    fn default() -> Self {
        // MTP drafts are opt-in (`--mtp-drafts N`): on the CPU the extra MTP pass costs more than its accepted tokens save.
        DraftConfig {
            mtp_drafts: 0,
            context_drafts: 4,
        }
    }
}

impl DraftConfig {
    /// No drafts at all (the serial reference for every request).
    pub fn off() -> Self {
        DraftConfig {
            mtp_drafts: 0,
            context_drafts: 0,
        }
    }

    pub fn is_on(&self) -> bool {
        self.mtp_drafts > 0 || self.context_drafts > 0
    }
}

/// A drafting request's part in this round.
pub struct DraftLane<'a> {
    pub seq: SeqSlot,
    /// The prompt, then the output so far.
    pub tokens: Vec<u32>,
    pub prompt_len: usize,
    pub params: &'a GenerateParams,
    pub key: u64,
    /// Positions `start..fed` ran this round and were kept; their streams are the round's rows from `first_row`.
    pub start: usize,
    pub fed: usize,
    pub first_row: usize,
    /// Most drafts its next round may take (0 when it will not decode next).
    pub max_drafts: usize,
}

/// The drafters: context proposers first (in order), then the model's own (MTP layer or DSpark block).
pub struct Drafter {
    pub cfg: DraftConfig,
    proposers: Vec<Box<dyn Proposer>>,
}

impl Drafter {
    pub fn new(cfg: DraftConfig) -> Drafter {
        Drafter {
            cfg,
            proposers: vec![Box::new(PromptLookup::default())],
        }
    }

    /// Puts `p` before the other context proposers.
    pub fn add_proposer(&mut self, p: Box<dyn Proposer>) {
        self.proposers.insert(0, p);
    }

    /// Brings each lane's MTP state up to the rows just kept (or drafts DSpark blocks) and proposes every lane's drafts for its next round.
    pub fn run(
        &mut self,
        runner: &dyn Runner,
        cache: &mut Dsv4Cache,
        lanes: &[DraftLane<'_>],
        streams: &[f32],
    ) -> Result<Vec<Vec<u32>>, String> {
        let mut drafts: Vec<Vec<u32>> = lanes.iter().map(|l| self.propose(l)).collect();
        if self.cfg.mtp_drafts > 0 && runner.block_drafts() > 0 {
            dspark::run(runner, cache, lanes, &mut drafts, self.cfg.mtp_drafts)?;
            return Ok(drafts);
        }
        let geometry = runner.geometry();
        if self.cfg.mtp_drafts == 0 || geometry.num_mtp_layers() == 0 {
            return Ok(drafts);
        }
        let width = runner.stream_width();
        let mut work = Vec::new();
        let mut owner = Vec::new();
        for (i, l) in lanes.iter().enumerate() {
            let seq = cache.seqs.get_mut(&l.seq).expect("a running sequence has state");
            let from = seq.mtp_len[0] as usize;
            let synced = if l.start == 0 {
                from == 0
            } else {
                from + 1 == l.start && seq.mtp_stream.len() == width
            };
            if !synced {
                continue;
            }
            let row = |p: usize| &streams[(l.first_row + p - l.start) * width..(l.first_row + p - l.start + 1) * width];
            let catch_up = l.fed - 1 - from;
            let mut propose = if drafts[i].is_empty() {
                l.max_drafts.min(self.cfg.mtp_drafts)
            } else {
                0
            };
            if catch_up + propose > geometry.sliding_window() {
                propose = 0;
            }
            let rows = catch_up + (propose > 0) as usize;
            let mut lane_streams = Vec::with_capacity(rows * width);
            for p in from..from + rows {
                lane_streams.extend_from_slice(if p < l.start { &seq.mtp_stream[..] } else { row(p) });
            }
            seq.mtp_stream = row(l.fed - 1).to_vec();
            if rows == 0 {
                continue;
            }
            work.push(MtpLane {
                seq: l.seq,
                from,
                next: l.tokens[from + 1..from + 1 + rows].to_vec(),
                streams: lane_streams,
                propose,
                sampling: l.params.sampling,
                key: l.key,
            });
            owner.push(i);
        }
        let mtp_drafts = mtp::run(runner, cache, &work)?;
        for (i, d) in owner.into_iter().zip(mtp_drafts) {
            if !d.is_empty() {
                drafts[i] = d;
            }
        }
        Ok(drafts)
    }

    /// The first context proposer's guess, cut to what the lane may take.
    fn propose(&mut self, l: &DraftLane<'_>) -> Vec<u32> {
        let max = l.max_drafts.min(self.cfg.context_drafts);
        if max == 0 {
            return Vec::new();
        }
        let req = DraftRequest {
            tokens: &l.tokens,
            prompt_len: l.prompt_len,
            params: l.params,
        };
        for p in &mut self.proposers {
            let mut d = p.propose(&req, max);
            d.truncate(max);
            if !d.is_empty() {
                return d;
            }
        }
        Vec::new()
    }
}
