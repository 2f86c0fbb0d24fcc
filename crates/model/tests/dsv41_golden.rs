//! DeepSeek V4.1 goldens from the float64 reference (tools/reference/dsv41_f64.py) on the tiny synth checkpoint.

use std::path::PathBuf;

use sha2::{Digest, Sha256};
use tensorfold_model::dsv41::engram::{TokenMap, layer_tables, row_ids};
use tensorfold_model::synth::tokenizer::TOKENIZER_JSON;
use tensorfold_model::synth::{self, Dsv41Preset, SynthOptions};

fn golden_bytes(name: &str) -> Vec<u8> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/goldens/dsv41_tiny/{name}.safetensors"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; run tools/reference/dsv41_f64.py", path.display()))
}

fn ints(st: &safetensors::SafeTensors, name: &str) -> Vec<i64> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("golden tensor {name}: {e}"));
    match t.dtype() {
        safetensors::Dtype::I32 => t
            .data()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
            .collect(),
        safetensors::Dtype::I64 => t
            .data()
            .chunks(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        other => panic!("golden tensor {name} is {other:?}, expected an integer"),
    }
}

fn metadata(bytes: &[u8], key: &str) -> String {
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    meta.metadata()
        .as_ref()
        .and_then(|m| m.get(key))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn goldens_were_made_from_the_current_tiny_synth() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SynthOptions {
        preset: Dsv41Preset::Tiny,
        seed: 0,
        out: dir.path().to_path_buf(),
        shard_bytes: synth::DEFAULT_SHARD_BYTES,
        chat_template: true,
        force: false,
    };
    synth::write_dsv41(&opts).unwrap();
    let sha = format!(
        "{:x}",
        Sha256::digest(std::fs::read(dir.path().join("model.safetensors")).unwrap())
    );
    for name in ["short", "long"] {
        let want = metadata(&golden_bytes(name), "checkpoint_sha256");
        assert_eq!(
            sha, want,
            "{name}: synth tiny seed 0 changed; regenerate with tools/reference/dsv41_f64.py"
        );
    }
}

#[test]
fn engram_ids_and_rows_match_the_reference() {
    let tokenizer = tokenizers::Tokenizer::from_bytes(TOKENIZER_JSON).unwrap();
    let map = TokenMap::build(&tokenizer).unwrap();
    let c = Dsv41Preset::Tiny.config().text_config;
    let tables = layer_tables(
        &c.engram_layer_ids,
        &c.engram_vocab_size,
        c.engram_n_heads,
        map.num_compressed as u64,
    );
    let pad = map.get(c.engram_pad_id);
    let heads = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
    for name in ["short", "long"] {
        let bytes = golden_bytes(name);
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let ids: Vec<u32> = ints(&st, "input_ids").iter().map(|&v| v as u32).collect();
        let text = metadata(&bytes, "text");
        let encoded = tokenizer.encode(text.as_str(), false).unwrap();
        assert_eq!(ids[0], c.bos_token_id);
        assert_eq!(
            &ids[1..],
            encoded.get_ids(),
            "{name}: tokenization differs from the reference"
        );
        let compressed: Vec<u64> = ids.iter().map(|&id| map.get(id)).collect();
        let want: Vec<u64> = ints(&st, "compressed_ids").iter().map(|&v| v as u64).collect();
        assert_eq!(compressed, want, "{name}: compressed ids");
        for t in &tables {
            let want = ints(&st, &format!("engram_rows.{}", t.layer_idx));
            let mut got = vec![0u64; heads];
            for pos in 0..ids.len() {
                row_ids(t, &compressed, pos, pad, c.engram_n_heads, &mut got);
                let want_row: Vec<u64> = want[pos * heads..(pos + 1) * heads].iter().map(|&v| v as u64).collect();
                assert_eq!(got, want_row, "{name}: layer {} rows at position {pos}", t.layer_idx);
            }
        }
    }
}
