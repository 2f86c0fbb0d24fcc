//! FP8 e4m3fn weights [rows, cols] times one scale per 128x128 block, grid [ceil(rows/128), ceil(cols/128)] row-major.

use crate::error::check_len;
use crate::{FormatError, e4m3, e8m0};

/// Rows and columns per scale block.
pub const BLOCK: usize = 128;

/// Smallest block amax, as DeepSeek's act_quant: keeps all-zero blocks finite.
const AMAX_FLOOR: f32 = 1e-4;

/// Block scales as stored in a checkpoint.
#[derive(Debug, Clone, Copy)]
pub enum BlockScales<'a> {
    /// e8m0 codes (DeepSeek V4 `.scale`).
    E8m0(&'a [u8]),
    /// f32 multipliers (DeepSeek V3 and Kimi K2 `weight_scale_inv`).
    F32(&'a [f32]),
}

impl BlockScales<'_> {
    fn len(&self) -> usize {
        match self {
            Self::E8m0(s) => s.len(),
            Self::F32(s) => s.len(),
        }
    }

    fn get(&self, idx: usize) -> f32 {
        match self {
            Self::E8m0(s) => e8m0::TABLE[s[idx] as usize],
            Self::F32(s) => s[idx],
        }
    }
}

/// Scale grid shape (block rows, block cols) for a [rows, cols] weight.
pub fn scale_grid(rows: usize, cols: usize) -> (usize, usize) {
    (rows.div_ceil(BLOCK), cols.div_ceil(BLOCK))
}

/// Dequantizes a whole [rows, cols] weight into `out`.
pub fn dequantize(q: &[u8], scales: BlockScales, rows: usize, cols: usize, out: &mut [f32]) -> Result<(), FormatError> {
    check_len("block_fp8 weight", rows * cols, q.len())?;
    check_len("block_fp8 output", rows * cols, out.len())?;
    let (grid_rows, grid_cols) = scale_grid(rows, cols);
    check_len("block_fp8 scales", grid_rows * grid_cols, scales.len())?;
    if cols == 0 {
        return Ok(());
    }
    let rows_out = q.chunks_exact(cols).zip(out.chunks_exact_mut(cols));
    for (row_idx, (q_row, out_row)) in rows_out.enumerate() {
        dequantize_row(q_row, scales, rows, row_idx, out_row)?;
    }
    Ok(())
}

/// Dequantizes row `row_idx` of a [rows, out.len()] weight; `scales` is the whole grid.
pub fn dequantize_row(
    q_row: &[u8],
    scales: BlockScales,
    rows: usize,
    row_idx: usize,
    out: &mut [f32],
) -> Result<(), FormatError> {
    let cols = out.len();
    let (grid_rows, grid_cols) = scale_grid(rows, cols);
    check_len("block_fp8 row", cols, q_row.len())?;
    check_len("block_fp8 scales", grid_rows * grid_cols, scales.len())?;
    assert!(row_idx < rows, "block_fp8 row {row_idx} out of {rows} rows");
    let first = (row_idx / BLOCK) * grid_cols;
    let blocks = q_row.chunks(BLOCK).zip(out.chunks_mut(BLOCK));
    for (block_idx, (q_block, out_block)) in blocks.enumerate() {
        let s = scales.get(first + block_idx);
        for (&c, o) in q_block.iter().zip(out_block) {
            *o = e4m3::TABLE[c as usize] * s;
        }
    }
    Ok(())
}

/// Per-block amax of a [rows, cols] weight, floored; errors on non-finite input.
fn block_amax(w: &[f32], rows: usize, cols: usize) -> Result<Vec<f32>, FormatError> {
    check_len("block_fp8 weight", rows * cols, w.len())?;
    if let Some(idx) = w.iter().position(|v| !v.is_finite()) {
        return Err(FormatError::NonFinite {
            what: "block_fp8 weight",
            idx,
        });
    }
    let (grid_rows, grid_cols) = scale_grid(rows, cols);
    let mut amax = vec![AMAX_FLOOR; grid_rows * grid_cols];
    for (row_idx, row) in w.chunks_exact(cols.max(1)).enumerate() {
        let grid_row = &mut amax[(row_idx / BLOCK) * grid_cols..][..grid_cols];
        for (m, block) in grid_row.iter_mut().zip(row.chunks(BLOCK)) {
            *m = block.iter().fold(*m, |m, v| m.max(v.abs()));
        }
    }
    Ok(amax)
}

/// Encodes each element as e4m3(w / scale) with `scale_of(block index)`.
fn encode_blocks(w: &[f32], cols: usize, scale_of: impl Fn(usize) -> f32) -> Vec<u8> {
    let grid_cols = cols.div_ceil(BLOCK);
    let mut q = vec![0; w.len()];
    for (row_idx, (w_row, q_row)) in w
        .chunks_exact(cols.max(1))
        .zip(q.chunks_exact_mut(cols.max(1)))
        .enumerate()
    {
        let first = (row_idx / BLOCK) * grid_cols;
        for (block_idx, (wb, qb)) in w_row.chunks(BLOCK).zip(q_row.chunks_mut(BLOCK)).enumerate() {
            let s = scale_of(first + block_idx);
            for (&v, c) in wb.iter().zip(qb) {
                *c = e4m3::encode(v / s);
            }
        }
    }
    q
}

/// DeepSeek V4 style: per block s = 2^ceil(log2(max(amax, 1e-4) / 448)); returns (codes, e8m0 scales).
pub fn quantize_e8m0(w: &[f32], rows: usize, cols: usize) -> Result<(Vec<u8>, Vec<u8>), FormatError> {
    let amax = block_amax(w, rows, cols)?;
    let scales: Vec<u8> = amax
        .iter()
        .map(|&m| e8m0::from_exponent(e8m0::ceil_log2(m / e4m3::MAX)))
        .collect();
    let q = encode_blocks(w, cols, |idx| e8m0::decode(scales[idx]));
    Ok((q, scales))
}

/// DeepSeek V3 style: per block scale_inv = max(amax, 1e-4) / 448; returns (codes, f32 scales).
pub fn quantize_f32_scales(w: &[f32], rows: usize, cols: usize) -> Result<(Vec<u8>, Vec<f32>), FormatError> {
    let scales: Vec<f32> = block_amax(w, rows, cols)?.iter().map(|&m| m / e4m3::MAX).collect();
    let q = encode_blocks(w, cols, |idx| scales[idx]);
    Ok((q, scales))
}
