//! A checkpoint's tokenizer (`tokenizer.json`) with its BOS and EOS, and streaming detokenisation.

use std::path::Path;

use crate::error::CheckpointError;

/// Text to ids and back, as the checkpoint defines it.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    pub bos_id: u32,
    pub eos_id: u32,
}

impl Tokenizer {
    /// Loads `dir/tokenizer.json`; BOS and EOS come from the model config's ids.
    pub fn load(dir: &Path, bos_id: u32, eos_id: u32) -> Result<Tokenizer, CheckpointError> {
        let path = dir.join("tokenizer.json");
        let inner = tokenizers::Tokenizer::from_file(&path).map_err(|e| CheckpointError::Index {
            path: path.clone(),
            reason: format!("not a readable tokenizer: {e}"),
        })?;
        Ok(Tokenizer { inner, bos_id, eos_id })
    }

    /// Ids of `text` without special-token handling beyond what the text spells.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(self
            .inner
            .encode(text, false)
            .map_err(|e| format!("tokenizing failed: {e}"))?
            .get_ids()
            .to_vec())
    }

    /// Text of `ids`, special tokens included.
    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| format!("detokenizing failed: {e}"))
    }

    /// The raw bytes token `id` stands for (byte-level pieces mapped back to bytes; added tokens as UTF-8).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(piece) = self.inner.id_to_token(id) else {
            return Vec::new();
        };
        let bytes: Option<Vec<u8>> = piece.chars().map(byte_of_char).collect();
        match bytes {
            Some(b)
                if !self
                    .inner
                    .get_added_vocabulary()
                    .get_added_tokens_decoder()
                    .contains_key(&id) =>
            {
                b
            }
            _ => piece.into_bytes(),
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
}

/// The byte a byte-level BPE character stands for (GPT-2's printable remapping of the 256 bytes).
fn byte_of_char(c: char) -> Option<u8> {
    let c = c as u32;
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    if c < 256 && printable(c) {
        return Some(c as u8);
    }
    let shifted = c.checked_sub(256)?;
    (0u32..256)
        .filter(|&b| !printable(b))
        .nth(shifted as usize)
        .map(|b| b as u8)
}

/// Turns a growing list of ids into text deltas, holding back bytes of an unfinished UTF-8 character.
#[derive(Default)]
pub struct TextStream {
    ids: Vec<u32>,
    emitted: usize,
}

impl TextStream {
    /// Adds `id` and returns the text that is now complete.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, String> {
        self.ids.push(id);
        let text = tok.decode(&self.ids)?;
        if text.ends_with('\u{FFFD}') || text.len() < self.emitted || !text.is_char_boundary(self.emitted) {
            return Ok(String::new());
        }
        let delta = text[self.emitted..].to_string();
        self.emitted = text.len();
        Ok(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::byte_of_char;

    #[test]
    fn byte_level_characters_map_back_to_bytes() {
        assert_eq!(byte_of_char('a'), Some(b'a'));
        assert_eq!(byte_of_char('\u{120}'), Some(b' '));
        assert_eq!(byte_of_char('\u{10A}'), Some(b'\n'));
        assert_eq!(byte_of_char('\u{100}'), Some(0));
        assert_eq!(byte_of_char('\u{AD}'), None);
        let all: std::collections::BTreeSet<u8> = (0..=0x143u32)
            .filter_map(char::from_u32)
            .filter_map(byte_of_char)
            .collect();
        assert_eq!(all.len(), 256);
    }
}
