//! The one error type for malformed checkpoint slices.

use std::fmt;

/// A slice whose length, shape or contents do not fit the format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// `what` has `actual` elements where the shape needs `expected`.
    Length {
        what: &'static str,
        expected: usize,
        actual: usize,
    },
    /// `what` has `len` elements, which is not a multiple of `multiple`.
    NotMultiple {
        what: &'static str,
        len: usize,
        multiple: usize,
    },
    /// `what[idx]` holds `code`, outside the format's code range.
    InvalidCode { what: &'static str, idx: usize, code: u32 },
    /// `what[idx]` is NaN or infinite where a scale must be derived from it.
    NonFinite { what: &'static str, idx: usize },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Length { what, expected, actual } => {
                write!(f, "{what}: expected {expected} elements, got {actual}")
            }
            Self::NotMultiple { what, len, multiple } => {
                write!(f, "{what}: length {len} is not a multiple of {multiple}")
            }
            Self::InvalidCode { what, idx, code } => {
                write!(f, "{what}[{idx}]: invalid code {code:#x}")
            }
            Self::NonFinite { what, idx } => write!(f, "{what}[{idx}]: value is not finite"),
        }
    }
}

impl std::error::Error for FormatError {}

/// Errors unless `actual == expected`.
pub(crate) fn check_len(what: &'static str, expected: usize, actual: usize) -> Result<(), FormatError> {
    if expected == actual {
        Ok(())
    } else {
        Err(FormatError::Length { what, expected, actual })
    }
}

/// Errors unless `len` is a multiple of `multiple`.
pub(crate) fn check_multiple(what: &'static str, len: usize, multiple: usize) -> Result<(), FormatError> {
    if len.is_multiple_of(multiple) {
        Ok(())
    } else {
        Err(FormatError::NotMultiple { what, len, multiple })
    }
}
