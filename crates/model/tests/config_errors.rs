//! A wrong or missing config field is an error naming the field and the file.

use std::path::Path;

use tensorfold_model::config::dsv4::Dsv4Config;
use tensorfold_model::synth::Preset;

fn tiny_json() -> serde_json::Value {
    serde_json::to_value(Preset::Tiny.config()).unwrap()
}

fn parse_err(v: &serde_json::Value) -> String {
    Dsv4Config::parse(Path::new("/ckpt/config.json"), &v.to_string())
        .expect_err("bad config parsed")
        .to_string()
}

#[test]
fn tiny_config_round_trips() {
    let v = tiny_json();
    let c = Dsv4Config::parse(Path::new("config.json"), &v.to_string()).unwrap();
    assert_eq!(c, Preset::Tiny.config());
}

#[test]
fn missing_field_is_named() {
    let mut v = tiny_json();
    v.as_object_mut().unwrap().remove("hidden_size");
    let err = parse_err(&v);
    assert!(err.starts_with("/ckpt/config.json: field `hidden_size`"), "{err}");
    assert!(err.contains("missing field"), "{err}");
}

#[test]
fn missing_nested_field_is_named() {
    let mut v = tiny_json();
    v["rope_scaling"].as_object_mut().unwrap().remove("beta_fast");
    let err = parse_err(&v);
    assert!(err.contains("field `rope_scaling.beta_fast`"), "{err}");
}

#[test]
fn wrong_type_is_named() {
    let mut v = tiny_json();
    v["num_hidden_layers"] = serde_json::json!("four");
    let err = parse_err(&v);
    assert!(err.starts_with("/ckpt/config.json: field `num_hidden_layers`"), "{err}");
    assert!(err.contains("invalid type"), "{err}");
}

#[test]
fn inconsistent_values_are_named() {
    let cases: [(&str, serde_json::Value, &str); 5] = [
        (
            "compress_ratios",
            serde_json::json!([0, 4, 128]),
            "expected num_hidden_layers + num_nextn_predict_layers = 5",
        ),
        ("compress_ratios", serde_json::json!([0, 4, 128, 8, 0]), "entry 3 is 8"),
        ("model_type", serde_json::json!("deepseek_v3"), "not DeepSeek V4"),
        ("o_groups", serde_json::json!(3), "must divide num_attention_heads 4"),
        (
            "num_experts_per_tok",
            serde_json::json!(9),
            "more than n_routed_experts 8",
        ),
    ];
    for (field, value, needle) in cases {
        let mut v = tiny_json();
        v[field] = value;
        let err = parse_err(&v);
        assert!(
            err.contains(&format!("field `{field}`")) && err.contains(needle),
            "{field}: {err}"
        );
    }
}

#[test]
fn unknown_extra_fields_are_accepted() {
    let mut v = tiny_json();
    v["transformers_version"] = serde_json::json!("5.24.0");
    Dsv4Config::parse(Path::new("config.json"), &v.to_string()).unwrap();
}
