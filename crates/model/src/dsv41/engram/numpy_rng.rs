//! numpy's `default_rng(seed).integers(0, high, n, int64)`: SeedSequence, PCG64 and Lemire's bounded draw.

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
/// SeedSequence's entropy pool, in 32-bit words.
const POOL_SIZE: usize = 4;
/// PCG's 128-bit LCG multiplier.
const PCG_MULT: u128 = (2_549_297_995_355_413_924 << 64) + 4_865_540_595_714_422_341;

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

/// The pool of `SeedSequence(seed)` (no spawn key).
fn seed_pool(seed: u64) -> [u32; POOL_SIZE] {
    let mut entropy = vec![seed as u32];
    if seed >> 32 != 0 {
        entropy.push((seed >> 32) as u32);
    }
    let mut hash_const = INIT_A;
    let mut pool = [0u32; POOL_SIZE];
    for (i, p) in pool.iter_mut().enumerate() {
        *p = hashmix(entropy.get(i).copied().unwrap_or(0), &mut hash_const);
    }
    for i_src in 0..POOL_SIZE {
        for i_dst in 0..POOL_SIZE {
            if i_src != i_dst {
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src], &mut hash_const));
            }
        }
    }
    for &word in entropy.iter().skip(POOL_SIZE) {
        for p in pool.iter_mut() {
            *p = mix(*p, hashmix(word, &mut hash_const));
        }
    }
    pool
}

/// `SeedSequence(seed).generate_state(4, uint64)`.
fn generate_state(seed: u64) -> [u64; 4] {
    let pool = seed_pool(seed);
    let mut hash_const = INIT_B;
    let mut words = [0u32; 8];
    for (i, w) in words.iter_mut().enumerate() {
        let mut v = pool[i % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *w = v ^ (v >> XSHIFT);
    }
    std::array::from_fn(|i| words[2 * i] as u64 | (words[2 * i + 1] as u64) << 32)
}

/// numpy's PCG64 bit generator (XSL-RR output over a 128-bit LCG).
pub struct Pcg64 {
    state: u128,
    inc: u128,
}

impl Pcg64 {
    /// `np.random.default_rng(seed)`'s bit generator.
    pub fn new(seed: u64) -> Pcg64 {
        let s = generate_state(seed);
        let init_state = (s[0] as u128) << 64 | s[1] as u128;
        let init_seq = (s[2] as u128) << 64 | s[3] as u128;
        let mut rng = Pcg64 {
            state: 0,
            inc: init_seq << 1 | 1,
        };
        rng.step();
        rng.state = rng.state.wrapping_add(init_state);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let x = ((self.state >> 64) as u64) ^ (self.state as u64);
        x.rotate_right((self.state >> 122) as u32)
    }

    /// A uniform draw in `0..=max` by Lemire's method, as numpy's `integers` for ranges above 2^32.
    fn bounded(&mut self, max: u64) -> u64 {
        let excl = max.wrapping_add(1);
        let mut m = self.next_u64() as u128 * excl as u128;
        if (m as u64) < excl {
            let threshold = (u64::MAX - max) % excl;
            while (m as u64) < threshold {
                m = self.next_u64() as u128 * excl as u128;
            }
        }
        (m >> 64) as u64
    }
}

/// `np.random.default_rng(seed).integers(0, high, n, dtype=np.int64)` for `high` above 2^32.
pub fn integers(seed: u64, high: u64, n: usize) -> Vec<u64> {
    assert!(high > 1 << 32, "integers: numpy draws ranges up to 2^32 another way");
    let mut rng = Pcg64::new(seed);
    (0..n).map(|_| rng.bounded(high - 1)).collect()
}
