//! Host cache writes a pass defers to its end, so no layer waits for the GPU to hand back rows it produced.

use super::Pass;
use super::act::Act;
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::{CompressorState, Dsv4Cache};

/// Entries a compressor finished in this pass, on the pass's device: each group's in turn.
pub(crate) struct Fresh {
    /// `[entries, head_dim]`, group after group.
    pub entries: Act,
    /// How many entries each group (in the pass's group order) finished.
    pub counts: Vec<usize>,
}

impl Fresh {
    /// The first row of group `g`'s entries.
    pub fn first(&self, g: usize) -> usize {
        self.counts[..g].iter().sum()
    }
}

/// One deferred write into the sequences' host state.
pub(crate) enum Pending {
    /// The rows' KV, into layer `layer`'s window rows.
    Window { layer: usize, kv: Act },
    /// A compressor's new projections, the entries they finished, then the trim of what no entry needs.
    Compressor {
        layer: usize,
        kind: EntryKind,
        ratio: usize,
        kv: Act,
        gate: Act,
        fresh: Option<Fresh>,
    },
}

/// The compressor state of `kind` in layer `layer_idx` of group `g`'s sequence.
pub(crate) fn state<'c>(
    cache: &'c mut Dsv4Cache,
    pass: &Pass<'_>,
    g: usize,
    layer_idx: usize,
    kind: EntryKind,
) -> &'c mut CompressorState {
    let layer = &mut cache.seq_mut(pass.groups[g].seq, &pass.model.config).layers[layer_idx];
    let s = if kind == EntryKind::Kv {
        &mut layer.compressor
    } else {
        &mut layer.indexer
    };
    s.as_mut().expect("a compressed layer has compressor state")
}

impl Pass<'_> {
    /// Queues a host write for the end of the pass.
    pub(crate) fn defer(&self, p: Pending) {
        self.pending.borrow_mut().push(p);
    }

    /// Calls `f` with the entries of `kind` layer `layer` finished in this pass so far, if any.
    pub(crate) fn with_fresh<R>(&self, layer: usize, kind: EntryKind, f: impl FnOnce(Option<&Fresh>) -> R) -> R {
        let pending = self.pending.borrow();
        let fresh = pending.iter().find_map(|p| match p {
            Pending::Compressor {
                layer: l,
                kind: k,
                fresh,
                ..
            } if *l == layer && *k == kind => fresh.as_ref(),
            _ => None,
        });
        f(fresh)
    }

    /// Reads the deferred rows and `extra` back (one wait for the GPU), writes the rows into the sequences' state in the order queued, and returns `extra`'s values.
    pub(crate) fn settle(&self, cache: &mut Dsv4Cache, extra: Vec<Act>) -> Vec<Vec<f32>> {
        let (layout, hd) = (&self.model.layout, self.model.config.head_dim);
        let mut acts = Vec::new();
        let mut writes = Vec::new();
        for p in self.pending.take() {
            match p {
                Pending::Window { layer, kv } => {
                    acts.push(kv);
                    writes.push(Write::Window { layer });
                }
                Pending::Compressor {
                    layer,
                    kind,
                    ratio,
                    kv,
                    gate,
                    fresh,
                } => {
                    acts.extend([kv, gate]);
                    let counts = fresh.map(|f| {
                        acts.push(f.entries);
                        f.counts
                    });
                    writes.push(Write::Compressor {
                        layer,
                        kind,
                        ratio,
                        counts,
                    });
                }
            }
        }
        let extras = extra.len();
        acts.extend(extra);
        let mut values = self.device.read_all(acts);
        let extra = values.split_off(values.len() - extras);
        self.device.mark(|| "read back".into());
        let mut values = values.into_iter();
        let mut next = || values.next().expect("one read-back a deferred buffer");
        for w in writes {
            match w {
                Write::Window { layer } => cache.put_window_rows(layout, layer, &self.groups, &next(), hd),
                Write::Compressor {
                    layer,
                    kind,
                    ratio,
                    counts,
                } => {
                    let (kv, gate) = (next(), next());
                    let width = kv.len() / self.rows().max(1);
                    let fresh = counts.map(|c| (next(), c));
                    let ehd = fresh
                        .as_ref()
                        .map_or(0, |(e, c)| e.len() / c.iter().sum::<usize>().max(1));
                    let (section, floats) = (layout.section(layer, kind), layout.floats);
                    let mut offset = 0;
                    for (g, group) in self.groups.iter().enumerate() {
                        let st = state(cache, self, g, layer, kind);
                        for &r in &group.rows {
                            st.kv.extend_from_slice(&kv[r * width..(r + 1) * width]);
                            st.gate.extend_from_slice(&gate[r * width..(r + 1) * width]);
                        }
                        if let Some((entries, counts)) = &fresh {
                            let first = st.num_entries;
                            st.num_entries += counts[g];
                            for i in 0..counts[g] {
                                let value = &entries[(offset + i) * ehd..(offset + i + 1) * ehd];
                                cache
                                    .store
                                    .put(&cache.tables[&group.seq], section, first + i, value, floats);
                            }
                            offset += counts[g];
                        }
                        let end = group.start + group.rows.len() as u32;
                        state(cache, self, g, layer, kind).trim(end, ratio);
                    }
                }
            }
        }
        extra
    }
}

/// A deferred write, its buffers taken out to be read back together.
enum Write {
    Window {
        layer: usize,
    },
    Compressor {
        layer: usize,
        kind: EntryKind,
        ratio: usize,
        counts: Option<Vec<usize>>,
    },
}
