//! Ranks as processes of one machine: a collective over Unix-domain sockets, rank 0 the hub every other rank connects to.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use super::collective::Collective;

/// One rank's end of a socket collective: rank 0 holds a stream to every other rank, the others one to rank 0.
pub struct SocketCollective {
    rank: usize,
    ranks: usize,
    /// Rank 0: the streams of ranks 1..N in rank order; another rank: its stream to rank 0.
    links: Mutex<Vec<Link>>,
    /// Why the collective stopped working, once it has: every later call fails with it.
    broken: Mutex<Option<String>>,
}

struct Link {
    rank: usize,
    rx: BufReader<UnixStream>,
    tx: BufWriter<UnixStream>,
}

impl Link {
    fn new(rank: usize, s: UnixStream) -> std::io::Result<Link> {
        Ok(Link {
            rank,
            rx: BufReader::with_capacity(1 << 16, s.try_clone()?),
            tx: BufWriter::with_capacity(1 << 16, s),
        })
    }

    fn send(&mut self, buf: &[f32]) -> std::io::Result<()> {
        self.tx.write_all(&(buf.len() as u64).to_le_bytes())?;
        let bytes: Vec<u8> = buf.iter().flat_map(|v| v.to_bits().to_le_bytes()).collect();
        self.tx.write_all(&bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tx.flush()
    }

    fn recv(&mut self) -> std::io::Result<Vec<f32>> {
        let mut len = [0u8; 8];
        self.rx.read_exact(&mut len)?;
        let mut bytes = vec![0u8; u64::from_le_bytes(len) as usize * 4];
        self.rx.read_exact(&mut bytes)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_bits(u32::from_le_bytes(c.try_into().expect("4 bytes"))))
            .collect())
    }
}

/// What a rank that is not the hub says first: its rank and the rank count, as the hub checks them.
const HELLO: u32 = 0x7466_726b;

impl SocketCollective {
    /// Rank `rank` of `ranks` (not 0): connects to the hub listening at `path`.
    pub fn connect(path: &Path, rank: usize, ranks: usize) -> Result<SocketCollective, String> {
        let s = UnixStream::connect(path)
            .map_err(|e| format!("rank {rank}: cannot reach rank 0 at {}: {e}", path.display()))?;
        let mut link = Link::new(0, s).map_err(|e| e.to_string())?;
        let hello = [
            f32::from_bits(HELLO),
            f32::from_bits(rank as u32),
            f32::from_bits(ranks as u32),
        ];
        link.send(&hello)
            .and_then(|_| link.flush())
            .map_err(|e| format!("rank {rank}: greeting rank 0: {e}"))?;
        Ok(SocketCollective::new(rank, ranks, vec![link]))
    }

