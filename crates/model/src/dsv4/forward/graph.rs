//! Decode rounds' MoE halves as CUDA graphs: per block and row count, captured at the second sighting and replayed by one launch after; only in passes that hold the stream.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cudarc::driver::CudaSlice;
use tensorfold_kernels::cuda::{self, Gpu, Graph};

use super::act::{Act, cuda_ok};
use super::device::CudaDevice;
use super::{Pass, block, slots};
use crate::dsv4::weights::Block;

/// One captured MoE half: the fixed input streams, token ids and output streams its graph reads and writes.
struct Captured {
    x: CudaSlice<f32>,
    ids: CudaSlice<i32>,
    out: CudaSlice<f32>,
    graph: Graph,
}

/// What is known of a (block, rows) shape so far.
enum Shape {
    Seen,
    Ready(Box<Captured>),
    Eager,
}

/// A device's captured MoE halves, by the block's address and the pass's row count.
pub(crate) struct Replays {
    shapes: Mutex<HashMap<(usize, usize), Shape>>,
    on: AtomicBool,
    launches: AtomicU64,
}

impl Default for Replays {
    fn default() -> Replays {
        Replays {
            shapes: Mutex::default(),
            on: AtomicBool::new(true),
            launches: AtomicU64::new(0),
        }
    }
}

impl CudaDevice {
    /// Turns graph replay of repeated decode shapes on (the default) or off.
    pub fn set_graphs(&self, on: bool) {
        self.replays.on.store(on, Ordering::Relaxed);
    }

    /// Graph launches so far (captures included).
    pub fn graph_launches(&self) -> u64 {
        self.replays.launches.load(Ordering::Relaxed)
    }
}

/// The MoE half of block `w` on streams `x`: replayed from a graph where this shape ran before, else run eagerly.
pub(crate) fn ffn(pass: &Pass<'_>, w: &Block, x: &Act) -> Act {
    let replays = |c: &&CudaDevice| c.replays.on.load(Ordering::Relaxed) && cuda::holds_turn() && slots::by_slot(pass);
    let Some(c) = pass.device.cuda().filter(replays) else {
        return block::ffn(pass, w, x);
    };
    let key = (w as *const Block as usize, pass.rows());
    let mut shapes = c.replays.shapes.lock().expect("graph shapes poisoned");
    match shapes.get(&key) {
        None => {
            shapes.insert(key, Shape::Seen);
            return block::ffn(pass, w, x);
        }
        Some(Shape::Eager) => return block::ffn(pass, w, x),
        Some(Shape::Seen) => match catch_unwind(AssertUnwindSafe(|| capture(pass, c.gpu, w, x))) {
            Ok(Ok(g)) => {
                shapes.insert(key, Shape::Ready(Box::new(g)));
            }
            failed => {
                let why = match failed {
                    Ok(Err(why)) => why,
                    _ => "a launch failed while recording".into(),
                };
                eprintln!("warning: CUDA graph capture failed ({why}); this decode shape runs without graphs");
                shapes.insert(key, Shape::Eager);
                return block::ffn(pass, w, x);
            }
        },
        Some(Shape::Ready(_)) => {}
    }
    let Some(Shape::Ready(g)) = shapes.get_mut(&key) else {
        unreachable!("a ready shape")
    };
    replay(pass, c, g, x)
}

/// Copies `x` and the pass's token ids into the graph's inputs, launches it and copies its output out.
fn replay(pass: &Pass<'_>, c: &CudaDevice, g: &mut Captured, x: &Act) -> Act {
    let s = &c.gpu.stream;
    let (Act::Dev(xs, n), Act::Dev(ids, rows)) = (x, &pass.ids) else {
        panic!("host buffers in a GPU pass");
    };
    cuda_ok(
        "copying streams in",
        s.memcpy_dtod(&xs.slice(..*n), &mut g.x.slice_mut(..*n)),
    );
    cuda_ok(
        "copying token ids in",
        s.memcpy_dtod(&ids.slice(..*rows), &mut g.ids.slice_mut(..*rows)),
    );
    cuda_ok("replaying", g.graph.launch());
    c.replays.launches.fetch_add(1, Ordering::Relaxed);
    let mut out = pass.device.alloc::<f32>(*n);
    if let Act::Dev(o, _) = &mut out {
        cuda_ok(
            "copying streams out",
            s.memcpy_dtod(&g.out.slice(..*n), &mut o.slice_mut(..*n)),
        );
    }
    out
}

/// Records block `w`'s MoE half over fixed buffers shaped like `x` and the pass's token ids.
fn capture(pass: &Pass<'_>, gpu: &Gpu, w: &Block, x: &Act) -> Result<Captured, String> {
    let (n, rows) = (x.len(), pass.rows());
    let (xin, ids, mut out) = (gpu.zeros::<f32>(n)?, gpu.zeros::<i32>(rows)?, gpu.zeros::<f32>(n)?);
    let mut fixed = pass.with_ids(Act::Dev(ids, rows));
    let xin = Act::Dev(xin, n);
    let (graph, ()) = gpu.capture(|| {
        let f = block::ffn(&fixed, w, &xin);
        let Act::Dev(fs, _) = &f else {
            panic!("a host buffer in a GPU pass")
        };
        cuda_ok(
            "copying streams out",
            gpu.stream.memcpy_dtod(&fs.slice(..n), &mut out.slice_mut(..n)),
        );
    })?;
    let (Act::Dev(x, _), Act::Dev(ids, _)) = (xin, std::mem::replace(&mut fixed.ids, Act::Host(Vec::new()))) else {
        unreachable!("device buffers made above")
    };
    Ok(Captured { x, ids, out, graph })
}
