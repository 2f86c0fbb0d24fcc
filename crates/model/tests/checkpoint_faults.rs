//! Each checkpoint fault gives one clear error naming the tensor, the file, what was expected and what was found.

mod common;

use std::path::PathBuf;

use common::{base, copy_of};
use safetensors::tensor::{Dtype, TensorView};
use tensorfold_model::dsv4::Dsv4Checkpoint;
use tensorfold_model::dsv4::weights::{Dsv4Weights, Routing};

fn open_err(dir: &std::path::Path) -> String {
    match Dsv4Checkpoint::open(dir) {
        Ok(_) => panic!("checkpoint with a planted fault opened cleanly"),
        Err(e) => {
            eprintln!("{e}");
            e.to_string()
        }
    }
}

fn single_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("model.safetensors")
}

#[test]
fn clean_checkpoints_open() {
    for shard_mib in [0, 8] {
        let ckpt = Dsv4Checkpoint::open(base(shard_mib)).unwrap();
        assert_eq!(ckpt.config.num_hidden_layers, 4);
        assert!(ckpt.weights.get("layers.0.ffn.gate.tid2eid").is_some());
        let w = Dsv4Weights::new(&ckpt.weights, &ckpt.config);
        assert_eq!((w.layers.len(), w.mtp.len()), (4, 1));
        assert!(matches!(&w.layers[0].ffn.routing, Routing::Hash(ids) if ids.len() == 129_280 * 2));
        assert!(matches!(&w.layers[3].ffn.routing, Routing::Bias(b) if b.len() == 8));
        assert!(w.layers[1].attn.indexer.is_some() && w.layers[2].attn.indexer.is_none());
        assert_eq!(w.layers[2].attn.compressor.as_ref().unwrap().ape.len(), 128 * 128);
        assert_eq!(
            (
                w.layers[3].ffn.experts[7].w2.out_dim,
                w.layers[3].ffn.experts[7].w2.in_dim
            ),
            (128, 128)
        );
        assert_eq!(w.hc_head.fn_.len(), 4 * 4 * 128);
    }
    assert!(base(8).join("model.safetensors.index.json").exists());
    assert!(Dsv4Checkpoint::open(base(8)).unwrap().weights.files().len() > 2);
}

#[test]
fn missing_tensor_is_named() {
    let dir = copy_of(base(0));
    rewrite(&single_file(dir.path()), |ts| {
        ts.retain(|t| t.name != "layers.2.attn.compressor.ape")
    });
    let err = open_err(dir.path());
    assert!(
        err.contains("tensor `layers.2.attn.compressor.ape` is missing: expected F32 [128, 128]"),
        "{err}"
    );
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
}

#[test]
fn extra_tensor_is_named() {
    let dir = copy_of(base(0));
    rewrite(&single_file(dir.path()), |ts| {
        ts.push(Owned {
            name: "layers.0.attn.bogus".into(),
            dtype: Dtype::F32,
            shape: vec![2],
            data: vec![0; 8],
        })
    });
    let err = open_err(dir.path());
    assert!(err.contains("tensor `layers.0.attn.bogus` in "), "{err}");
    assert!(err.contains("model.safetensors is not part of the model"), "{err}");
    assert!(err.contains("found F32 [2]"), "{err}");
}

#[test]
fn misshaped_tensor_is_named() {
    let dir = copy_of(base(0));
    rewrite(&single_file(dir.path()), |ts| {
        let t = ts.iter_mut().find(|t| t.name == "layers.1.attn.attn_sink").unwrap();
        t.shape = vec![2, 2];
    });
    let err = open_err(dir.path());
    assert!(
        err.contains("tensor `layers.1.attn.attn_sink` in ")
            && err.contains("has the wrong shape: expected [4], found [2, 2]"),
        "{err}"
    );
}

#[test]
fn mistyped_tensor_is_named() {
    let dir = copy_of(base(0));
    rewrite(&single_file(dir.path()), |ts| {
        let t = ts.iter_mut().find(|t| t.name == "norm.weight").unwrap();
        t.dtype = Dtype::F16;
    });
    let err = open_err(dir.path());
    assert!(err.contains("tensor `norm.weight` in "), "{err}");
    assert!(err.contains("has the wrong dtype: expected BF16, found F16"), "{err}");
}

