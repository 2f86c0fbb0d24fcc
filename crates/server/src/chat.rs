//! Chat prompts: the checkpoint's Jinja template when it has one, else DeepSeek V4's format rendered natively.

use std::path::Path;

use minijinja::Environment;
use serde::Serialize;

/// One chat message after validation.
#[derive(Clone, Debug, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// How a checkpoint turns messages into prompt text.
pub enum ChatFormat {
    Template {
        env: Box<Environment<'static>>,
        bos: String,
        eos: String,
    },
    Native {
        bos: String,
    },
}

const BOS: &str = "<｜begin▁of▁sentence｜>";
const EOS: &str = "<｜end▁of▁sentence｜>";

fn token_text(v: Option<&serde_json::Value>, default: &str) -> String {
    match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Object(o)) => o.get("content").and_then(|c| c.as_str()).unwrap_or(default).to_string(),
        _ => default.to_string(),
    }
}

impl ChatFormat {
    /// Reads `tokenizer_config.json` in `dir`; its `chat_template` if present, else the native format.
    pub fn load(dir: &Path) -> Result<ChatFormat, String> {
        let cfg: serde_json::Value = match std::fs::read_to_string(dir.join("tokenizer_config.json")) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| format!("tokenizer_config.json: {e}"))?,
            Err(_) => serde_json::Value::Null,
        };
        let bos = token_text(cfg.get("bos_token"), BOS);
        let eos = token_text(cfg.get("eos_token"), EOS);
        match cfg.get("chat_template").and_then(|t| t.as_str()) {
            Some(t) => {
                let mut env = Environment::new();
                env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
                env.add_template_owned("chat", t.to_string())
                    .map_err(|e| format!("the checkpoint's chat template does not parse: {e}"))?;
                Ok(ChatFormat::Template {
                    env: Box::new(env),
                    bos,
                    eos,
                })
            }
            None => Ok(ChatFormat::Native { bos }),
        }
    }

    /// Prompt text for `messages`, ending with the assistant's turn opened when `add_generation_prompt`.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String, String> {
        match self {
            ChatFormat::Template { env, bos, eos } => {
                let tmpl = env.get_template("chat").map_err(|e| e.to_string())?;
                tmpl.render(minijinja::context! {
                    messages => minijinja::value::Serde(messages),
                    add_generation_prompt => add_generation_prompt,
                    bos_token => bos,
                    eos_token => eos,
                })
                .map_err(|e| format!("rendering the chat template failed: {e}"))
            }
            ChatFormat::Native { bos } => Ok(render_native(bos, messages, add_generation_prompt)),
        }
    }
}

/// DeepSeek's published non-thinking encoding (encode_messages in deepseek-ai's encoding/encoding_dsv32.py, kept by V4).
fn render_native(bos: &str, messages: &[Message], add_generation_prompt: bool) -> String {
    let mut out = String::from(bos);
    for m in messages.iter().filter(|m| m.role == "system" || m.role == "developer") {
        out.push_str(&m.content);
    }
    for m in messages {
        match m.role.as_str() {
            "user" => {
                out.push_str("<｜User｜>");
                out.push_str(&m.content);
            }
            "assistant" => {
                out.push_str("<｜Assistant｜></think>");
                out.push_str(&m.content);
                out.push_str(EOS);
            }
            _ => {}
        }
    }
    if add_generation_prompt {
        out.push_str("<｜Assistant｜></think>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_matches_the_published_example() {
        let m = |r: &str, c: &str| Message {
            role: r.into(),
            content: c.into(),
        };
        let msgs = [
            m("user", "hello"),
            m("assistant", "Hello! I am DeepSeek."),
            m("user", "1+1=?"),
        ];
        assert_eq!(
            render_native(BOS, &msgs, true),
            "<｜begin▁of▁sentence｜><｜User｜>hello<｜Assistant｜></think>Hello! I am DeepSeek.<｜end▁of▁sentence｜><｜User｜>1+1=?<｜Assistant｜></think>"
        );
    }
}
