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

/// One captured part: where its graph reads the input streams (its own buffer, or another graph's output it was captured on), and the outputs it writes.
struct Captured {
    x: CudaSlice<f32>,
    x_at: u64,
    outs: Vec<(CudaSlice<f32>, usize)>,
    graph: Graph,
}

/// What is known of a (block, part, rows) shape so far: seen once (with its outputs' lengths), recorded, or left eager.
enum Shape {
    Seen(Vec<usize>),
    Ready(Box<Captured>),
    Eager,
}

/// Integers the graphs of one (part, rows) read, and the serial of the pass that last copied them in.
type SharedInts = (CudaSlice<i32>, u64);

/// A device's captured block parts, by the block's address, the part and the pass's row count.
pub(crate) struct Replays {
    shapes: Mutex<HashMap<(usize, Part, usize), Shape>>,
    /// The integers every graph of a (part, rows) reads, and the pass that last wrote them.
    ints: Mutex<HashMap<(Part, usize), SharedInts>>,
    on: AtomicBool,
    launches: AtomicU64,
    programmatic: AtomicU64,
    /// Copies made ahead of replays: input streams, then integers.
    copied: (AtomicU64, AtomicU64),
}

impl Default for Replays {
    fn default() -> Replays {
        Replays {
            shapes: Mutex::default(),
            ints: Mutex::default(),
            on: AtomicBool::new(true),
            launches: AtomicU64::new(0),
            programmatic: AtomicU64::new(0),
            copied: (AtomicU64::new(0), AtomicU64::new(0)),
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

    /// Copies made ahead of graph replays so far: (input streams, positions or token ids).
    pub fn graph_copies_in(&self) -> (u64, u64) {
        let (x, i) = &self.replays.copied;
        (x.load(Ordering::Relaxed), i.load(Ordering::Relaxed))
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

/// The device when this pass replays graphs.
fn replaying<'p>(pass: &'p Pass<'_>) -> Option<&'p CudaDevice> {
    let on = |c: &&CudaDevice| c.replays.on.load(Ordering::Relaxed) && cuda::holds_turn() && slots::by_slot(pass);
    pass.device.cuda().filter(on)
}

/// The input buffer of block `w`'s MoE graph at this pass's shape, for the streams it will read to be written there (no copy at replay).
pub(crate) fn ffn_input(pass: &Pass<'_>, w: &Block, len: usize) -> Option<Act> {
    input(pass, Part::Ffn, w, len)
}

/// The input buffer of block `w`'s attention-front graph at this pass's shape, where that graph reads a buffer of its own.
pub(crate) fn front_input(pass: &Pass<'_>, w: &Block, len: usize) -> Option<Act> {
    input(pass, Part::Front, w, len)
}

/// A ready graph's own input buffer of `len` values, lent.
fn input(pass: &Pass<'_>, part: Part, w: &Block, len: usize) -> Option<Act> {
    let c = replaying(pass)?;
    let key = (w as *const Block as usize, part, pass.rows());
    let shapes = c.replays.shapes.lock().expect("graph shapes poisoned");
    let Some(Shape::Ready(g)) = shapes.get(&key) else {
        return None;
    };
    let (ptr, _) = g.x.device_ptr(&c.gpu.stream);
    if ptr != g.x_at || g.x.len() < len {
        return None;
    }
    // SAFETY: the device keeps its graphs, so the buffer outlives the pass; only this part's replay reads it, queued after the writes to it.
    Some(Act::Lent(
        unsafe { Borrowed::new(c.gpu.stream.upgrade_device_ptr::<f32>(ptr, len)) },
        len,
    ))
}

/// `run` on this pass, or its graph's replay at decode shapes on one GPU.
fn replayed(pass: &Pass<'_>, part: Part, w: &Block, x: &Act, run: &dyn Fn(&Pass<'_>, &Act) -> Vec<Act>) -> Vec<Act> {
    let Some(c) = replaying(pass) else {
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
            match catch_unwind(AssertUnwindSafe(|| capture(pass, part, c, x, &lens, run))) {
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

/// The integers the graphs of (part, rows) read, lent; made on first use.
fn shared_ints(c: &CudaDevice, part: Part, rows: usize) -> Result<Act<i32>, String> {
    let mut ints = c.replays.ints.lock().expect("graph integers poisoned");
    let (buf, _) = match ints.entry((part, rows)) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => e.insert((c.gpu.zeros::<i32>(rows)?, 0)),
    };
    let (ptr, _) = buf.device_ptr(&c.gpu.stream);
    // SAFETY: the device keeps these buffers for its life; nothing frees them through this handle.
    Ok(Act::Lent(
        unsafe { Borrowed::new(c.gpu.stream.upgrade_device_ptr::<i32>(ptr, rows)) },
        rows,
    ))
}

/// Copies `x` (unless it is where the graph reads it) and, once a pass, the part's integers into the graph's inputs, launches it and lends its output buffers to the pass.
fn replay(pass: &Pass<'_>, part: Part, c: &CudaDevice, g: &mut Captured, x: &Act) -> Vec<Act> {
    let s = &c.gpu.stream;
    let (Some((xs, n)), Some((is, rows))) = (x.dev(), ints(pass, part).dev()) else {
        panic!("host buffers in a GPU pass");
    };
    if xs.device_ptr(s).0 != g.x_at {
        // SAFETY: x_at is this graph's own buffer or the output buffer of another graph the device keeps, `n` values long (checked at capture).
        let mut to = unsafe { Borrowed::new(s.upgrade_device_ptr::<f32>(g.x_at, n)) };
        cuda_ok("copying streams in", s.memcpy_dtod(&xs.slice(..n), &mut *to));
        c.replays.copied.0.fetch_add(1, Ordering::Relaxed);
    }
    {
        let mut shared = c.replays.ints.lock().expect("graph integers poisoned");
        let (buf, last) = shared.get_mut(&(part, rows)).expect("the integers of a captured shape");
        if *last != pass.serial {
            cuda_ok(
                "copying positions or token ids in",
                s.memcpy_dtod(&is.slice(..rows), &mut buf.slice_mut(..rows)),
            );
            *last = pass.serial;
            c.replays.copied.1.fetch_add(1, Ordering::Relaxed);
        }
    }
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

/// Records `run` over fixed buffers shaped like `x` (`x` itself where it is another graph's output, lent), the part's shared integers and outputs of `lens`.
fn capture(
    pass: &Pass<'_>,
    part: Part,
    c: &CudaDevice,
    x: &Act,
    lens: &[usize],
    run: &dyn Fn(&Pass<'_>, &Act) -> Vec<Act>,
) -> Result<Captured, String> {
    let gpu: &Gpu = c.gpu;
    let (n, rows) = (x.len(), pass.rows());
    let adopt = match x {
        Act::Lent(b, len) if *len == n => Some(b.device_ptr(&gpu.stream).0),
        _ => None,
    };
    let own = gpu.zeros::<f32>(if adopt.is_some() { 1 } else { n })?;
    let x_at = adopt.unwrap_or_else(|| own.device_ptr(&gpu.stream).0);
    let ints = shared_ints(c, part, rows)?;
    let mut outs = lens
        .iter()
        .map(|&l| Ok((gpu.zeros::<f32>(l)?, l)))
        .collect::<Result<Vec<_>, String>>()?;
    let fixed = match part {
        Part::Front => pass.fixed(ints, pass.device.zeros(0)),
        Part::Ffn => pass.fixed(pass.device.zeros(0), ints),
    };
    // SAFETY: x_at is `own` or a kept graph's output buffer, `n` values long; both outlive the capture.
    let xin = Act::Lent(
        unsafe { Borrowed::new(gpu.stream.upgrade_device_ptr::<f32>(x_at, n)) },
        n,
    );
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
    drop((xin, fixed));
    Ok(Captured {
        x: own,
        x_at,
        outs,
        graph,
    })
}
