//! Parameter and memory figures against DeepSeek's published V4-Flash sizes.

use tensorfold_model::dsv4::Summary;
use tensorfold_model::dsv4::blocks::BlockLayout;
use tensorfold_model::dsv4::cache::SeqCache;
use tensorfold_model::synth::Preset;

fn flash(layers: usize) -> tensorfold_model::config::dsv4::Dsv4Config {
    Preset::FlashLayers(layers).config()
}

#[test]
fn flash_totals_match_published_sizes() {
    let s = Summary::of(&flash(43));
    let total_b = s.total_params as f64 / 1e9;
    let active_b = s.active_params as f64 / 1e9;
    eprintln!(
        "V4-Flash: total {total_b:.1} B, active {active_b:.2} B, MTP {} params",
        s.mtp_params
    );
    assert!((280.0..290.0).contains(&total_b), "total {total_b} B, published 284 B");
    assert!((12.0..14.0).contains(&active_b), "active {active_b} B, published 13 B");
}

#[test]
fn cache_memory_is_the_pool_blocks_and_the_state_outside_them() {
    let c = flash(43);
    let block = BlockLayout::new(&c).bytes() as u64;
    let outside = SeqCache::max_floats(&c, 0) as u64 * 4;
    for n in [1u64, 128, 129, 65_536] {
        let kv = Summary::kv_bytes(&c, n);
        assert_eq!(kv.total(), n.div_ceil(128) * block + outside, "{n} tokens: {kv:?}");
    }
    let (one, two) = (Summary::kv_bytes(&c, 128), Summary::kv_bytes(&c, 256));
    let csa_layers = c.compress_ratios.iter().filter(|&&r| r == 4).count() as u64;
    let hca_layers = c.compress_ratios.iter().filter(|&&r| r == 128).count() as u64;
    let entries = (csa_layers * 512 * 128 / 4 + hca_layers * 512 + csa_layers * 128 * 128 / 4) * 4;
    assert_eq!(two.compressed + two.indexer - one.compressed - one.indexer, entries);
    let rings = c.compress_ratios.len() as u64 * 128 * 512 * 4;
    assert_eq!(
        two.window - one.window,
        rings,
        "every block keeps a window ring per layer"
    );
}

#[test]
fn bytes_by_dtype_add_up_to_the_manifest() {
    let c = Preset::Tiny.config();
    let s = Summary::of(&c);
    assert_eq!(s.total_bytes(), tensorfold_model::dsv4::manifest(&c).num_bytes());
}
