//! Medians, spreads and nearest-rank percentiles of measured values.

use serde_json::{Value, json};

/// The nearest-rank `p`th percentile (0 < p <= 100) of `xs`; None when empty.
pub fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    Some(v[rank.min(v.len()) - 1])
}

/// Median, minimum and maximum of a set of runs.
#[derive(Clone, Copy, Debug)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// None when `xs` is empty; the median of an even count is the mean of the middle two.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        if xs.is_empty() {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }

    pub fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max})
    }

    /// `median (min-max)` scaled by `k`, with `digits` decimals.
    pub fn show(&self, k: f64, digits: usize) -> String {
        format!(
            "{:.digits$} ({:.digits$}-{:.digits$})",
            self.median * k,
            self.min * k,
            self.max * k
        )
    }
}

/// A figure for a table cell, or `n/a` when the server did not give what it needs.
pub fn cell(x: Option<f64>, k: f64, digits: usize) -> String {
    x.map_or_else(|| "n/a".into(), |x| format!("{:.digits$}", x * k))
}

#[cfg(test)]
mod tests {
    use super::{Spread, percentile};

    #[test]
    fn nearest_rank() {
        let xs: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), Some(50.0));
        assert_eq!(percentile(&xs, 90.0), Some(90.0));
        assert_eq!(percentile(&xs, 99.0), Some(99.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn spread() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of(&[5.0, 1.0, 9.0]).unwrap().median, 5.0);
        assert!(Spread::of(&[]).is_none());
    }
}
