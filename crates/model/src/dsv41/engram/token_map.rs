//! Engram's token map: tokenizer ids folded to normalised surface forms (case, accents, whitespace).

use tokenizers::normalizers::{Lowercase, NFD, NFKC, Replace, Sequence, Strip, StripAccents};
use tokenizers::{NormalizedString, Normalizer, Tokenizer};

/// Stands in for a token that is exactly one space, so stripping keeps it.
const SENTINEL: &str = "\u{E000}";

/// Map from tokenizer id to compressed id, new ids numbered by first appearance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMap {
    pub compressed: Vec<u64>,
    pub num_compressed: usize,
}

impl TokenMap {
    /// Builds the map over every id of `tokenizer` (added tokens included).
    pub fn build(tokenizer: &Tokenizer) -> Result<TokenMap, String> {
        let normalizer = normalizer()?;
        let vocab = tokenizer.get_vocab_size(true);
        let mut key_to_new = std::collections::HashMap::new();
        let mut compressed = Vec::with_capacity(vocab);
        for id in 0..vocab as u32 {
            let text = tokenizer
                .decode(&[id], false)
                .map_err(|e| format!("decoding token {id}: {e}"))?;
            let key = if text.contains('\u{FFFD}') {
                tokenizer
                    .id_to_token(id)
                    .ok_or_else(|| format!("token {id} has no string"))?
            } else {
                let mut norm = NormalizedString::from(text.as_str());
                normalizer
                    .normalize(&mut norm)
                    .map_err(|e| format!("normalising token {id}: {e}"))?;
                match norm.get() {
                    "" => text,
                    s => s.to_string(),
                }
            };
            let next = key_to_new.len() as u64;
            compressed.push(*key_to_new.entry(key).or_insert(next));
        }
        Ok(TokenMap {
            compressed,
            num_compressed: key_to_new.len(),
        })
    }

    /// The compressed id of tokenizer id `id`.
    pub fn get(&self, id: u32) -> u64 {
        self.compressed[id as usize]
    }
}

/// NFKC, NFD, strip accents, lowercase, collapse whitespace runs, strip (a lone space survives).
fn normalizer() -> Result<Sequence, String> {
    let regex = |pattern: &str, content: &str| {
        Replace::new(
            tokenizers::normalizers::replace::ReplacePattern::Regex(pattern.into()),
            content,
        )
        .map_err(|e| format!("engram normaliser pattern {pattern:?}: {e}"))
    };
    Ok(Sequence::new(vec![
        NFKC.into(),
        NFD.into(),
        StripAccents.into(),
        Lowercase.into(),
        regex(r"[ \t\r\n]+", " ")?.into(),
        regex(r"^ $", SENTINEL)?.into(),
        Strip::new(true, true).into(),
        Replace::new(SENTINEL, " ")
            .map_err(|e| format!("engram normaliser sentinel: {e}"))?
            .into(),
    ]))
}
