//! Requests: what a client asks for, what the engine sends back, and each request's lifecycle.

use crate::sampler::{SamplingParams, TokenLogprobs};

/// A request's handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// `background` work yields to foreground work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Priority {
    #[default]
    Foreground,
    Background,
}

/// Everything about one generation besides the prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateParams {
    pub sampling: SamplingParams,
    /// The sampling key; `None` keys by a hash of the prompt.
    pub seed: Option<u64>,
    pub max_tokens: usize,
    /// Tokens that end generation (the model's EOS unless `ignore_eos`); stop strings are text-level, matched by the server.
    pub stop_token_ids: Vec<u32>,
    pub ignore_eos: bool,
    pub priority: Priority,
    /// `false` asks for the serial reference (no drafts); the bits are the same either way.
    pub draft: bool,
    /// `Some(n)`: each token's log-probability and its `n` most likely alternatives.
    pub logprobs: Option<usize>,
}

impl Default for GenerateParams {
    fn default() -> Self {
        GenerateParams {
            sampling: SamplingParams::default(),
            seed: None,
            max_tokens: 16,
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            priority: Priority::Foreground,
            draft: true,
            logprobs: None,
        }
    }
}

/// Why a request finished, as OpenAI names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    Abort,
}

impl FinishReason {
    /// The OpenAI `finish_reason` string.
    pub fn as_str(&self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
        }
    }
}

/// Token counts of a finished request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    /// Prompt tokens resumed from the prefix cache instead of computed.
    pub cached_tokens: usize,
    /// Times the request was preempted and replayed.
    pub preemptions: usize,
}

/// What the engine sends a request's owner.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A new token at absolute position `position`, with its log-probabilities when asked.
    Token {
        id: u32,
        position: u32,
        logprobs: Option<Box<TokenLogprobs>>,
    },
    /// The request ended; no more events follow.
    Finished {
        reason: FinishReason,
        usage: Usage,
        token_sha: String,
    },
    /// The request failed; no more events follow.
    Error(String),
}

/// Where a request's events go.
pub type Sink = Box<dyn FnMut(Event) + Send>;

/// Lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Waiting,
    Running,
    Preempted,
}
