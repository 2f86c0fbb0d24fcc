//! Prometheus metrics: request outcomes, token counters, latency histograms and the engine's gauges.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tensorfold_engine::EngineStats;

type Labels = Vec<(String, String)>;

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    pub prompt_tokens: Counter,
    pub generation_tokens: Counter,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub drafted: Counter,
    pub accepted: Counter,
    running: Gauge,
    waiting: Gauge,
    kv_usage: Gauge<f64, AtomicU64>,
    kv_bytes: Gauge,
    kv_used_bytes: Gauge,
    seq_state_bytes: Gauge,
    seq_state_reserved_bytes: Gauge,
    vllm_running: Gauge,
    vllm_waiting: Gauge,
    vllm_gpu_cache: Gauge<f64, AtomicU64>,
    vllm_kv_cache: Gauge<f64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::default();
        let m = Metrics {
            requests: Family::default(),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            ttft: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            itl: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            drafted: Counter::default(),
            accepted: Counter::default(),
            running: Gauge::default(),
            waiting: Gauge::default(),
            kv_usage: Gauge::default(),
            kv_bytes: Gauge::default(),
            kv_used_bytes: Gauge::default(),
            seq_state_bytes: Gauge::default(),
            seq_state_reserved_bytes: Gauge::default(),
            vllm_running: Gauge::default(),
            vllm_waiting: Gauge::default(),
            vllm_gpu_cache: Gauge::default(),
            vllm_kv_cache: Gauge::default(),
            registry: Registry::default(),
        };
        r.register(
            "tensorfold_requests",
            "Finished requests by outcome",
            m.requests.clone(),
        );
        r.register(
            "tensorfold_prompt_tokens",
            "Prompt tokens of admitted requests",
            m.prompt_tokens.clone(),
        );
        r.register(
            "tensorfold_generation_tokens",
            "Generated tokens",
            m.generation_tokens.clone(),
        );
        r.register(
            "tensorfold_time_to_first_token_seconds",
            "Time to first token",
            m.ttft.clone(),
        );
        r.register(
            "tensorfold_inter_token_latency_seconds",
            "Time between tokens",
            m.itl.clone(),
        );
        r.register("tensorfold_draft_tokens", "Drafted tokens", m.drafted.clone());
        r.register(
            "tensorfold_draft_accepted_tokens",
            "Accepted drafted tokens",
            m.accepted.clone(),
        );
        r.register("tensorfold_requests_running", "Requests running", m.running.clone());
        r.register("tensorfold_requests_waiting", "Requests waiting", m.waiting.clone());
        r.register(
            "tensorfold_kv_cache_usage_ratio",
            "Cache pool blocks in use (cache blocks and those held out for state) over the pool's blocks",
            m.kv_usage.clone(),
        );
        r.register(
            "tensorfold_kv_cache_bytes",
            "Bytes of the cache pool's blocks (every sequence's state lives in them)",
            m.kv_bytes.clone(),
        );
        r.register(
            "tensorfold_kv_cache_used_bytes",
            "Bytes of the cache blocks running requests hold",
            m.kv_used_bytes.clone(),
        );
        r.register(
            "tensorfold_seq_state_bytes",
            "Bytes running requests hold outside the cache blocks (unfinished compression windows, MTP stream)",
            m.seq_state_bytes.clone(),
        );
        r.register(
            "tensorfold_seq_state_reserved_bytes",
            "Bytes of pool blocks held out to cover the most state running requests can hold outside the cache blocks",
            m.seq_state_reserved_bytes.clone(),
        );
        // The Gateway API Inference Extension's model-server protocol (its proposal 003) reads vLLM's names.
        r.register("vllm:num_requests_running", "Requests running", m.vllm_running.clone());
        r.register("vllm:num_requests_waiting", "Requests waiting", m.vllm_waiting.clone());
        r.register(
            "vllm:gpu_cache_usage_perc",
            "KV-cache usage, 0 to 1",
            m.vllm_gpu_cache.clone(),
        );
        r.register(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage, 0 to 1",
            m.vllm_kv_cache.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// Counts one finished request by its outcome (stop, length, abort, error, rejected).
    pub fn outcome(&self, outcome: &str) {
        self.requests
            .get_or_create(&vec![("outcome".to_string(), outcome.to_string())])
            .inc();
    }

    /// The text exposition, with the gauges read from `stats`.
    pub fn render(&self, stats: &EngineStats) -> String {
        let usage = if stats.blocks_total == 0 {
            0.0
        } else {
            (stats.blocks_used + stats.blocks_state) as f64 / stats.blocks_total as f64
        };
        self.running.set(stats.running as i64);
        self.waiting.set(stats.waiting as i64);
        self.vllm_running.set(stats.running as i64);
        self.vllm_waiting.set(stats.waiting as i64);
        self.kv_usage.set(usage);
        let bytes = |blocks: usize| (blocks as u64).saturating_mul(stats.block_bytes as u64) as i64;
        self.kv_bytes.set(bytes(stats.blocks_total));
        self.kv_used_bytes.set(bytes(stats.blocks_used));
        self.seq_state_bytes.set(stats.seq_state_bytes as i64);
        self.seq_state_reserved_bytes.set(bytes(stats.blocks_state));
        self.vllm_gpu_cache.set(usage);
        self.vllm_kv_cache.set(usage);
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_cache_usage_is_the_share_of_pool_blocks_in_use() {
        let m = Metrics::new();
        let stats = EngineStats {
            blocks_total: 12,
            blocks_used: 2,
            blocks_state: 1,
            blocks_cached: 5,
            blocks_reserved: 9,
            block_bytes: 1000,
            ..Default::default()
        };
        let text = m.render(&stats);
        for name in [
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            "tensorfold_kv_cache_usage_ratio",
        ] {
            assert!(text.contains(&format!("{name} 0.25")), "{name} in\n{text}");
        }
        assert!(text.contains("tensorfold_kv_cache_bytes 12000"), "{text}");
        assert!(text.contains("tensorfold_kv_cache_used_bytes 2000"), "{text}");
        assert!(text.contains("tensorfold_seq_state_reserved_bytes 1000"), "{text}");
        assert!(
            m.render(&EngineStats::default())
                .contains("vllm:kv_cache_usage_perc 0.0")
        );
    }
}
