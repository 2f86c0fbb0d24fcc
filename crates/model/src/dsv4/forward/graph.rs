//! Decode rounds' fixed-shape block parts as CUDA graphs (the attention front and the MoE half): per block, part and row count, captured at the second sighting and replayed by one launch after; only in passes that hold the stream.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cudarc::driver::{CudaSlice, DevicePtr};
use tensorfold_kernels::cuda::{self, Gpu, Graph};

use super::act::{Act, Borrowed, cuda_ok};
use super::device::CudaDevice;
use super::front::{self, Front};
use super::{Pass, block, slots};
use crate::dsv4::weights::Block;

/// The part of a block a graph records, and which of the pass's integers (positions or token ids) it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Part {
    Front,
    Ffn,
}

/// One captured part: the fixed input streams and integers its graph reads and the outputs it writes.
struct Captured {
    x: CudaSlice<f32>,
    ints: CudaSlice<i32>,
    outs: Vec<(CudaSlice<f32>, usize)>,
    graph: Graph,
}

/// What is known of a (block, part, rows) shape so far: seen once (with its outputs' lengths), recorded, or left eager.
enum Shape {
    Seen(Vec<usize>),
    Ready(Box<Captured>),
    Eager,
}

/// A device's captured block parts, by the block's address, the part and the pass's row count.
pub(crate) struct Replays {
    shapes: Mutex<HashMap<(usize, Part, usize), Shape>>,
    on: AtomicBool,
    launches: AtomicU64,
    programmatic: AtomicU64,
}

