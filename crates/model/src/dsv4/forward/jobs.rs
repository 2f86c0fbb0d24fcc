//! What rank 0 hands the other ranks each layer, as values or as one f32 buffer a collective broadcasts, and each rank's share of it.

use tensorfold_kernels::sparse_attn::AttnShape;

use super::collective::Collective;
use super::device::Device;
use super::{Dsv4Model, Pass, moe, ops};
use crate::dsv4::weights::Moe;

/// The attention core of block `block` for every head: rank `r` attends heads `r*H/N..(r+1)*H/N` with its own sink and the layer's RoPE.
pub(crate) struct AttnJob {
    pub block: usize,
    pub ratio: usize,
    pub q: Vec<f32>,
    pub lists: Vec<i32>,
    pub table: Vec<f32>,
    pub positions: Vec<i32>,
    pub shape: AttnShape,
}

/// Block `block`'s routed experts: rank `r` computes experts `r*E/N..(r+1)*E/N`, each whole.
pub(crate) struct MoeJob {
    pub block: usize,
    pub x: Vec<f32>,
    pub idx: Vec<i32>,
    pub weights: Vec<f32>,
}

pub(crate) enum Job {
    Attn(AttnJob),
    Moe(MoeJob),
    /// The group is closing: the other ranks return.
    Stop,
}

const ATTN: u32 = 1;
const MOE: u32 = 2;
const STOP: u32 = 3;

/// Appends words and arrays to a buffer of f32 bit patterns.
struct Writer(Vec<f32>);

impl Writer {
    fn word(&mut self, v: usize) {
        self.0
            .push(f32::from_bits(u32::try_from(v).expect("job fields fit in 32 bits")));
    }
    fn floats(&mut self, v: &[f32]) {
        self.word(v.len());
        self.0.extend_from_slice(v);
    }
    fn ints(&mut self, v: &[i32]) {
        self.word(v.len());
        self.0.extend(v.iter().map(|&i| f32::from_bits(i as u32)));
    }
}

/// Reads back what `Writer` wrote.
struct Reader<'a>(&'a [f32]);

impl Reader<'_> {
    fn word(&mut self) -> usize {
        let (v, rest) = self.0.split_first().expect("a job buffer cut short");
        self.0 = rest;
        v.to_bits() as usize
    }
    fn floats(&mut self) -> Vec<f32> {
        let n = self.word();
        let (v, rest) = self.0.split_at(n);
        self.0 = rest;
        v.to_vec()
    }
    fn ints(&mut self) -> Vec<i32> {
        self.floats().iter().map(|v| v.to_bits() as i32).collect()
    }
}

impl Job {
    /// The job as one buffer (bit patterns, so every value travels exactly).
    pub(crate) fn encode(&self) -> Vec<f32> {
        let mut w = Writer(Vec::new());
        match self {
            Job::Attn(a) => {
                w.word(ATTN as usize);
                w.word(a.block);
                w.word(a.ratio);
                w.word(a.shape.num_heads);
                w.word(a.shape.head_dim);
                w.0.push(a.shape.softmax_scale);
                w.word(a.shape.bf16_probs as usize);
                w.floats(&a.q);
                w.ints(&a.lists);
                w.floats(&a.table);
                w.ints(&a.positions);
            }
            Job::Moe(m) => {
                w.word(MOE as usize);
                w.word(m.block);
                w.floats(&m.x);
                w.ints(&m.idx);
                w.floats(&m.weights);
            }
            Job::Stop => w.word(STOP as usize),
        }
        w.0
    }

    pub(crate) fn decode(buf: &[f32]) -> Job {
        let mut r = Reader(buf);
        match r.word() as u32 {
            ATTN => {
                let (block, ratio, num_heads, head_dim) = (r.word(), r.word(), r.word(), r.word());
                let softmax_scale = r.word();
                let bf16_probs = r.word() != 0;
                Job::Attn(AttnJob {
                    block,
                    ratio,
                    shape: AttnShape {
                        num_heads,
                        head_dim,
                        softmax_scale: f32::from_bits(softmax_scale as u32),
                        bf16_probs,
                    },
                    q: r.floats(),
                    lists: r.ints(),
                    table: r.floats(),
                    positions: r.ints(),
                })
            }
            MOE => Job::Moe(MoeJob {
                block: r.word(),
                x: r.floats(),
                idx: r.ints(),
                weights: r.floats(),
            }),
            _ => Job::Stop,
        }
    }
}

