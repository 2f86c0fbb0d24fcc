//! The fixed prompts the HTTP benchmarks send, shipped in `benches/prompts`.

/// A named prompt.
pub struct Prompt {
    pub name: &'static str,
    pub text: &'static str,
}

/// A short continuation, a piece of code to continue, and a long document (the long-context prompt).
pub const ALL: [Prompt; 3] = [
    Prompt {
        name: "short",
        text: include_str!("../../../../benches/prompts/short.txt"),
    },
    Prompt {
        name: "code",
        text: include_str!("../../../../benches/prompts/code.txt"),
    },
    Prompt {
        name: "long",
        text: include_str!("../../../../benches/prompts/long.txt"),
    },
];

/// The long-context prompt.
pub fn long() -> &'static Prompt {
    &ALL[2]
}

/// The prompts named in `names` (all when empty), or an error listing the names there are.
pub fn pick(names: &[String]) -> anyhow::Result<Vec<&'static Prompt>> {
    if names.is_empty() {
        return Ok(ALL.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            ALL.iter().find(|p| p.name == n).ok_or_else(|| {
                let known: Vec<_> = ALL.iter().map(|p| p.name).collect();
                anyhow::anyhow!("there is no prompt `{n}`; pick from {}", known.join(", "))
            })
        })
        .collect()
}
