//! Where the forward pass follows DeepSeek's official inference code and where `transformers`' V4 differs.

/// Numerical choices of the forward pass; `official()` is the default, `transformers()` matches the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Semantics {
    /// FP8 round trip (act_quant, block 64) on the KV's non-RoPE dims: official; transformers omits it.
    pub kv_fp8_round_trip: bool,
    /// Hadamard then FP4 round trip on indexer queries and keys: official; transformers omits both (only the FP4 step changes scores).
    pub indexer_fp4_round_trip: bool,
    /// Activations entering FP8 and MXFP4 GEMMs quantised to FP8 per 128: official; transformers keeps them unquantised.
    pub act_quant_gemm_inputs: bool,
    /// Attention probabilities rounded to bf16 before P.V: official; transformers keeps them in f32.
    pub attn_bf16_probs: bool,
}

impl Semantics {
    /// DeepSeek's official inference semantics.
    pub const fn official() -> Semantics {
        Semantics {
            kv_fp8_round_trip: true,
            indexer_fp4_round_trip: true,
            act_quant_gemm_inputs: true,
            attn_bf16_probs: true,
        }
    }

    /// The semantics of `transformers`' `DeepseekV4ForCausalLM`, for golden comparisons.
    pub const fn transformers() -> Semantics {
        Semantics {
            kv_fp8_round_trip: false,
            indexer_fp4_round_trip: false,
            act_quant_gemm_inputs: false,
            attn_bf16_probs: false,
        }
    }
}

impl Default for Semantics {
    fn default() -> Semantics {
        Semantics::official()
    }
}
