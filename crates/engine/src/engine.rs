//! The step loop: admit, plan a lane round, run it, sample, deliver; every token of every request goes through it.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use tensorfold_model::dsv4::batch::{Batch, SeqSlot};
use tensorfold_model::dsv4::cache::{Boundary, Dsv4Cache, SeqCache, Stage, blocks_for};

use crate::draft::context::Proposer;
use crate::draft::verify::verify;
use crate::draft::{DraftConfig, DraftLane, Drafter};
use crate::pool::{BLOCK_TOKENS, BlockPool};
use crate::prefix;
use crate::request::{Event, FinishReason, GenerateParams, Phase, Priority, RequestId, Sink, Usage};
use crate::reserve::Reservations;
use crate::runner::Runner;
use crate::sampler::{LogitRows, MAX_TOP_LOGPROBS, logprobs, prompt_key};
use crate::scheduler::{Lane, plan, preemption_victim};
use crate::tables;

/// Engine limits.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    /// Tokens per lane round.
    pub token_budget: usize,
    /// Requests per lane round.
    pub max_lanes: usize,
    /// Cache blocks of 128 tokens in the pool (`BlockLayout::blocks_in` sizes it from memory); each running request reserves the blocks of its prompt plus max_tokens, and room for the state it keeps outside them, at admission.
    pub pool_blocks: usize,
    /// Keep prompt blocks for later prompts that share them (free ones are reused least recently used first).
    pub prefix_cache: bool,
    /// Drafts per lane and round; `DraftConfig::off()` runs every request as its serial reference.
    pub drafts: DraftConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            token_budget: 256,
            max_lanes: 64,
            pool_blocks: 8192,
            prefix_cache: true,
            drafts: DraftConfig::default(),
        }
    }
}

/// Counters for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub running: usize,
    pub waiting: usize,
    /// Blocks in the pool.
    pub blocks_total: usize,
    /// Blocks some running request holds.
    pub blocks_used: usize,
    /// Free blocks kept for prefix reuse.
    pub blocks_cached: usize,
    /// Blocks the running requests reserved at admission (at least those they hold, and `blocks_state`).
    pub blocks_reserved: usize,
    /// Blocks held out of the pool so that its memory covers the most state running requests can keep outside it.
    pub blocks_state: usize,
    /// Bytes of one block: all of a sequence's state for its tokens.
    pub block_bytes: usize,
    /// Bytes the running sequences hold outside the pool (projections of unfinished compression windows, the MTP stream, rollback rows).
    pub seq_state_bytes: usize,
    /// Prefix blocks reused for other data because the pool ran short.
    pub evictions: u64,
    pub rounds: u64,
    pub prompt_tokens: u64,
    pub generated_tokens: u64,
    pub cached_tokens: u64,
    pub preemptions: u64,
    /// Draft tokens run through the target, and those it kept.
    pub drafted_tokens: u64,
    pub accepted_tokens: u64,
    /// Rounds whose logit rows came back as greedy picks (every request in them greedy without log probabilities).
    pub picked_rounds: u64,
    /// Whether a rank sharing the passes stopped, so that no pass can run (the log and request errors say which).
    pub ranks_down: bool,
}

struct Req {
    prompt: Vec<u32>,
    params: GenerateParams,
    key: u64,
    output: Vec<u32>,
    delivered: usize,
    fed: usize,
    phase: Phase,
    sink: Sink,
    waited: u32,
    usage: Usage,
    seq: SeqSlot,
    admitted_at: u64,
    /// Proposed tokens after the last sampled one, for the next round.
    drafts: Vec<u32>,
    /// The most bytes this request's sequence holds outside its blocks.
    state_bytes: usize,
}

impl Req {
    fn need(&self) -> usize {
        self.prompt.len() + self.params.max_tokens
    }

    fn need_blocks(&self) -> usize {
        blocks_for(self.need())
    }

    fn token(&self, pos: usize) -> u32 {
        if pos < self.prompt.len() {
            self.prompt[pos]
        } else {
            self.output[pos - self.prompt.len()]
        }
    }

    fn total(&self) -> usize {
        self.prompt.len() + self.output.len()
    }

