//! Element types of checkpoint tensors, named as safetensors names them.

use std::fmt;

/// A tensor element type as written in a safetensors header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    BF16,
    F16,
    F32,
    F64,
    F8E4M3,
    F8E8M0,
    I8,
    U8,
    I16,
    I32,
    I64,
    U32,
    Bool,
}

impl DType {
    const ALL: [DType; 13] = [
        DType::BF16,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E8M0,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::Bool,
    ];

    /// The name in a safetensors header.
    pub fn name(self) -> &'static str {
        match self {
            DType::BF16 => "BF16",
            DType::F16 => "F16",
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::F8E4M3 => "F8_E4M3",
            DType::F8E8M0 => "F8_E8M0",
            DType::I8 => "I8",
            DType::U8 => "U8",
            DType::I16 => "I16",
            DType::I32 => "I32",
            DType::I64 => "I64",
            DType::U32 => "U32",
            DType::Bool => "BOOL",
        }
    }

    /// Parses a safetensors dtype name; `None` for names this engine does not read.
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F8E4M3 | DType::F8E8M0 | DType::I8 | DType::U8 | DType::Bool => 1,
            DType::BF16 | DType::F16 | DType::I16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_name("F8_E5M2"), None);
    }
}
