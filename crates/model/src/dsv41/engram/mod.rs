//! Engram (conditional n-gram memory): token map, hash constants and row ids, as DeepSeek V4.1 specifies them.

pub mod numpy_rng;
pub mod tables;
pub mod token_map;

pub use tables::{LayerTables, layer_tables, row_ids};
pub use token_map::TokenMap;
