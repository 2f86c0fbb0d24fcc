//! Parameter and memory figures against DeepSeek's published V4-Flash sizes.

use tensorfold_model::dsv4::Summary;
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
fn cache_grows_with_compressed_entries_only() {
    let c = flash(43);
    let short = Summary::kv_bytes(&c, 1024);
    let long = Summary::kv_bytes(&c, 1 << 20);
    assert_eq!(short.window, long.window, "the window is bounded");
    assert_eq!(short.compressor_state, long.compressor_state);
    let csa_layers = c.compress_ratios.iter().filter(|&&r| r == 4).count() as u64;
    let hca_layers = c.compress_ratios.iter().filter(|&&r| r == 128).count() as u64;
    let per_token = (csa_layers * 512 / 4 + hca_layers * 512 / 128 + csa_layers * 128 / 4) * 2;
    assert_eq!(long.total() - short.total(), per_token * ((1 << 20) - 1024));
}

#[test]
fn bytes_by_dtype_add_up_to_the_manifest() {
    let c = Preset::Tiny.config();
    let s = Summary::of(&c);
    assert_eq!(s.total_bytes(), tensorfold_model::dsv4::manifest(&c).num_bytes());
}