    /// Rank 0 of `ranks`: accepts one connection from each other rank on `listener`, calling `alive` while it waits (an `Err` from it ends the wait).
    pub fn accept(
        listener: &UnixListener,
        ranks: usize,
        mut alive: impl FnMut() -> Result<(), String>,
    ) -> Result<SocketCollective, String> {
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut links: Vec<Option<Link>> = (1..ranks).map(|_| None).collect();
        while links.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(|e| e.to_string())?;
                    let mut link = Link::new(0, s).map_err(|e| e.to_string())?;
                    let hello = link.recv().map_err(|e| format!("a rank's greeting: {e}"))?;
                    let word = |i: usize| hello.get(i).map(|v| v.to_bits() as usize);
                    let (rank, n) = match (word(0), word(1), word(2)) {
                        (Some(h), Some(r), Some(n)) if h == HELLO as usize => (r, n),
                        _ => return Err("a process that is not a rank connected to rank 0's socket".into()),
                    };
                    if n != ranks || rank == 0 || rank >= ranks || links[rank - 1].is_some() {
                        return Err(format!("rank {rank} of {n} connected to a group of {ranks} ranks"));
                    }
                    link.rank = rank;
                    links[rank - 1] = Some(link);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    alive()?;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(format!("accepting ranks: {e}")),
            }
        }
        Ok(SocketCollective::new(0, ranks, links.into_iter().flatten().collect()))
    }

    fn new(rank: usize, ranks: usize, links: Vec<Link>) -> SocketCollective {
        SocketCollective {
            rank,
            ranks,
            links: Mutex::new(links),
            broken: Mutex::new(None),
        }
    }

    /// Whether every linked rank is still connected, without reading anything; an `Err` names one that is gone (for transports beside these sockets).
    pub fn peers_alive(&self) -> Result<(), String> {
        let mut links = self.links.lock().map_err(|_| "collective links poisoned".to_string())?;
        for l in links.iter_mut() {
            // Filling the buffer without waiting reads nothing away: pending bytes stay for the next round.
            let closed = l.rx.get_ref().set_nonblocking(true).is_err()
                || match l.rx.fill_buf() {
                    Ok(pending) => pending.is_empty(),
                    Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                };
            let _ = l.rx.get_ref().set_nonblocking(false);
            if closed {
                return Err(format!(
                    "rank {} stopped (its connection closed); the rank group is down, restart to serve again",
                    l.rank
                ));
            }
        }
        Ok(())
    }

    /// Runs one round over the links; an I/O failure breaks the collective for good, naming the rank it came from.
    fn round<T>(&self, f: impl FnOnce(&mut [Link]) -> Result<T, (usize, std::io::Error)>) -> T {
        if let Some(why) = self.broken() {
            panic!("{why}");
        }
        let mut links = self.links.lock().expect("collective links");
        match f(&mut links) {
            Ok(v) => v,
            Err((rank, e)) => {
                let why = if e.kind() == std::io::ErrorKind::UnexpectedEof
                    || e.kind() == std::io::ErrorKind::BrokenPipe
                    || e.kind() == std::io::ErrorKind::ConnectionReset
                {
                    format!(
                        "rank {rank} stopped (its connection closed); the rank group is down, restart to serve again"
                    )
                } else {
                    format!("rank {rank} failed: {e}; the rank group is down, restart to serve again")
                };
                *self.broken.lock().expect("collective state") = Some(why.clone());
                drop(links);
                panic!("{why}");
            }
        }
    }
}

/// Tags an I/O failure with the rank whose link it came from.
fn at(rank: usize) -> impl FnOnce(std::io::Error) -> (usize, std::io::Error) {
    move |e| (rank, e)
}

impl Collective for SocketCollective {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn all_gather(&self, mine: &[f32]) -> Vec<Vec<f32>> {
        let me = self.rank;
        self.round(|links| {
            if me != 0 {
                let hub = &mut links[0];
                hub.send(mine).and_then(|_| hub.flush()).map_err(at(0))?;
                return (0..self.ranks).map(|_| hub.recv().map_err(at(0))).collect();
            }
            let mut all = vec![mine.to_vec()];
            for l in links.iter_mut() {
                all.push(l.recv().map_err(at(l.rank))?);
            }
            for l in links.iter_mut() {
                for part in &all {
                    l.send(part).map_err(at(l.rank))?;
                }
                l.flush().map_err(at(l.rank))?;
            }
            Ok(all)
        })
    }

    fn gather(&self, mine: &[f32], root: usize) -> Option<Vec<Vec<f32>>> {
        if root != 0 {
            let all = self.all_gather(mine);
            return (self.rank == root).then_some(all);
        }
        let me = self.rank;
        self.round(|links| {
            if me != 0 {
                let hub = &mut links[0];
                hub.send(mine).and_then(|_| hub.flush()).map_err(at(0))?;
                return Ok(None);
            }
            let mut all = vec![mine.to_vec()];
            for l in links.iter_mut() {
                all.push(l.recv().map_err(at(l.rank))?);
            }
            Ok(Some(all))
        })
    }

