//! DSpark drafts: a lane without a context draft gets a block from the model's stages, each draft keyed like the target's draw at the position it guesses.

use tensorfold_model::dsv4::cache::Dsv4Cache;

use super::DraftLane;
use crate::runner::Runner;
use crate::sampler::sample;

/// Fills `drafts[i]` for every lane `i` that may draft, has no context draft and feeds only its last sampled token next.
pub fn run(
    runner: &dyn Runner,
    cache: &Dsv4Cache,
    lanes: &[DraftLane<'_>],
    drafts: &mut [Vec<u32>],
    most: usize,
) -> Result<(), String> {
    let owner: Vec<usize> = (0..lanes.len())
        .filter(|&i| drafts[i].is_empty() && lanes[i].max_drafts > 0 && lanes[i].tokens.len() == lanes[i].fed + 1)
        .collect();
    if owner.is_empty() {
        return Ok(());
    }
    let work: Vec<_> = owner
        .iter()
        .map(|&i| (lanes[i].seq, lanes[i].tokens[lanes[i].fed]))
        .collect();
    let mut pick = |k: usize, j: usize, logits: &[f32]| {
        let l = &lanes[owner[k]];
        sample(logits, &l.params.sampling, l.key, (l.fed + 1 + j) as u64)
    };
    let blocks = runner.draft_block(&work, cache, &mut pick)?;
    for (&i, block) in owner.iter().zip(blocks) {
        let n = lanes[i].max_drafts.min(most);
        drafts[i] = block.into_iter().take(n).map(|d| d.token).collect();
    }
    Ok(())
}
