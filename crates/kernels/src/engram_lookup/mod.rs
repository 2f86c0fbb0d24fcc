//! `engram_lookup`: DeepSeek V4.1 Engram's FP8 table rows, `row = e4m3(codes) * e8m0(scale)` per 32 columns, for every hash head of a token.

mod cpu;
mod cuda;

pub use cpu::{SCALE_BLOCK, engram_lookup};
pub use cuda::engram_lookup_cuda;

use tensorfold_formats::{e4m3, e8m0};

use crate::contract::rng::Rng;
use crate::contract::{Arg, Backend, Bound, Buf, Case, Kernel, Launch, OutBuf, OutKind, OutSpec};
use crate::faults::Faults;

pub struct EngramLookup;

impl Kernel for EngramLookup {
    fn name(&self) -> &'static str {
        "engram_lookup"
    }

    fn family(&self) -> &'static str {
        "dsv41"
    }

    fn bound(&self) -> Bound {
        Bound {
            rel_norm: 0.0,
            abs: 0.0,
            rel: 0.0,
            why: "exact: an e4m3 value times a power-of-two scale in the normal range is an f32",
        }
    }

    fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for (rows, heads, dim, table_rows) in [
            (1, 1, 32, 1),
            (17, 24, 256, 1031),
            (31, 3, 64, 257),
            (5, 17, 96, 7),
            (3, 24, 256, 20_011),
        ] {
            cases.push(Case::new(
                rows,
                &[("heads", heads), ("dim", dim), ("table_rows", table_rows)],
            ));
        }
        cases
    }

    fn inputs(&self, case: &Case, rng: &mut Rng) -> Vec<Arg> {
        let (heads, dim, table_rows) = (case.get("heads"), case.get("dim"), case.get("table_rows"));
        // Every finite code, both signs, subnormals included; e8m0 scales around the checkpoint's 2^-10..2^2.
        let table: Vec<u8> = (0..table_rows * dim)
            .map(|_| match rng.below(255) as u8 {
                0x7F => 0x7E,
                c => c,
            })
            .collect();
        let scales: Vec<u8> = (0..table_rows * dim / SCALE_BLOCK)
            .map(|_| 117 + rng.below(13) as u8)
            .collect();
        // The first and last table rows always appear, so an off-by-one cannot hide.
        let ids: Vec<i32> = (0..case.rows * heads)
            .map(|i| match i {
                0 => table_rows - 1,
                1 => 0,
                _ => rng.below(table_rows as u64) as usize,
            } as i32)
            .collect();
        vec![
            Arg::shared("table", Buf::U8(table)),
            Arg::shared("scales", Buf::U8(scales)),
            Arg::per_row("ids", Buf::I32(ids), heads),
        ]
    }

    fn outputs(&self, case: &Case) -> Vec<OutSpec> {
        vec![OutSpec {
            name: "rows",
            kind: OutKind::F32,
            row_len: case.get("heads") * case.get("dim"),
        }]
    }

    fn reference(&self, case: &Case, inputs: &[Arg]) -> Vec<Vec<f64>> {
        let dim = case.get("dim");
        let (table, scales, ids) = (inputs[0].buf.u8(), inputs[1].buf.u8(), inputs[2].buf.i32());
        let blocks = dim / SCALE_BLOCK;
        let mut y = Vec::with_capacity(ids.len() * dim);
        for &id in ids {
            let id = id as usize;
            for j in 0..dim {
                let scale = e8m0::decode(scales[id * blocks + j / SCALE_BLOCK]) as f64;
                y.push(e4m3::decode(table[id * dim + j]) as f64 * scale);
            }
        }
        vec![y]
    }

    fn launches(&self, backend: Backend) -> Vec<Launch> {
        crate::contract::records(backend, self.cuda())
    }

    fn cuda(&self) -> Option<&'static crate::cuda::CudaKernel> {
        Some(&cuda::KERNEL)
    }

    fn controls(&self) -> &'static [&'static str] {
        &["scale_next_block", "skip_last_head", "id_off_by_one"]
    }

    fn run(&self, case: &Case, inputs: &[Arg], launch: &Launch, faults: Faults, out: &mut [OutBuf<'_>]) {
        let (table, scales, ids) = (inputs[0].buf.u8(), inputs[1].buf.u8(), inputs[2].buf.i32());
        let (heads, dim) = (case.get("heads"), case.get("dim"));
        match launch {
            Launch::Cpu(l) => engram_lookup(table, scales, dim, ids, out[0].f32(), l, faults),
            Launch::Cuda(c) => engram_lookup_cuda(c, table, scales, dim, heads, ids, out[0].f32(), faults)
                .unwrap_or_else(|e| panic!("{e}")),
        }
    }
}
