//! A table of rows a kernel reads in one piece: rows held on the host, with gaps the pass's own device rows fill.

use super::Pass;
use super::act::Act;
use super::device::Device;
use super::pending::state;
use crate::dsv4::blocks::EntryKind;
use crate::dsv4::cache::Dsv4Cache;

/// Which table of a layer: its upload-ahead key is `layer * TABLES + which`.
#[derive(Clone, Copy)]
pub(crate) enum Which {
    Kv = 0,
    IndexKeys,
    CompressorKv,
    CompressorGate,
    IndexCompressorKv,
    IndexCompressorGate,
}

/// Tables a layer may upload ahead.
const TABLES: u64 = 6;

/// Rows of `width` floats: host values, and which rows come from the pass's rows or its fresh entries.
pub(crate) struct Table {
    host: Vec<f32>,
    width: usize,
    /// The upload-ahead key of the host rows.
    key: u64,
    /// (table row, row of the pass's activations).
    rows: (Vec<usize>, Vec<usize>),
    /// (table row, row of the layer's fresh entries), and whose entries those are.
    fresh: (Vec<usize>, Vec<usize>),
    fresh_of: Option<(usize, EntryKind)>,
}

impl Table {
    pub fn new(width: usize, layer: usize, which: Which) -> Table {
        Table {
            host: Vec::new(),
            width,
            key: layer as u64 * TABLES + which as u64,
            rows: (Vec::new(), Vec::new()),
            fresh: (Vec::new(), Vec::new()),
            fresh_of: None,
        }
    }

    /// Rows so far.
    pub fn len(&self) -> usize {
        self.host.len() / self.width
    }

    /// Appends host rows.
    pub fn host_rows(&mut self, values: &[f32]) {
        self.host.extend_from_slice(values);
    }

    /// Appends rows `src` of the activations `finish` is given.
    pub fn pass_rows(&mut self, src: &[usize]) {
        let first = self.len();
        self.rows.0.extend(first..first + src.len());
        self.rows.1.extend_from_slice(src);
        self.host.resize(self.host.len() + src.len() * self.width, 0.0);
    }

    /// Appends group `g`'s finished entries of `kind` in layer `layer_idx` (held ones from its blocks, then this pass's); returns the first one's row.
    pub fn entries(
        &mut self,
        pass: &Pass<'_>,
        layer_idx: usize,
        kind: EntryKind,
        cache: &mut Dsv4Cache,
        g: usize,
    ) -> usize {
        let first = self.len();
        let held = state(cache, pass, g, layer_idx, kind).num_entries;
        let section = pass.model.layout.section(layer_idx, kind);
        cache
            .store
            .gather(cache.table(pass.groups[g].seq), section, held, &mut self.host);
        pass.with_fresh(layer_idx, kind, |fresh| {
            if let Some(f) = fresh {
                let (n, from) = (f.counts[g], f.first(g));
                self.fresh.0.extend(first + held..first + held + n);
                self.fresh.1.extend(from..from + n);
                self.host.resize(self.host.len() + n * self.width, 0.0);
            }
        });
        self.fresh_of = Some((layer_idx, kind));
        first
    }

    /// The table on the pass's device, its pass rows read from `rows`; uploaded ahead of the stream where most of it is held rows, not the zeros the pass's rows overwrite.
    pub fn finish<'p>(self, pass: &'p Pass<'_>, rows: Option<&Act>) -> Uploaded<'p> {
        let dev = &pass.device;
        let (mut t, loan) = match 2 * (self.rows.0.len() + self.fresh.0.len()) <= self.len() {
            true => dev.put_ahead(self.key, self.host),
            false => (dev.put(self.host), None),
        };
        if let Some(src) = rows.filter(|_| !self.rows.0.is_empty()) {
            t.copy_rows(dev, &self.rows.0, src, &self.rows.1, self.width);
        }
        if let Some((layer, kind)) = self.fresh_of.filter(|_| !self.fresh.0.is_empty()) {
            pass.with_fresh(layer, kind, |f| {
                let f = f.expect("fresh entries the table counted");
                t.copy_rows(dev, &self.fresh.0, &f.entries, &self.fresh.1, self.width);
            });
        }
        Uploaded { act: t, loan, dev }
    }
}

/// A finished table; dropping it ends its upload's loan, so it must outlive the queuing of every kernel that reads it.
pub(crate) struct Uploaded<'p> {
    act: Act,
    loan: Option<u64>,
    dev: &'p Device,
}

impl std::ops::Deref for Uploaded<'_> {
    type Target = Act;

    fn deref(&self) -> &Act {
        &self.act
    }
}

impl Drop for Uploaded<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.loan {
            self.dev.ahead_done(key);
        }
    }
}