    /// Whether the next round feeds only the last sampled token (so drafts may follow it).
    fn decode_ready(&self) -> bool {
        self.fed + 1 == self.total() && !self.output.is_empty()
    }
}

/// A lane that ran this round and is still running: positions `start..fed` were kept, from batch row `first_row`.
struct Ran {
    id: RequestId,
    start: usize,
    first_row: usize,
}

/// Owns the model, every request and every sequence's state.
pub struct Engine {
    runner: Box<dyn Runner>,
    cfg: EngineConfig,
    reqs: BTreeMap<RequestId, Req>,
    cache: Dsv4Cache,
    /// The cache blocks; a registered block holds all a sequence resumes from after it, and its payload says whether that includes the MTP layer's state.
    pool: BlockPool<Boundary>,
    drafter: Drafter,
    next_id: u64,
    /// Blocks reserved by running requests.
    reserved: Reservations,
    stats: EngineStats,
}

/// SHA-256 over token ids as little-endian u32, in hex.
pub fn token_sha(tokens: &[u32]) -> String {
    let mut h = Sha256::new();
    for t in tokens {
        h.update(t.to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A byte count for people: MiB or GiB with one decimal, else KiB.
fn size(bytes: u64) -> String {
    let (kib, mib, gib) = (1u64 << 10, 1u64 << 20, 1u64 << 30);
    match bytes {
        b if b >= gib => format!("{:.1} GiB", b as f64 / gib as f64),
        b if b >= mib => format!("{:.1} MiB", b as f64 / mib as f64),
        b => format!("{} KiB", b.div_ceil(kib)),
    }
}

impl Engine {
    pub fn new(runner: Box<dyn Runner>, cfg: EngineConfig) -> Engine {
        Engine {
            reserved: Reservations::new(runner.layout().bytes()),
            runner,
            cfg,
            reqs: BTreeMap::new(),
            cache: Dsv4Cache::managed(),
            pool: BlockPool::new(cfg.pool_blocks),
            drafter: Drafter::new(cfg.drafts),
            next_id: 1,
            stats: EngineStats::default(),
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.runner.vocab_size()
    }

    /// Consults `p` for drafts before the built-in context proposer.
    pub fn add_proposer(&mut self, p: Box<dyn Proposer>) {
        self.drafter.add_proposer(p);
    }

    /// Accepts a request or says why it can never run.
    pub fn submit(&mut self, prompt: Vec<u32>, params: GenerateParams, sink: Sink) -> Result<RequestId, String> {
        params.sampling.validate()?;
        let vocab = self.runner.vocab_size();
        if prompt.is_empty() {
            return Err("the prompt is empty; send at least one token".into());
        }
        if let Some(t) = prompt.iter().find(|&&t| t as usize >= vocab) {
            return Err(format!("token id {t} is outside the vocabulary (0..{vocab})"));
        }
        if params.logprobs.is_some_and(|n| n > MAX_TOP_LOGPROBS) {
            return Err(format!(
                "at most {MAX_TOP_LOGPROBS} top logprobs per token can be asked for"
            ));
        }
        if params.max_tokens == 0 {
            return Err("max_tokens must be at least 1".into());
        }
        let block_bytes = self.runner.layout().bytes();
        if self.cfg.pool_blocks == 0 {
            return Err(format!(
                "the cache pool holds no block; one block of {BLOCK_TOKENS} tokens takes {}, give the KV cache at least that",
                size(block_bytes as u64)
            ));
        }
        let need = prompt.len() + params.max_tokens;
        let pool_tokens = self.pool_tokens();
        let limit = self.runner.max_context().min(pool_tokens);
        if need > limit {
            let room = limit.saturating_sub(prompt.len());
            let pool = if limit == pool_tokens {
                let state = self.cfg.pool_blocks - pool_tokens / BLOCK_TOKENS;
                format!(
                    " (the cache pool holds {} blocks of {BLOCK_TOKENS} tokens in {}; {state} of them cover the state a request keeps outside its blocks, leaving {pool_tokens} tokens)",
                    self.cfg.pool_blocks,
                    size(self.cfg.pool_blocks as u64 * block_bytes as u64)
                )
            } else {
                String::new()
            };
            return Err(if room == 0 {
                format!(
                    "the prompt has {} tokens but at most {} fit{pool}; shorten the prompt",
                    prompt.len(),
                    limit.saturating_sub(1)
                )
            } else {
                format!(
                    "the prompt ({} tokens) plus max_tokens ({}) needs {need} tokens but at most {limit} fit{pool}; lower max_tokens to {room} or shorten the prompt",
                    prompt.len(),
                    params.max_tokens
                )
            });
        }
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let key = params.seed.unwrap_or_else(|| prompt_key(&prompt));
        let state_bytes = self.state_bytes(need);
        let usage = Usage {
            prompt_tokens: prompt.len(),
            ..Default::default()
        };
        let req = Req {
            prompt,
            params,
            key,
            output: Vec::new(),
            delivered: 0,
            fed: 0,
            phase: Phase::Waiting,
            sink,
            waited: 0,
            usage,
            seq: SeqSlot(id.0 as u32),
            admitted_at: 0,
            drafts: Vec::new(),
            state_bytes,
        };
        self.reqs.insert(id, req);
        Ok(id)
    }

    /// The most bytes a sequence of `tokens` positions holds outside its blocks.
    fn state_bytes(&self, tokens: usize) -> usize {
        SeqCache::max_floats(self.runner.geometry(), tokens) * size_of::<f32>()
    }

    /// The most tokens one request can hold in the pool, beside the blocks that cover its state.
    fn pool_tokens(&self) -> usize {
        let blocks = self.cfg.pool_blocks;
        let tokens = blocks.saturating_mul(BLOCK_TOKENS);
        let state = self.reserved.state_blocks(self.state_bytes(tokens));
        blocks.saturating_sub(state).saturating_mul(BLOCK_TOKENS)
    }

    /// Ends a request early with `finish_reason` abort.
    pub fn abort(&mut self, id: RequestId) {
        self.finish(id, FinishReason::Abort);
    }

    pub fn has_work(&self) -> bool {
        !self.reqs.is_empty()
    }

    pub fn stats(&self) -> EngineStats {
        let running = self.reqs.values().filter(|r| r.phase == Phase::Running).count();
        EngineStats {
            running,
            waiting: self.reqs.len() - running,
            blocks_total: self.pool.total(),
            blocks_used: self.pool.used() - self.reserved.held(),
            blocks_cached: self.pool.cached(),
            blocks_reserved: self.reserved.total(),
            blocks_state: self.reserved.held(),
            block_bytes: self.runner.layout().bytes(),
            seq_state_bytes: self.cache.seqs.values().map(SeqCache::floats).sum::<usize>() * size_of::<f32>(),
            evictions: self.pool.evictions(),
            ranks_down: self.runner.down().is_some(),
            ..self.stats
        }
    }

    fn admit(&mut self) {
        let mut waiting: Vec<(bool, RequestId)> = self
            .reqs
            .iter()
            .filter(|(_, r)| r.phase != Phase::Running)
            .map(|(id, r)| (r.params.priority == Priority::Background, *id))
            .collect();
        waiting.sort();
        // Foreground requests are admitted in arrival order, so a large one is never passed over forever.
        let mut blocked = false;
        for (background, id) in waiting {
            if blocked && !background {
                continue;
            }
            let (need, state) = (self.reqs[&id].need_blocks(), self.reqs[&id].state_bytes);
            let total = self.pool.total();
            // Preempting is wasted work unless sending every background request back would make room.
            let (bg_need, bg_state) = self.background_reserved();
            if !background && self.reserved.without(bg_need, bg_state).with(need, state) <= total {
                while self.reserved.with(need, state) > total && self.preempt_background() {}
            }
            if self.reserved.with(need, state) > total {
                blocked |= !background;
                continue;
            }
            self.reserved.add(&mut self.pool, &mut self.cache.store, need, state);
            let round = self.stats.rounds;
            let r = self.reqs.get_mut(&id).expect("waiting request");
            r.phase = Phase::Running;
            r.admitted_at = round;
            r.fed = 0;
            r.usage.cached_tokens = 0;
            let hit = self
                .cfg
                .prefix_cache
                .then(|| prefix::lookup(&self.pool, &r.prompt))
                .flatten();
            if let Some((blocks, &boundary)) = hit {
                // The hit shares the prefix's blocks, which hold everything the sequence resumes from.
                let len = blocks.len() * BLOCK_TOKENS;
                blocks.iter().for_each(|&b| self.pool.retain(b));
                let (config, layout) = (self.runner.geometry(), self.runner.layout());
                self.cache.resume(r.seq, blocks, boundary, config, layout);
                r.fed = len;
                r.usage.cached_tokens = len;
                self.stats.cached_tokens += len as u64;
            }
        }
    }

    /// Blocks and state bytes reserved by running background requests.
    fn background_reserved(&self) -> (usize, usize) {
        self.reqs
            .values()
            .filter(|r| r.phase == Phase::Running && r.params.priority == Priority::Background)
            .fold((0, 0), |(n, s), r| (n + r.need_blocks(), s + r.state_bytes))
    }

    /// Sends the most recently admitted background request back to waiting; false when there is none.
    fn preempt_background(&mut self) -> bool {
        let running_background = self
            .reqs
            .iter()
            .filter(|(_, r)| r.phase == Phase::Running && r.params.priority == Priority::Background)
            .map(|(id, r)| (*id, r.admitted_at));
        let Some(id) = preemption_victim(running_background) else {
            return false;
        };
        let r = self.reqs.get_mut(&id).expect("victim");
        r.phase = Phase::Preempted;
        r.fed = 0;
        r.drafts.clear();
        r.usage.preemptions += 1;
        let (need, state) = (r.need_blocks(), r.state_bytes);
        tables::free_seq(&mut self.pool, &mut self.cache, r.seq);
        self.reserved.remove(&mut self.pool, &mut self.cache.store, need, state);
        self.stats.preemptions += 1;
        true
    }

    fn lanes(&self) -> Vec<Lane> {
        let prefix_on = self.cfg.prefix_cache;
        self.reqs
            .iter()
            .filter(|(_, r)| r.phase == Phase::Running)
            .map(|(&id, r)| {
                let in_prompt = r.fed < r.prompt.len();
                let max_chunk = if in_prompt && prefix_on {
                    BLOCK_TOKENS - r.fed % BLOCK_TOKENS
                } else {
                    usize::MAX
                };
                Lane {
                    id,
                    tokens_left: r.total() - r.fed,
                    max_chunk,
                    drafts: if r.decode_ready() { r.drafts.len() } else { 0 },
                    decoding: !in_prompt,
                    background: r.params.priority == Priority::Background,
                    waited: r.waited,
                }
            })
            .collect()
    }

    /// Runs one lane round; false when there was nothing to run.
    pub fn step(&mut self) -> bool {
        self.admit();
        let lanes = self.lanes();
        let round = plan(&lanes, self.cfg.token_budget, self.cfg.max_lanes);
        if round.is_empty() {
            return false;
        }
        self.stats.rounds += 1;
        for lane in &lanes {
            let r = self.reqs.get_mut(&lane.id).expect("lane request");
            r.waited = if round.iter().any(|(id, _)| *id == lane.id) {
                0
            } else {
                r.waited + 1
            };
        }
        let (batch, logit_rows) = self.lay_out(&round);
        // A round whose every request draws greedily without log probabilities needs only each row's pick.
        let picks = round.iter().all(|(id, _)| {
            let p = &self.reqs[id].params;
            p.sampling.temperature <= 0.0 && p.logprobs.is_none()
        });
        self.stats.picked_rounds += u64::from(picks);
        let out = match self.runner.forward(&batch, &mut self.cache, &logit_rows, picks) {
            Ok(out) => out,
            Err(e) => {
                for (id, _) in round {
                    self.fail(id, format!("the forward pass failed: {e}"));
                }
                return true;
            }
        };
        let vocab = self.runner.vocab_size();
        let (mut next, mut first_row, mut ran) = (0, 0, Vec::new());
        for (id, n) in round {
            let r = &self.reqs[&id];
            let start = r.fed;
            let with_logits = (r.fed..r.fed + n).filter(|&p| p + 1 >= r.prompt.len()).count();
            let rows = match picks {
                true => LogitRows::Picks(&out.picks[next..next + with_logits]),
                false => LogitRows::Logits(&out.logits[next * vocab..(next + with_logits) * vocab], vocab),
            };
            next += with_logits;
            if self.after_rows(id, n, rows) {
                ran.push(Ran { id, start, first_row });
            }
            first_row += n;
        }
        self.draft(&ran, &out.streams);
        self.snapshot(&ran);
        true
    }

    /// The round's batch and the rows that need logits; a lane's drafts follow its known tokens under a mark.
    fn lay_out(&mut self, round: &[(RequestId, usize)]) -> (Batch, Vec<usize>) {
        let mut batch = Batch::default();
        let mut logit_rows = Vec::new();
        for &(id, n) in round {
            let r = &self.reqs[&id];
            let known = n.min(r.total() - r.fed);
            let mut tokens: Vec<u32> = (r.fed..r.fed + known).map(|p| r.token(p)).collect();
            tokens.extend_from_slice(&r.drafts[..n - known]);
            let first_row = batch.len();
            for (i, pos) in (r.fed..r.fed + n).enumerate() {
                if pos + 1 >= r.prompt.len() {
                    logit_rows.push(first_row + i);
                }
            }
            batch.push_seq(r.seq, r.fed as u32, &tokens);
            let (seq, from) = (r.seq, r.fed);
            tables::give_blocks(&mut self.pool, &mut self.cache, seq, from, from + n);
            if n > known {
                let (config, layout) = (self.runner.geometry(), self.runner.layout());
                self.cache.mark(seq, Stage::Main, n, config, layout);
            }
        }
        (batch, logit_rows)
    }

    /// Advances request `id` by the `n` rows just run (`rows`: the logit rows, or picks, of those at or past the prompt's last token): checks replayed tokens, verifies drafts, samples, finishes; false once it has ended.
    fn after_rows(&mut self, id: RequestId, n: usize, rows: LogitRows<'_>) -> bool {
        let r = self.reqs.get_mut(&id).expect("planned request");
        let first = r.fed;
        let known = n.min(r.total() - r.fed);
        let mut drafts = std::mem::take(&mut r.drafts);
        drafts.truncate(n - known);
        r.fed += known;
        self.stats.prompt_tokens += (r.prompt.len().min(r.fed).saturating_sub(first)) as u64;
        let logit_base = first.max(r.prompt.len() - 1);
        for pos in logit_base..r.fed {
            let next = pos + 1;
            let i = pos - logit_base;
            if next < r.total() && next >= r.prompt.len() {
                let again = rows.sample(i, &r.params.sampling, r.key, next as u64);
                if again != r.output[next - r.prompt.len()] {
                    let msg = format!(
                        "replay after preemption drew token {again} at position {next}, {} was delivered",
                        r.output[next - r.prompt.len()]
                    );
                    self.fail(id, msg);
                    return false;
                }
            }
        }
        if r.fed < r.total() {
            return true;
        }
        let last = r.fed - 1 - logit_base;
        let tokens = verify(rows.from(last), &drafts, &r.params.sampling, r.key, r.total());
        r.usage.drafted += drafts.len();
        self.stats.drafted_tokens += drafts.len() as u64;
        for (j, &token) in tokens.iter().enumerate() {
            if drafts.get(j) == Some(&token) {
                r.fed += 1;
                r.usage.accepted += 1;
                self.stats.accepted_tokens += 1;
            }
            let pos = r.total();
            r.output.push(token);
            self.stats.generated_tokens += 1;
            if r.output.len() > r.delivered {
                r.delivered = r.output.len();
                let row = rows.logits(last + j);
                let logprobs = r
                    .params
                    .logprobs
                    .and_then(|n| row.map(|row| Box::new(logprobs(row, token, n))));
                (r.sink)(Event::Token {
                    id: token,
                    position: pos as u32,
                    logprobs,
                });
            }
            let stop = !r.params.ignore_eos && r.params.stop_token_ids.contains(&token);
            if stop || r.output.len() >= r.params.max_tokens {
                let reason = if stop { FinishReason::Stop } else { FinishReason::Length };
                self.finish(id, reason);
                return false;
            }
        }
        if !drafts.is_empty() {
            let (config, layout) = (self.runner.geometry(), self.runner.layout());
            self.cache.settle(r.seq, r.fed as u32, config, layout);
        }
        true
    }

    /// Runs the drafters for the lanes that just ran and may draft, keeping their proposals for the next round.
    fn draft(&mut self, ran: &[Ran], streams: &[f32]) {
        if !self.drafter.cfg.is_on() {
            return;
        }
        let window = self.runner.geometry().sliding_window();
        let mtp = match self.runner.geometry().num_mtp_layers() {
            0 => 0,
            _ => self.drafter.cfg.mtp_drafts,
        };
        // MTP rows sit one position later than their main rows, so a proposal may reach a block the main pass has not given yet.
        for x in ran.iter().filter(|_| mtp > 0) {
            let r = &self.reqs[&x.id];
            if r.params.draft && r.decode_ready() {
                let ahead = (r.params.max_tokens - r.output.len() - 1).min(window - 1).min(mtp);
                tables::give_blocks(&mut self.pool, &mut self.cache, r.seq, r.fed, r.fed + ahead);
            }
        }
        let lanes: Vec<DraftLane<'_>> = ran
            .iter()
            .map(|x| (x, &self.reqs[&x.id]))
            .filter(|(_, r)| r.params.draft)
            .map(|(x, r)| DraftLane {
                seq: r.seq,
                tokens: r.prompt.iter().chain(&r.output).copied().collect(),
                prompt_len: r.prompt.len(),
                params: &r.params,
                key: r.key,
                start: x.start,
                fed: r.fed,
                first_row: x.first_row,
                max_drafts: if r.decode_ready() {
                    (r.params.max_tokens - r.output.len() - 1).min(window - 1)
                } else {
                    0
                },
            })
            .collect();
        let ids: Vec<RequestId> = ran
            .iter()
            .filter(|x| self.reqs[&x.id].params.draft)
            .map(|x| x.id)
            .collect();
        let result = self.drafter.run(&*self.runner, &mut self.cache, &lanes, streams);
        drop(lanes);
        let vocab = self.runner.vocab_size() as u32;
        match result {
            Ok(proposals) => {
                for (id, mut d) in ids.into_iter().zip(proposals) {
                    if let Some(bad) = d.iter().position(|&t| t >= vocab) {
                        d.truncate(bad);
                    }
                    self.reqs.get_mut(&id).expect("drafting request").drafts = d;
                }
            }
            Err(e) => {
                for id in ids {
                    self.fail(id, format!("the MTP drafter failed: {e}"));
                }
            }
        }
    }

    /// Captures the state of every lane that just reached a prompt block boundary for prefix reuse.
    fn snapshot(&mut self, ran: &[Ran]) {
        if !self.cfg.prefix_cache {
            return;
        }
        for x in ran {
            let Some(r) = self.reqs.get(&x.id) else { continue };
            if r.fed <= r.prompt.len() && r.fed.is_multiple_of(BLOCK_TOKENS) {
                let (config, layout) = (self.runner.geometry(), self.runner.layout());
                let cache = &mut self.cache;
                // The MTP layer may already hold the next block for its proposal.
                let table = cache.table(r.seq)[..r.fed / BLOCK_TOKENS].to_vec();
                let boundary = || cache.capture(r.seq, config, layout);
                prefix::insert(&mut self.pool, &r.prompt[..r.fed], &table, boundary);
            }
        }
    }

    fn release(&mut self, id: RequestId) -> Option<Req> {
        let r = self.reqs.remove(&id)?;
        tables::free_seq(&mut self.pool, &mut self.cache, r.seq);
        if r.phase == Phase::Running {
            self.reserved
                .remove(&mut self.pool, &mut self.cache.store, r.need_blocks(), r.state_bytes);
        }
        Some(r)
    }

    fn finish(&mut self, id: RequestId, reason: FinishReason) {
        if let Some(mut r) = self.release(id) {
            let usage = Usage {
                completion_tokens: r.output.len(),
                ..r.usage
            };
            (r.sink)(Event::Finished {
                reason,
                usage,
                token_sha: token_sha(&r.output),
            });
        }
    }

    fn fail(&mut self, id: RequestId, msg: String) {
        if let Some(mut r) = self.release(id) {
            (r.sink)(Event::Error(msg));
        }
    }
}
