//! A HyperLogLog distinct counter (precision 12) with a fixed, portable hash.

use ebb_guest::Value;
use ebb_guest::state::{StateReader, StateWriter};

/// Index bits: `2^12 = 4096` registers, standard error `1.04 / 64 ≈ 1.6%`.
pub const PRECISION: u32 = 12;
const REGISTERS: usize = 1 << PRECISION;
/// Largest register value: leading zeros of the remaining 52 bits, plus one.
const MAX_RANK: u8 = (64 - PRECISION + 1) as u8;

/// 64-bit FNV-1a followed by the MurmurHash3 finalizer (FNV alone mixes its
/// high bits poorly, and those pick the register). Fixed on every platform,
/// so states from different hosts merge.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The bytes that identify a value for distinct counting; `None` for NULL.
/// A float with an integer value counts as that integer (`1 = 1.0`), and
/// text counts as its UTF-8 bytes (a table's `value` column arrives as bytes).
fn identity(value: &Value) -> Option<Vec<u8>> {
    const INT: u8 = 1;
    const FLOAT: u8 = 2;
    const BOOL: u8 = 3;
    const STRING: u8 = 4;
    let tagged = |tag: u8, body: &[u8]| [&[tag][..], body].concat();
    Some(match value {
        Value::Null => return None,
        Value::Int(i) => tagged(INT, &i.to_le_bytes()),
        Value::Float(x) if x.fract() == 0.0 && x.abs() < 9.223_372_036_854_776e18 => {
            tagged(INT, &(*x as i64).to_le_bytes())
        }
        Value::Float(x) if x.is_nan() => tagged(FLOAT, &f64::NAN.to_bits().to_le_bytes()),
        Value::Float(x) => tagged(FLOAT, &x.to_bits().to_le_bytes()),
        Value::Bool(b) => tagged(BOOL, &[u8::from(*b)]),
        Value::Text(s) => tagged(STRING, s.as_bytes()),
        Value::Bytes(b) => tagged(STRING, b),
    })
}

/// HyperLogLog registers. Merge (register-wise max) is exact, associative
/// and commutative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyperLogLog {
    registers: Vec<u8>,
}

impl Default for HyperLogLog {
    fn default() -> Self {
        HyperLogLog {
            registers: vec![0; REGISTERS],
        }
    }
}

impl HyperLogLog {
    /// Adds a value; NULL is ignored.
    pub fn add(&mut self, value: &Value) {
        let Some(bytes) = identity(value) else {
            return;
        };
        let h = hash(&bytes);
        let index = (h >> (64 - PRECISION)) as usize;
        let rank = ((h << PRECISION).leading_zeros() + 1).min(u32::from(MAX_RANK)) as u8;
        self.registers[index] = self.registers[index].max(rank);
    }

    /// Combines two counters.
    pub fn merge(mut self, other: &HyperLogLog) -> HyperLogLog {
        for (mine, theirs) in self.registers.iter_mut().zip(&other.registers) {
            *mine = (*mine).max(*theirs);
        }
        self
    }

    /// The estimated number of distinct values, with Ertl's improved
    /// estimator ("New cardinality estimation algorithms for HyperLogLog
    /// sketches", 2017), which needs no bias tables or range switches.
    pub fn estimate(&self) -> f64 {
        let m = REGISTERS as f64;
        let mut histogram = [0u32; MAX_RANK as usize + 1];
        for &r in &self.registers {
            histogram[usize::from(r)] += 1;
        }
        let q = usize::from(MAX_RANK) - 1;
        let mut z = m * tau(1.0 - f64::from(histogram[q + 1]) / m);
        for k in (1..=q).rev() {
            z = 0.5 * (z + f64::from(histogram[k]));
        }
        z += m * sigma(f64::from(histogram[0]) / m);
        m * m / (2.0 * std::f64::consts::LN_2 * z)
    }

    /// Encodes canonically: sparse (index delta, rank) pairs when fewer than
    /// a third of the registers are set, all 4096 registers otherwise.
    pub fn encode(&self) -> Vec<u8> {
        let set = self.registers.iter().filter(|&&r| r != 0).count();
        let mut w = StateWriter::new();
        if set * 3 < REGISTERS {
            w.u64(1).u64(set as u64);
            let mut previous = 0;
            for (i, &r) in self.registers.iter().enumerate().filter(|(_, r)| **r != 0) {
                w.u64((i - previous) as u64).u64(u64::from(r));
                previous = i;
            }
        } else {
            w.u64(0).bytes(&self.registers);
        }
        w.finish()
    }

    /// Decodes what [`HyperLogLog::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<HyperLogLog, String> {
        let mut r = StateReader::new(bytes);
        let mut hll = HyperLogLog::default();
        match r.u64()? {
            0 => {
                let registers = r.bytes()?;
                if registers.len() != REGISTERS {
                    return Err(format!(
                        "{} registers, expected {REGISTERS}",
                        registers.len()
                    ));
                }
                hll.registers.copy_from_slice(registers);
            }
            1 => {
                let set = r.u64()?;
                let mut index = 0u64;
                for position in 0..set {
                    let delta = r.u64()?;
                    if position > 0 && delta == 0 {
                        return Err("register indexes are not increasing".to_owned());
                    }
                    index = index.saturating_add(delta);
                    let slot = usize::try_from(index)
                        .ok()
                        .and_then(|i| hll.registers.get_mut(i))
                        .ok_or("register index out of range")?;
                    *slot = u8::try_from(r.u64()?).map_err(|_| "register value too large")?;
                }
            }
            other => return Err(format!("unknown encoding {other}")),
        }
        r.finish()?;
        if hll.registers.iter().any(|&v| v > MAX_RANK) {
            return Err("register value too large".to_owned());
        }
        Ok(hll)
    }
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if z == previous {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == previous {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_fixed() {
        // Pinned so a change of hash (which would break merging states
        // written by older plugin builds) fails loudly.
        assert_eq!(hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(hash(b"ebb"), 0xeaa7_79d0_a67d_baf9);
    }

    #[test]
    fn integral_floats_count_as_integers_and_text_as_bytes() {
        assert_eq!(identity(&Value::Float(1.0)), identity(&Value::Int(1)));
        assert_ne!(identity(&Value::Float(1.5)), identity(&Value::Int(1)));
        assert_eq!(
            identity(&Value::Text("a".into())),
            identity(&Value::Bytes(b"a".to_vec()))
        );
        assert_eq!(identity(&Value::Null), None);
    }

    #[test]
    fn both_encodings_round_trip_and_corruption_is_rejected() {
        let mut hll = HyperLogLog::default();
        for i in 0..10 {
            hll.add(&Value::Int(i));
        }
        let sparse = hll.encode();
        assert!(sparse.len() < 64);
        assert_eq!(HyperLogLog::decode(&sparse), Ok(hll.clone()));
        for i in 0..100_000 {
            hll.add(&Value::Int(i));
        }
        let dense = hll.encode();
        assert_eq!(HyperLogLog::decode(&dense), Ok(hll));
        assert!(HyperLogLog::decode(&dense[..100]).is_err());
        assert!(HyperLogLog::decode(&[7]).is_err());
        assert!(HyperLogLog::decode(&[1, 1, 0xff, 0x7f, 1]).is_err());
    }
}
