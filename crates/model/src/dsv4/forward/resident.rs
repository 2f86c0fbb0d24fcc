//! Places every weight of a model on its GPU before the first pass, so no pass waits on an upload.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::Dsv4Model;
use super::device::{CudaDevice, Device};
use crate::dsv4::weights::{Attention, Bf16, Block, Compressor, Fp8, Hc, Moe, Mxfp4, Routing};

struct Up<'a>(&'a CudaDevice);

impl Up<'_> {
    fn put<T>(&self, host: &[T]) -> Result<(), String>
    where
        T: DeviceRepr + ValidAsZeroBits + Unpin + Send + Sync + 'static,
        cudarc::driver::CudaSlice<T>: Send + Sync,
    {
        self.0.resident.get(self.0.gpu, host).map(|_| ())
    }

    fn fp8(&self, w: &Fp8) -> Result<(), String> {
        self.put::<u8>(&w.codes)?;
        self.put::<u8>(&w.scales)
    }

    fn mxfp4(&self, w: &Mxfp4) -> Result<(), String> {
        self.put::<u8>(&w.packed)?;
        self.put::<u8>(&w.scales)
    }

    fn bf16(&self, w: &Bf16) -> Result<(), String> {
        self.put(w.words())
    }

    fn hc(&self, h: &Hc) -> Result<(), String> {
        self.put(&h.fn_)?;
        self.put(&h.base)?;
        self.put(&h.scale)
    }

    fn compressor(&self, c: &Compressor) -> Result<(), String> {
        self.bf16(&c.wkv)?;
        self.bf16(&c.wgate)?;
        self.put(&c.ape)?;
        self.put(&c.norm)
    }

    fn attention(&self, a: &Attention) -> Result<(), String> {
        for w in [&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b] {
            self.fp8(w)?;
        }
        self.put(&a.q_norm)?;
        self.put(&a.kv_norm)?;
        self.put(&a.attn_sink)?;
        if let Some(c) = &a.compressor {
            self.compressor(c)?;
        }
        if let Some(i) = &a.indexer {
            self.fp8(&i.wq_b)?;
            self.bf16(&i.weights_proj)?;
            self.compressor(&i.compressor)?;
        }
        Ok(())
    }

    fn moe(&self, m: &Moe) -> Result<(), String> {
        self.bf16(&m.gate)?;
        match &m.routing {
            Routing::Bias(b) => self.put(b)?,
            Routing::Hash(t) => self.put(t)?,
        }
        for e in &m.experts {
            for w in [&e.w1, &e.w2, &e.w3] {
                self.mxfp4(w)?;
            }
        }
        if let Some(s) = &m.shared {
            for w in [&s.w1, &s.w2, &s.w3] {
                self.fp8(w)?;
            }
        }
        Ok(())
    }

    fn block(&self, b: &Block) -> Result<(), String> {
        self.put(&b.attn_norm)?;
        self.put(&b.ffn_norm)?;
        self.hc(&b.hc_attn)?;
        self.hc(&b.hc_ffn)?;
        self.attention(&b.attn)?;
        self.moe(&b.ffn)
    }
}

impl Dsv4Model {
    /// Uploads every weight the passes read to `device`'s GPU, or on the CPU packs the FP8 and MXFP4 weights its GEMMs read; returns the bytes resident there or packed.
    pub fn upload(&self, device: &Device) -> Result<usize, String> {
        let Some(c) = device.cuda() else {
            let threads = device.cpu().map_or(1, |l| l.threads);
            return Ok(self.pack_for_cpu(threads) as usize);
        };
        let _turn = tensorfold_kernels::cuda::turn();
        let (u, w) = (Up(c), &self.weights);
        u.put::<u8>(&w.embed.bytes)?;
        for b in &w.layers {
            u.block(b)?;
        }
        for m in &w.mtp {
            u.block(&m.block)?;
            u.fp8(&m.e_proj)?;
            u.fp8(&m.h_proj)?;
            for v in [&m.enorm, &m.hnorm, &m.norm] {
                u.put(v)?;
            }
            u.hc(&m.hc_head)?;
        }
        u.put(&w.norm)?;
        u.hc(&w.hc_head)?;
        u.bf16(&w.head)?;
        u.put(self.rope_for(0))?;
        u.put(self.rope_for(4))?;
        c.gpu.sync()?;
        Ok(c.resident.bytes())
    }
}
