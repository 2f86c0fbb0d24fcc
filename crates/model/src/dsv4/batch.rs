//! A lane round's token rows: any number of sequences, each with consecutive positions.

use std::collections::BTreeMap;

/// A sequence's slot in the cache (the engine's handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqSlot(pub u32);

/// Token rows for one forward pass; row `i` is token `token_ids[i]` at `positions[i]` of sequence `seqs[i]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub token_ids: Vec<u32>,
    pub positions: Vec<u32>,
    pub seqs: Vec<SeqSlot>,
}

/// One sequence's rows in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqRows {
    pub seq: SeqSlot,
    /// Indices of its rows in the batch, in position order.
    pub rows: Vec<usize>,
    /// Position of its first row.
    pub start: u32,
}

impl Batch {
    /// Appends `tokens` of `seq` starting at position `start`.
    pub fn push_seq(&mut self, seq: SeqSlot, start: u32, tokens: &[u32]) {
        for (i, &t) in tokens.iter().enumerate() {
            self.token_ids.push(t);
            self.positions.push(start + i as u32);
            self.seqs.push(seq);
        }
    }

    pub fn len(&self) -> usize {
        self.token_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.token_ids.is_empty()
    }

    /// Groups rows by sequence; fails unless each sequence's rows are consecutive positions in row order.
    pub fn by_seq(&self) -> Result<Vec<SeqRows>, String> {
        if self.positions.len() != self.len() || self.seqs.len() != self.len() {
            return Err("token_ids, positions and seqs must have one entry per row".into());
        }
        let mut groups: BTreeMap<SeqSlot, SeqRows> = BTreeMap::new();
        for (row, (&seq, &pos)) in self.seqs.iter().zip(&self.positions).enumerate() {
            let g = groups.entry(seq).or_insert_with(|| SeqRows {
                seq,
                rows: Vec::new(),
                start: pos,
            });
            let expected = g.start + g.rows.len() as u32;
            if pos != expected {
                return Err(format!(
                    "sequence {} has position {pos} at row {row}, expected {expected}",
                    seq.0
                ));
            }
            g.rows.push(row);
        }
        Ok(groups.into_values().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_interleaved_sequences() {
        let mut b = Batch::default();
        b.push_seq(SeqSlot(2), 10, &[5, 6]);
        b.push_seq(SeqSlot(1), 0, &[7]);
        b.push_seq(SeqSlot(2), 12, &[8]);
        let g = b.by_seq().unwrap();
        assert_eq!(
            g[0],
            SeqRows {
                seq: SeqSlot(1),
                rows: vec![2],
                start: 0
            }
        );
        assert_eq!(
            g[1],
            SeqRows {
                seq: SeqSlot(2),
                rows: vec![0, 1, 3],
                start: 10
            }
        );
        b.push_seq(SeqSlot(1), 5, &[9]);
        assert!(b.by_seq().unwrap_err().contains("expected 1"));
    }
}
