//! Jittered sampling intervals. A fixed 100 ms period can alias with a
//! training loop of the same period (every sample landing at the same phase
//! of the step, e.g. always at the peak of a temporary); uniform ±20 % jitter
//! spreads samples over all phases.

use std::time::Duration;

/// splitmix64: tiny, fast, good enough to pick sleep lengths (not crypto).
#[derive(Debug, Clone)]
pub struct Jitter {
    state: u64,
    base: Duration,
    spread: f64,
}

impl Jitter {
    /// `spread` is the relative half-width: 0.2 gives base × U(0.8, 1.2).
    pub fn new(base: Duration, spread: f64, seed: u64) -> Self {
        Jitter {
            state: seed,
            base,
            spread: spread.clamp(0.0, 0.9),
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next interval to sleep.
    pub fn next_interval(&mut self) -> Duration {
        let factor = 1.0 + self.spread * (2.0 * self.unit() - 1.0);
        self.base.mul_f64(factor)
    }
}

/// A seed that differs between runs (time and pid), so two runs do not share phases.
pub fn seed_from_env() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_stay_within_the_band_and_spread_over_it() {
        let mut j = Jitter::new(Duration::from_millis(100), 0.2, 7);
        let xs: Vec<f64> = (0..10_000)
            .map(|_| j.next_interval().as_secs_f64())
            .collect();
        assert!(xs.iter().all(|&x| (0.08..=0.12).contains(&x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.1).abs() < 0.001, "mean {mean}");
        // Both tails of the band are used, so phases are not locked.
        assert!(xs.iter().any(|&x| x < 0.082) && xs.iter().any(|&x| x > 0.118));
    }

    #[test]
    fn zero_spread_is_the_plain_interval() {
        let mut j = Jitter::new(Duration::from_millis(50), 0.0, 1);
        assert_eq!(j.next_interval(), Duration::from_millis(50));
    }
}
