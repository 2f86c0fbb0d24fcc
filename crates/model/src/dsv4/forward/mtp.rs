//! The MTP layer: predicts the token after next from the last layer's streams and the next token's embedding.

use super::device::Device;
use super::{Dsv4Model, ForwardOptions, Output, block, linear, ops};
use crate::dsv4::batch::Batch;
use crate::dsv4::cache::Dsv4Cache;

impl Dsv4Model {
    /// MTP layer `mtp_idx` on `batch`: row i joins `streams` row i (the main model's last-layer streams at that position) with the embedding of `batch.token_ids[i]` (the token that follows it); returns `[rows, vocab]`.
    pub fn forward_mtp(
        &self,
        mtp_idx: usize,
        batch: &Batch,
        streams: &[f32],
        cache: &mut Dsv4Cache,
        device: impl Into<Device>,
    ) -> Result<Vec<f32>, String> {
        let opts = ForwardOptions::default();
        Ok(self
            .forward_mtp_with(mtp_idx, batch, streams, cache, device, &opts)?
            .logits)
    }

    /// `forward_mtp` with `opts`: logits only for the rows asked for; `last_streams` is the layer's output `[rows, hc, D]` (the input of a chained step).
    pub fn forward_mtp_with(
        &self,
        mtp_idx: usize,
        batch: &Batch,
        streams: &[f32],
        cache: &mut Dsv4Cache,
        device: impl Into<Device>,
        opts: &ForwardOptions,
    ) -> Result<Output, String> {
        let c = &self.config;
        let w = self
            .weights
            .mtp
            .get(mtp_idx)
            .ok_or_else(|| format!("the checkpoint has no MTP layer {mtp_idx}"))?;
        let layer_idx = c.num_hidden_layers + mtp_idx;
        let device = device.into();
        let _turn = super::turn(&device, opts);
        let mut pass = self.pass(batch, cache, device, layer_idx..layer_idx + 1, |seq| {
            seq.mtp_len[mtp_idx]
        })?;
        pass.ranks = opts.ranks.clone();
        let (rows, d, hc) = (pass.rows(), c.hidden_size, c.hc_mult);
        if streams.len() != rows * hc * d {
            return Err(format!(
                "MTP input streams hold {} values, expected {rows} x {hc} x {d}",
                streams.len()
            ));
        }
        let eps = pass.eps();
        let dev = &pass.device;
        let mut emb = dev.alloc(rows * d);
        ops::embedding(dev, &self.weights.embed.bytes, d, &pass.ids, &mut emb);
        let mut e = dev.alloc(rows * d);
        ops::rms_norm(dev, &emb, &w.enorm, eps, &mut e);
        let mut h = dev.alloc(streams.len());
        ops::rms_norm(dev, &dev.put_slice(streams), &w.hnorm, eps, &mut h);
        let pe = linear::fp8(&pass, &e, &w.e_proj); // [rows, D]
        let ph = linear::fp8(&pass, &h, &w.h_proj); // [rows * hc, D]
        // Each stream's h projection plus its row's e projection, on the device: a join of one slot and a "shared" row.
        let mut pe_streams = dev.alloc(rows * hc * d);
        let from: Vec<usize> = (0..rows * hc).map(|s| s / hc).collect();
        pe_streams.copy_rows(dev, &(0..rows * hc).collect::<Vec<_>>(), &pe, &from, d);
        let mut x = dev.alloc(rows * hc * d);
        ops::moe_join(dev, &ph, &pe_streams, 1, d, &mut x);
        let x = block::block(&pass, layer_idx, &w.block, &x, cache);
        for g in &pass.groups {
            cache.seq_mut(g.seq, c).mtp_len[mtp_idx] += g.rows.len() as u32;
        }
        let logits = self.logits(&pass, &x, &w.hc_head, &w.norm, opts);
        let logits = super::picked(&pass, logits, opts.picks);
        let (last_streams, values) = super::read_back(&pass, cache, x, logits);
        let mut out = Output {
            last_streams,
            ..Output::default()
        };
        out.place(values?, opts.picks);
        Ok(out)
    }
}