#[test]
fn truncated_file_names_the_cut_tensor() {
    let dir = copy_of(base(0));
    let path = single_file(dir.path());
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len - 100).unwrap();
    let err = open_err(dir.path());
    assert!(err.contains("model.safetensors: tensor `"), "{err}");
    assert!(err.contains(&format!("the file has only {} bytes", len - 100)), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn truncated_shard_names_the_cut_tensor() {
    let dir = copy_of(base(8));
    let shard = dir.path().join("model-00002-of-00003.safetensors");
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let err = open_err(dir.path());
    assert!(err.contains("model-00002-of-00003.safetensors: tensor `"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn index_that_disagrees_with_shards_is_reported() {
    let dir = copy_of(base(8));
    let index_path = dir.path().join("model.safetensors.index.json");
    let mut index: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let map = index["weight_map"].as_object_mut().unwrap();
    let wrong = map
        .iter()
        .find(|(_, f)| f.as_str() != Some("model-00001-of-00003.safetensors"))
        .map(|(n, _)| n.clone())
        .unwrap();
    map.insert(wrong.clone(), "model-00001-of-00003.safetensors".into());
    std::fs::write(&index_path, index.to_string()).unwrap();
    let err = open_err(dir.path());
    assert!(err.contains("model.safetensors.index.json"), "{err}");
    assert!(err.contains(&format!("`{wrong}`")), "{err}");
}

#[test]
fn missing_shard_file_is_reported() {
    let dir = copy_of(base(8));
    std::fs::remove_file(dir.path().join("model-00003-of-00003.safetensors")).unwrap();
    let err = open_err(dir.path());
    assert!(err.contains("model-00003-of-00003.safetensors"), "{err}");
}

#[test]
fn folder_without_weights_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(base(0).join("config.json"), dir.path().join("config.json")).unwrap();
    let err = open_err(dir.path());
    assert!(
        err.contains("holds neither model.safetensors nor model.safetensors.index.json"),
        "{err}"
    );
}

/// One tensor as owned parts.
pub struct Owned {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Rewrites a safetensors file through the reference `safetensors` crate after `edit` changes its tensors.
pub fn rewrite(path: &PathBuf, edit: impl FnOnce(&mut Vec<Owned>)) {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<Owned> = st
        .tensors()
        .into_iter()
        .map(|(name, t)| Owned {
            name,
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            data: t.data().to_vec(),
        })
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                TensorView::new(t.dtype, t.shape.clone(), &t.data).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

#[test]
fn hash_table_naming_a_missing_expert_is_named() {
    let dir = copy_of(base(0));
    rewrite(&single_file(dir.path()), |ts| {
        let t = ts.iter_mut().find(|t| t.name == "layers.1.ffn.gate.tid2eid").unwrap();
        t.data[5 * 8 * 2 + 8..5 * 8 * 2 + 16].copy_from_slice(&8i64.to_le_bytes());
    });
    let err = open_err(dir.path());
    assert!(
        err.contains("model.safetensors: tensor `layers.1.ffn.gate.tid2eid`: "),
        "{err}"
    );
    assert!(
        err.contains("token 5 routes to expert 8, but config.json has 8 routed experts"),
        "{err}"
    );
}

#[test]
fn checkpoint_mappings_ask_for_huge_pages() {
    if !std::path::Path::new("/proc/self/smaps").exists() {
        eprintln!("skipped: no /proc/self/smaps on this system, so the mapping's flags cannot be read");
        return;
    }
    let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp.is_empty() || thp.contains("[never]") {
        eprintln!(
            "skipped: transparent huge pages are off in this kernel ({}), so no advice is taken",
            thp.trim()
        );
        return;
    }
    let dir = copy_of(base(0));
    let ckpt = Dsv4Checkpoint::open(dir.path()).unwrap();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let file = single_file(dir.path());
    let at = smaps
        .find(&*file.to_string_lossy())
        .expect("the checkpoint's mapping is listed");
    let flags = smaps[at..].lines().find(|l| l.starts_with("VmFlags:")).unwrap();
    assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
    drop(ckpt);
}
