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
        let confidence: Vec<f32> = block.iter().map(|d| d.confidence).collect();
        let n = lanes[i].max_drafts.min(most).min(worth_running(&confidence));
        drafts[i] = block.into_iter().take(n).map(|d| d.token).collect();
    }
    Ok(())
}

/// A draft whose chance of being reached and accepted falls below this costs a row for little gain.
const MIN_CHANCE: f32 = 0.05;

/// How many leading drafts to run: while the product of the confidence head's chances stays at `MIN_CHANCE` or more (always the first).
pub fn worth_running(confidence: &[f32]) -> usize {
    let mut chance = 1.0;
    let kept = confidence
        .iter()
        .take_while(|&&c| {
            chance *= c;
            chance >= MIN_CHANCE
        })
        .count();
    kept.max(confidence.len().min(1))
}

#[cfg(test)]
mod tests {
    use super::worth_running;

    #[test]
    fn drafts_run_while_their_joint_chance_holds() {
        assert_eq!(worth_running(&[0.9, 0.9, 0.5, 0.1, 0.9]), 3);
        assert_eq!(worth_running(&[1.0; 5]), 5);
        assert_eq!(worth_running(&[0.01, 0.9]), 1, "the first draft always runs");
        assert_eq!(worth_running(&[]), 0);
    }
}
