//! Known findings: kernel failures the project has accepted for now, each with a reason and an issue number.

/// One accepted failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kernel: String,
    pub backend: String,
    /// A case name prefix, or `*` for every case.
    pub case: String,
    pub issue: u32,
    pub reason: String,
}

/// All known findings.
#[derive(Clone, Debug, Default)]
pub struct KnownFindings {
    pub findings: Vec<Finding>,
}

/// The repository's findings file, carried in the binary.
pub const FINDINGS_FILE: &str = include_str!("../../known-findings.txt");

impl KnownFindings {
    /// The repository's own list.
    pub fn bundled() -> KnownFindings {
        KnownFindings::parse(FINDINGS_FILE).expect("known-findings.txt is well formed")
    }

    /// Parses lines `kernel backend case #issue reason`; `#` at line start is a comment.
    pub fn parse(text: &str) -> Result<KnownFindings, String> {
        let mut findings = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.splitn(5, char::is_whitespace);
            let mut next = || parts.next().unwrap_or("").trim().to_string();
            let (kernel, backend, case, issue, reason) = (next(), next(), next(), next(), next());
            let issue = issue
                .strip_prefix('#')
                .and_then(|i| i.parse().ok())
                .ok_or_else(|| format!("line {}: expected `kernel backend case #issue reason`", n + 1))?;
            if reason.is_empty() {
                return Err(format!("line {}: a finding needs a reason", n + 1));
            }
            findings.push(Finding {
                kernel,
                backend,
                case,
                issue,
                reason,
            });
        }
        Ok(KnownFindings { findings })
    }

    /// The finding that covers a failure of `kernel` on `backend` in `case`, if any.
    pub fn covering(&self, kernel: &str, backend: &str, case: &str) -> Option<&Finding> {
        self.findings
            .iter()
            .find(|f| f.kernel == kernel && f.backend == backend && (f.case == "*" || case.starts_with(&f.case)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_matches() {
        let k = KnownFindings::parse("# comment\nrms_norm cpu rows=17 #9 denormal input flushes\n").unwrap();
        assert_eq!(k.findings[0].issue, 9);
        assert!(k.covering("rms_norm", "cpu", "rows=17,dim=4").is_some());
        assert!(k.covering("rms_norm", "cuda", "rows=17,dim=4").is_none());
        assert!(KnownFindings::parse("x cpu * 3 no hash").is_err());
        assert!(KnownFindings::parse("x cpu * #3").is_err());
        KnownFindings::bundled();
    }
}