    fn broadcast(&self, buf: &mut Vec<f32>, root: usize) {
        let me = self.rank;
        let out = self.round(|links| {
            if me != 0 {
                let hub = &mut links[0];
                if me == root {
                    hub.send(buf).and_then(|_| hub.flush()).map_err(at(0))?;
                    return Ok(None);
                }
                return hub.recv().map(Some).map_err(at(0));
            }
            let value = if root == 0 {
                std::mem::take(buf)
            } else {
                let l = links.iter_mut().find(|l| l.rank == root).expect("root is a rank");
                l.recv().map_err(at(root))?
            };
            for l in links.iter_mut().filter(|l| l.rank != root) {
                l.send(&value).and_then(|_| l.flush()).map_err(at(l.rank))?;
            }
            Ok(Some(value))
        });
        if let Some(v) = out {
            *buf = v;
        }
    }

    fn all_reduce_sum(&self, buf: &mut [f32]) {
        let me = self.rank;
        let sum = self.round(|links| {
            if me != 0 {
                let hub = &mut links[0];
                hub.send(buf).and_then(|_| hub.flush()).map_err(at(0))?;
                return hub.recv().map_err(at(0));
            }
            let mut sum = buf.to_vec();
            for l in links.iter_mut() {
                let part = l.recv().map_err(at(l.rank))?;
                sum.iter_mut().zip(&part).for_each(|(a, b)| *a += b);
            }
            for l in links.iter_mut() {
                l.send(&sum).and_then(|_| l.flush()).map_err(at(l.rank))?;
            }
            Ok(sum)
        });
        buf.copy_from_slice(&sum);
    }

    fn barrier(&self) {
        self.all_gather(&[]);
    }

    fn broken(&self) -> Option<String> {
        self.broken.lock().expect("collective state").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// `n` socket ranks as threads of this test, each running `f`.
    fn on_ranks<T: Send + 'static>(n: usize, f: impl Fn(SocketCollective) -> T + Send + Sync + 'static) -> Vec<T> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ranks.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let f = Arc::new(f);
        let workers: Vec<_> = (1..n)
            .map(|r| {
                let (f, path) = (f.clone(), path.clone());
                std::thread::spawn(move || f(SocketCollective::connect(&path, r, n).unwrap()))
            })
            .collect();
        let hub = SocketCollective::accept(&listener, n, || Ok(())).unwrap();
        let mut out = vec![f(hub)];
        out.extend(workers.into_iter().map(|h| h.join().expect("rank thread")));
        out
    }

    #[test]
    fn gather_broadcast_and_reduce_agree_on_every_rank() {
        let out = on_ranks(3, |c| {
            let mut seen = Vec::new();
            for round in 0..20 {
                seen.extend(crate::dsv4::forward::collective::exercise(&c, round));
                let mine = vec![(c.rank() * 100 + round) as f32; c.rank() + 1];
                let g = c.gather(&mine, 0);
                assert_eq!(g.is_some(), c.rank() == 0);
                if let Some(g) = g {
                    assert_eq!(g.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![1, 2, 3]);
                }
                assert_eq!(c.peers_alive(), Ok(()), "no rank leaves before the barrier");
                c.barrier();
            }
            seen
        });
        crate::dsv4::forward::collective::agreed(&out);
    }

    #[test]
    fn a_rank_that_leaves_breaks_the_hub_with_its_name_for_good() {
        let out = on_ranks(3, |c| {
            if c.rank() == 2 {
                return Vec::new();
            }
            let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.all_gather(&[1.0])));
            let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.barrier()));
            let why = |p: Box<dyn std::any::Any + Send>| p.downcast_ref::<String>().cloned().unwrap_or_default();
            let alive = if c.rank() == 0 { c.peers_alive().err() } else { None };
            vec![first.err().map(why), second.err().map(why), alive]
        });
        let why = out[0][0].clone().expect("the hub's gather fails");
        assert!(
            out[0][2].as_deref().is_some_and(|w| w.contains("rank 2 stopped")),
            "{:?}",
            out[0]
        );
        assert!(why.contains("rank 2 stopped"), "{why}");
        assert_eq!(
            out[0][1].as_deref(),
            Some(why.as_str()),
            "later rounds fail at once, alike"
        );
        assert!(
            out[1][0].as_deref().is_some_and(|w| w.contains("rank 0")),
            "{:?}",
            out[1]
        );
    }
}
