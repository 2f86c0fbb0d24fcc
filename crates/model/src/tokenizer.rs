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

    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }
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