/// The experts rank `rank` of `ranks` owns.
pub fn owned(experts: usize, ranks: usize, rank: usize) -> std::ops::Range<usize> {
    let per = experts / ranks;
    rank * per..(rank + 1) * per
}

/// The blocks of `model` in order: the main layers, then the MTP layers.
fn blocks(model: &Dsv4Model) -> impl Iterator<Item = &crate::dsv4::weights::Block> {
    let main = model.weights.layers.iter();
    main.chain(model.weights.mtp.iter().map(|m| &m.block))
}

/// Which block's MoE `w` is.
pub(crate) fn moe_block(model: &Dsv4Model, w: &Moe) -> usize {
    blocks(model)
        .position(|b| std::ptr::eq(&b.ffn, w))
        .expect("the MoE belongs to the model")
}

fn block_of(model: &Dsv4Model, block: usize) -> &crate::dsv4::weights::Block {
    blocks(model).nth(block).expect("a job names a block of the model")
}

/// This rank's share of `job`: its heads' attention outputs `[rows, H/N * hd]`, or its experts' rows in expert then slot order.
pub(crate) fn run(model: &Dsv4Model, device: &Device, comm: &dyn Collective, job: &Job) -> Vec<f32> {
    let (rank, ranks) = (comm.rank(), comm.ranks());
    match job {
        Job::Attn(a) => {
            let (rows, h, hd) = (a.positions.len(), a.shape.num_heads, a.shape.head_dim);
            let heads = h / ranks;
            let (from, width) = (rank * heads * hd, heads * hd);
            let q: Vec<f32> = (0..rows)
                .flat_map(|r| a.q[r * h * hd + from..r * h * hd + from + width].iter().copied())
                .collect();
            let sink = &block_of(model, a.block).attn.attn_sink[rank * heads..(rank + 1) * heads];
            let shape = AttnShape {
                num_heads: heads,
                ..a.shape
            };
            let mut o = device.alloc(rows * width);
            let (q, table, lists) = (device.put(q), device.put_slice(&a.table), device.put_slice(&a.lists));
            ops::sparse_attn(device, &q, &lists, &table, sink, shape, &mut o);
            let positions = device.put_slice(&a.positions);
            ops::rope(device, &mut o, &positions, hd, model.rope_for(a.ratio), true);
            o.into_vec(device)
        }
        Job::Moe(m) => {
            let w = &block_of(model, m.block).ffn;
            let pass = Pass::new(device.clone(), Vec::new(), Vec::new(), Vec::new(), model, None);
            let d = model.config.hidden_size;
            let k = m.idx.len() / (m.x.len() / d).max(1);
            let x = device.put_slice(&m.x);
            let mut out = Vec::new();
            for e in owned(w.experts.len(), ranks, rank) {
                if let Some(y) = moe::expert_rows(&pass, &w.experts[e], e, &x, &m.idx, &m.weights, k) {
                    out.extend_from_slice(&y.into_vec(device));
                }
            }
            out
        }
        Job::Stop => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_travel_bit_for_bit() {
        let attn = Job::Attn(AttnJob {
            block: 3,
            ratio: 4,
            q: vec![1.5, -0.0, f32::NAN, f32::MIN_POSITIVE / 2.0],
            lists: vec![-1, 0, 7, i32::MAX],
            table: vec![2.25; 5],
            positions: vec![0, 130],
            shape: AttnShape {
                num_heads: 4,
                head_dim: 8,
                softmax_scale: 0.125,
                bf16_probs: true,
            },
        });
        let buf = attn.encode();
        assert_eq!(
            Job::decode(&buf)
                .encode()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            buf.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let moe = Job::Moe(MoeJob {
            block: 1,
            x: vec![0.5; 6],
            idx: vec![3, 1],
            weights: vec![0.25, 0.75],
        });
        let buf = moe.encode();
        let Job::Moe(back) = Job::decode(&buf) else {
            panic!("a MoE job decodes as one")
        };
        assert_eq!(
            (back.block, back.x, back.idx, back.weights),
            (1, vec![0.5; 6], vec![3, 1], vec![0.25, 0.75])
        );
        assert!(matches!(Job::decode(&Job::Stop.encode()), Job::Stop));
    }
}