impl Default for Replays {
    fn default() -> Replays {
        Replays {
            shapes: Mutex::default(),
            on: AtomicBool::new(true),
            launches: AtomicU64::new(0),
            programmatic: AtomicU64::new(0),
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

    /// Kernel-to-kernel edges chained programmatically over the graphs captured so far.
    pub fn graph_programmatic_edges(&self) -> u64 {
        self.replays.programmatic.load(Ordering::Relaxed)
    }
}

/// The MoE half of block `w` on streams `x`: replayed from a graph where this shape ran before, else run eagerly.
pub(crate) fn ffn(pass: &Pass<'_>, w: &Block, x: &Act) -> Act {
    let mut out = replayed(pass, Part::Ffn, w, x, &|p, x| vec![block::ffn(p, w, x)]);
    out.pop().expect("the MoE half's output")
}

/// The attention front of block `w` (layer `layer_idx`) on streams `x`: replayed where this shape ran before, else run eagerly.
pub(crate) fn front(pass: &Pass<'_>, layer_idx: usize, w: &Block, x: &Act) -> Front {
    let parts = replayed(pass, Part::Front, w, x, &|p, x| {
        front::front(p, layer_idx, w, x).into_parts()
    });
    Front::from_parts(w, parts)
}

/// `run` on this pass, or its graph's replay at decode shapes on one GPU.
fn replayed(pass: &Pass<'_>, part: Part, w: &Block, x: &Act, run: &dyn Fn(&Pass<'_>, &Act) -> Vec<Act>) -> Vec<Act> {
    let replays = |c: &&CudaDevice| c.replays.on.load(Ordering::Relaxed) && cuda::holds_turn() && slots::by_slot(pass);
    let Some(c) = pass.device.cuda().filter(replays) else {
        return run(pass, x);
    };
    let key = (w as *const Block as usize, part, pass.rows());
    let mut shapes = c.replays.shapes.lock().expect("graph shapes poisoned");
    match shapes.get(&key) {
        None => {
            let out = run(pass, x);
            shapes.insert(key, Shape::Seen(out.iter().map(Act::len).collect()));
            return out;
        }
        Some(Shape::Eager) => return run(pass, x),
        Some(Shape::Seen(lens)) => {
            let lens = lens.clone();
            let chained = c.gpu.chains_captures();
            match catch_unwind(AssertUnwindSafe(|| capture(pass, part, c.gpu, x, &lens, run))) {
                Ok(Ok(g)) => {
                    let edges = g.graph.programmatic_edges() as u64;
                    c.replays.programmatic.fetch_add(edges, Ordering::Relaxed);
                    shapes.insert(key, Shape::Ready(Box::new(g)));
                }
                _ if chained && !c.gpu.chains_captures() => return run(pass, x),
                failed => {
                    let why = match failed {
                        Ok(Err(why)) => why,
                        _ => "a launch failed while recording".into(),
                    };
                    eprintln!("warning: CUDA graph capture failed ({why}); this decode shape runs without graphs");
                    shapes.insert(key, Shape::Eager);
                    return run(pass, x);
                }
            }
        }
        Some(Shape::Ready(_)) => {}
    }
    let Some(Shape::Ready(g)) = shapes.get_mut(&key) else {
        unreachable!("a ready shape")
    };
    replay(pass, part, c, g, x)
}

/// The pass's integers a part reads.
fn ints<'p>(pass: &'p Pass<'_>, part: Part) -> &'p Act<i32> {
    match part {
        Part::Front => &pass.pos,
        Part::Ffn => &pass.ids,
    }
}

/// Copies `x` and the part's integers into the graph's inputs, launches it and lends its output buffers to the pass.
fn replay(pass: &Pass<'_>, part: Part, c: &CudaDevice, g: &mut Captured, x: &Act) -> Vec<Act> {
    let s = &c.gpu.stream;
    let (Some((xs, n)), Some((is, rows))) = (x.dev(), ints(pass, part).dev()) else {
        panic!("host buffers in a GPU pass");
    };
    cuda_ok(
        "copying streams in",
        s.memcpy_dtod(&xs.slice(..n), &mut g.x.slice_mut(..n)),
    );
    cuda_ok(
        "copying positions or token ids in",
        s.memcpy_dtod(&is.slice(..rows), &mut g.ints.slice_mut(..rows)),
    );
    c.gpu.mark(|| format!("{part:?} copied in"));
    cuda_ok("replaying", g.graph.launch());
    c.replays.launches.fetch_add(1, Ordering::Relaxed);
    c.gpu.mark(|| format!("{part:?} replayed"));
    g.outs
        .iter()
        .map(|(o, len)| {
            let (ptr, _) = o.device_ptr(s);
            // SAFETY: the device keeps its graphs, so the buffer outlives the pass; only this graph's next replay rewrites it, queued after this pass's last use and after its read-back.
            let lent = unsafe { Borrowed::new(s.upgrade_device_ptr::<f32>(ptr, o.len())) };
            Act::Lent(lent, *len)
        })
        .collect()
}

/// Records `run` over fixed buffers shaped like `x`, the part's integers and outputs of `lens`.
fn capture(
    pass: &Pass<'_>,
    part: Part,
    gpu: &Gpu,
    x: &Act,
    lens: &[usize],
    run: &dyn Fn(&Pass<'_>, &Act) -> Vec<Act>,
) -> Result<Captured, String> {
    let (n, rows) = (x.len(), pass.rows());
    let (xin, ints) = (gpu.zeros::<f32>(n)?, gpu.zeros::<i32>(rows)?);
    let mut outs = lens
        .iter()
        .map(|&l| Ok((gpu.zeros::<f32>(l)?, l)))
        .collect::<Result<Vec<_>, String>>()?;
    let ints = Act::Dev(ints, rows);
    let mut fixed = match part {
        Part::Front => pass.fixed(ints, pass.device.zeros(0)),
        Part::Ffn => pass.fixed(pass.device.zeros(0), ints),
    };
    let xin = Act::Dev(xin, n);
    let (graph, ()) = gpu.capture(|| {
        let parts = run(&fixed, &xin);
        assert_eq!(parts.len(), outs.len(), "a captured part's outputs");
        for (p, (o, len)) in parts.iter().zip(outs.iter_mut()) {
            let Act::Dev(ps, pn) = p else {
                panic!("a host buffer in a GPU pass")
            };
            assert_eq!(pn, len, "a captured part's output length");
            if *len > 0 {
                cuda_ok(
                    "copying out",
                    gpu.stream.memcpy_dtod(&ps.slice(..*len), &mut o.slice_mut(..*len)),
                );
            }
        }
    })?;
    let ints = match part {
        Part::Front => &mut fixed.pos,
        Part::Ffn => &mut fixed.ids,
    };
    let (Act::Dev(x, _), Act::Dev(ints, _)) = (xin, std::mem::replace(ints, Act::Host(Vec::new()))) else {
        unreachable!("device buffers made above")
    };
    Ok(Captured { x, ints, outs, graph })
}
