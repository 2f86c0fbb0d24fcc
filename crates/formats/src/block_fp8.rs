//! FP8 e4m3fn weights [rows, cols] times one scale per block (128x128 by default), grid row-major.

use crate::error::check_len;
use crate::{FormatError, e4m3, e8m0};

/// Rows and columns per scale block of DeepSeek V3/V4 and Kimi K2 weights.
pub const BLOCK: usize = 128;

/// The edge lengths of one scale block: `rows` x `cols` elements share one scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub rows: usize,
    pub cols: usize,
}

impl Block {
    /// DeepSeek V3/V4 and Kimi K2: 128x128.
    pub const B128: Block = Block { rows: 128, cols: 128 };
    /// DeepSeek V4.1 dense weights: 32x32.
    pub const B32: Block = Block { rows: 32, cols: 32 };
    /// DeepSeek V4.1 Engram tables: one scale per 32 columns of each row.
    pub const ROW32: Block = Block { rows: 1, cols: 32 };

    /// Scale grid shape (block rows, block cols) for a [rows, cols] weight.
    pub fn grid(self, rows: usize, cols: usize) -> (usize, usize) {
        (rows.div_ceil(self.rows), cols.div_ceil(self.cols))
    }
}

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
    Block::B128.grid(rows, cols)
}

/// Dequantizes a whole [rows, cols] weight with 128x128 blocks into `out`.
pub fn dequantize(q: &[u8], scales: BlockScales, rows: usize, cols: usize, out: &mut [f32]) -> Result<(), FormatError> {
    dequantize_blocks(q, scales, Block::B128, rows, cols, out)
}

/// Dequantizes a whole [rows, cols] weight with `block` scale blocks into `out`.
pub fn dequantize_blocks(
    q: &[u8],
    scales: BlockScales,
    block: Block,
    rows: usize,
    cols: usize,
    out: &mut [f32],
) -> Result<(), FormatError> {
    check_len("block_fp8 weight", rows * cols, q.len())?;
    check_len("block_fp8 output", rows * cols, out.len())?;
    let (grid_rows, grid_cols) = block.grid(rows, cols);
    check_len("block_fp8 scales", grid_rows * grid_cols, scales.len())?;
    if cols == 0 {
        return Ok(());
    }
    let rows_out = q.chunks_exact(cols).zip(out.chunks_exact_mut(cols));
    for (row_idx, (q_row, out_row)) in rows_out.enumerate() {
        dequantize_row_blocks(q_row, scales, block, rows, row_idx, out_row)?;
    }
    Ok(())
}

/// Dequantizes row `row_idx` of a [rows, out.len()] weight with 128x128 blocks; `scales` is the whole grid.
pub fn dequantize_row(
    q_row: &[u8],
    scales: BlockScales,
    rows: usize,
    row_idx: usize,
    out: &mut [f32],
) -> Result<(), FormatError> {
    dequantize_row_blocks(q_row, scales, Block::B128, rows, row_idx, out)
}

/// Dequantizes row `row_idx` of a [rows, out.len()] weight with `block` scale blocks; `scales` is the whole grid.
pub fn dequantize_row_blocks(
    q_row: &[u8],
    scales: BlockScales,
    block: Block,
    rows: usize,
    row_idx: usize,
    out: &mut [f32],
) -> Result<(), FormatError> {
    let cols = out.len();
    let (grid_rows, grid_cols) = block.grid(rows, cols);
    check_len("block_fp8 row", cols, q_row.len())?;
    check_len("block_fp8 scales", grid_rows * grid_cols, scales.len())?;
    assert!(row_idx < rows, "block_fp8 row {row_idx} out of {rows} rows");
    let first = (row_idx / block.rows) * grid_cols;
    let blocks = q_row.chunks(block.cols).zip(out.chunks_mut(block.cols));
    for (block_idx, (q_block, out_block)) in blocks.enumerate() {
        let s = scales.get(first + block_idx);
        for (&c, o) in q_block.iter().zip(out_block) {
            *o = e4m3::TABLE[c as usize] * s;
        }
    }
    Ok(())
}

/// Per-block amax of a [rows, cols] weight, floored; errors on non-finite input.
fn block_amax(w: &[f32], block: Block, rows: usize, cols: usize) -> Result<Vec<f32>, FormatError> {
    check_len("block_fp8 weight", rows * cols, w.len())?;
    if let Some(idx) = w.iter().position(|v| !v.is_finite()) {
        return Err(FormatError::NonFinite {
            what: "block_fp8 weight",
            idx,
        });
    }
    let (grid_rows, grid_cols) = block.grid(rows, cols);
    let mut amax = vec![AMAX_FLOOR; grid_rows * grid_cols];
    for (row_idx, row) in w.chunks_exact(cols.max(1)).enumerate() {
        let grid_row = &mut amax[(row_idx / block.rows) * grid_cols..][..grid_cols];
        for (m, part) in grid_row.iter_mut().zip(row.chunks(block.cols)) {
            *m = part.iter().fold(*m, |m, v| m.max(v.abs()));
        }
    }
    Ok(amax)
}

/// Encodes each element as e4m3(w / scale) with `scale_of(block index)`.
fn encode_blocks(w: &[f32], block: Block, cols: usize, scale_of: impl Fn(usize) -> f32) -> Vec<u8> {
    let grid_cols = cols.div_ceil(block.cols);
    let mut q = vec![0; w.len()];
    for (row_idx, (w_row, q_row)) in w
        .chunks_exact(cols.max(1))
        .zip(q.chunks_exact_mut(cols.max(1)))
        .enumerate()
    {
        let first = (row_idx / block.rows) * grid_cols;
        for (block_idx, (wb, qb)) in w_row.chunks(block.cols).zip(q_row.chunks_mut(block.cols)).enumerate() {
            let s = scale_of(first + block_idx);
            for (&v, c) in wb.iter().zip(qb) {
                *c = e4m3::encode(v / s);
            }
        }
    }
    q
}

/// DeepSeek V4 style: per 128x128 block s = 2^ceil(log2(max(amax, 1e-4) / 448)); returns (codes, e8m0 scales).
pub fn quantize_e8m0(w: &[f32], rows: usize, cols: usize) -> Result<(Vec<u8>, Vec<u8>), FormatError> {
    quantize_e8m0_blocks(w, Block::B128, rows, cols)
}

/// As [`quantize_e8m0`] with `block` scale blocks (DeepSeek V4.1: 32x32, Engram tables 1x32).
pub fn quantize_e8m0_blocks(
    w: &[f32],
    block: Block,
    rows: usize,
    cols: usize,
) -> Result<(Vec<u8>, Vec<u8>), FormatError> {
    let amax = block_amax(w, block, rows, cols)?;
    let scales: Vec<u8> = amax
        .iter()
        .map(|&m| e8m0::from_exponent(e8m0::ceil_log2(m / e4m3::MAX)))
        .collect();
    let q = encode_blocks(w, block, cols, |idx| e8m0::decode(scales[idx]));
    Ok((q, scales))
}

/// DeepSeek V3 style: per block scale_inv = max(amax, 1e-4) / 448; returns (codes, f32 scales).
pub fn quantize_f32_scales(w: &[f32], rows: usize, cols: usize) -> Result<(Vec<u8>, Vec<f32>), FormatError> {
    let scales: Vec<f32> = block_amax(w, Block::B128, rows, cols)?
        .iter()
        .map(|&m| m / e4m3::MAX)
        .collect();
    let q = encode_blocks(w, Block::B128, cols, |idx| scales[idx]);
    Ok((q, scales))
}
