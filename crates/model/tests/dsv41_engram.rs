//! Engram's token map from the real DeepSeek V4 tokenizer, and its hash constants against MODELS-V41.md.

use tensorfold_model::dsv41::engram::{TokenMap, layer_tables, numpy_rng, tables};
use tensorfold_model::synth::tokenizer::TOKENIZER_JSON;

/// MODELS-V41.md: compressed vocabulary of V4.1-Flash.
const COMPRESSED_VOCAB: u64 = 99_092;

#[test]
fn token_map_of_the_deepseek_v4_tokenizer_has_99092_ids() {
    let tokenizer = tokenizers::Tokenizer::from_bytes(TOKENIZER_JSON).unwrap();
    let map = TokenMap::build(&tokenizer).unwrap();
    assert_eq!(map.compressed.len(), 129_280);
    assert_eq!(map.num_compressed as u64, COMPRESSED_VOCAB);
    // Ids are numbered by first appearance, so every id is at most one above all ids before it.
    let mut next = 0;
    for &c in &map.compressed {
        assert!(c <= next, "compressed id {c} skips ahead of {next}");
        next = next.max(c + 1);
    }
    let id = |text: &str| {
        tokenizer
            .token_to_id(text)
            .unwrap_or_else(|| panic!("no token {text:?}"))
    };
    // Case and a leading space fold together ("Ġ" is the byte-level space).
    assert_eq!(map.get(id("The")), map.get(id("the")));
    assert_eq!(map.get(id("ĠThe")), map.get(id("the")));
    assert_eq!(
        map.get(id("Ġ")),
        map.get(id("ĠĠ")),
        "whitespace runs collapse to one protected space"
    );
}

#[test]
fn multipliers_match_models_v41() {
    let want = [
        (
            1,
            [
                76_632_096_046_245,
                4_839_876_093_313,
                35_959_672_319_349,
                73_987_337_458_391,
            ],
        ),
        (
            14,
            [
                67_716_810_739_261,
                51_510_806_800_915,
                30_921_347_202_721,
                82_619_226_485_591,
            ],
        ),
    ];
    for (layer, m) in want {
        assert_eq!(tables::multipliers(layer, 4, COMPRESSED_VOCAB), m, "layer {layer}");
    }
}

#[test]
fn numpy_generator_matches_numpy_for_other_seeds() {
    // np.random.default_rng(s).integers(0, 2**40, 3, dtype=np.int64) for s = 0 and s = 2**33 + 5.
    assert_eq!(
        numpy_rng::integers(0, 1 << 40, 3),
        [700_346_781_657, 296_633_628_802, 45_050_865_998]
    );
    assert_eq!(
        numpy_rng::integers((1 << 33) + 5, 1 << 40, 3),
        [261_376_964_554, 470_394_507_702, 650_265_857_555]
    );
}

#[test]
fn flash_primes_and_offsets_match_models_v41() {
    let t = layer_tables(&[1, 14], &[16_000_000; 3], 8, COMPRESSED_VOCAB);
    assert_eq!((t[0].primes[0], t[0].primes[23]), (16_000_057, 16_000_463));
    assert_eq!((t[1].primes[0], t[1].primes[23]), (16_000_477, 16_000_889));
    assert_eq!([t[0].num_rows(), t[1].num_rows()], [384_006_168, 384_016_682]);
    for layer in &t {
        assert!(layer.primes.windows(2).all(|w| w[0] < w[1]) && layer.primes.iter().all(|&p| tables::is_prime(p)));
        assert_eq!(layer.offsets[0], 0);
        assert_eq!(layer.offsets[23] + layer.primes[23], layer.num_rows());
    }
}
