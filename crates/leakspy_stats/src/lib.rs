//! Pure statistics for leakspy: robust trends (Theil–Sen with a rank-based
//! interval), windowed minima, warm-up trimming, saturation and sawtooth
//! detection, and a leak verdict on one memory series. No I/O.
//!
//! The shape of real training memory drives the design: RSS only ratchets up
//! under glibc and swings with freed temporaries, so trends are fitted on the
//! per-window minima; imports and lazy first-step work make a large early
//! jump, so the start is trimmed; buffers and caches fill then stay flat, so
//! a leak must still be growing at the end of the run.

mod series;
mod theil_sen;
mod throughput;
mod units;
mod verdict;

pub use series::{window_minima, window_size_for, Windowed};
pub use theil_sen::{normal_quantile, theil_sen, Trend};
pub use throughput::{step_rates, throughput_trend, ThroughputTrend};
pub use units::{fmt_bytes, fmt_bytes_as, fmt_signed_bytes, fmt_thousands, fmt_value, ValueUnit};
pub use verdict::{analyze, SeriesAnalysis, Shape, Verdict, VerdictOptions, SETTLED_HALF_WIDTH};
