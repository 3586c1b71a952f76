//! The verdict on synthetic series of each shape seen in training jobs.

mod common;

use common::{times, Noise, GIB, MIB};
use leakspy_stats::{analyze, Shape, Verdict, VerdictOptions};

fn secs() -> VerdictOptions {
    VerdictOptions::default()
}

#[track_caller]
fn expect(xs: &[f64], ys: &[f64], opts: &VerdictOptions, verdict: Verdict, shape: Shape) {
    let a = analyze(xs, ys, opts);
    assert_eq!(
        (a.verdict, a.shape),
        (verdict, shape),
        "evidence: {:#?}",
        a.evidence
    );
    assert!(!a.evidence.is_empty());
}

#[test]
fn short_linear_leak_is_a_leak() {
    // 1 MiB every 50 ms for 6 s at 10 Hz, as in the run integration tests.
    let xs = times(60, 10.0);
    let ys: Vec<f64> = xs.iter().map(|t| 30.0 * MIB + 20.0 * MIB * t).collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert_eq!(a.shape, Shape::LinearGrowth);
    let t = a.trend.unwrap();
    assert!((t.slope - 20.0 * MIB).abs() < 1e-6 * MIB, "{t:?}");
    assert!(
        a.evidence.iter().any(|e| e.contains("20.0 MiB/s")),
        "{:#?}",
        a.evidence
    );
}

#[test]
fn short_buffer_that_fills_then_stays_flat_is_not() {
    // 100 MiB filled in 2 s, then flat for 4 s.
    let xs = times(60, 10.0);
    let mut noise = Noise::new(7);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 30.0 * MIB + 50.0 * MIB * t.min(2.0) + 0.05 * MIB * noise.normal())
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::NoLeak, "{:#?}", a.evidence);
    assert!(
        matches!(a.shape, Shape::Saturating | Shape::Flat),
        "{:#?}",
        a.evidence
    );
}

#[test]
fn saturating_exponential_is_not_a_leak() {
    let xs = times(600, 10.0);
    let mut noise = Noise::new(11);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 200.0 * MIB + 500.0 * MIB * (1.0 - (-t / 6.0).exp()) + 0.3 * MIB * noise.normal())
        .collect();
    expect(&xs, &ys, &secs(), Verdict::NoLeak, Shape::Saturating);
}

#[test]
fn warm_up_then_flat_is_not_a_leak() {
    // import torch (~700 MB) over the first second, lazy first-step imports
    // (~155 MB) at 1.5 s, then flat with a little noise for 20 s.
    let xs = times(200, 10.0);
    let mut noise = Noise::new(3);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| {
            let imp = 700.0 * MIB * t.min(1.0);
            let lazy = if t >= 1.5 { 155.0 * MIB } else { 0.0 };
            20.0 * MIB + imp + lazy + 0.2 * MIB * noise.normal()
        })
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::NoLeak, "{:#?}", a.evidence);
    assert_eq!(a.shape, Shape::Flat, "{:#?}", a.evidence);
    assert!(a.warmup_rise > 800.0 * MIB, "{a:#?}");
}

#[test]
fn sawtooth_of_freed_temporaries_is_not_a_leak() {
    // A 200 MiB temporary built up over 0.6 s and freed, again and again.
    let xs = times(600, 10.0);
    let ys: Vec<f64> = (0..600)
        .map(|i| 300.0 * MIB + f64::from(i % 7) * 33.0 * MIB)
        .collect();
    expect(&xs, &ys, &secs(), Verdict::NoLeak, Shape::Sawtooth);
}

#[test]
fn step_then_flat_is_not_a_leak() {
    // A data set loaded once at 40 % of the run.
    let xs = times(500, 10.0);
    let mut noise = Noise::new(5);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| {
            400.0 * MIB + if t >= 20.0 { 300.0 * MIB } else { 0.0 } + 0.5 * MIB * noise.normal()
        })
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::NoLeak, "{:#?}", a.evidence);
}

#[test]
fn late_step_then_short_flat_tail_is_not_called_a_leak() {
    // A jump at 80 % of the run: too little flat tail to call it saturated,
    // but it is not steady growth either.
    let xs = times(500, 10.0);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 400.0 * MIB + if t >= 40.0 { 300.0 * MIB } else { 0.0 })
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_ne!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
}

#[test]
fn noisy_leak_is_a_leak() {
    let xs = times(300, 10.0);
    let mut noise = Noise::new(42);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 500.0 * MIB + 2.0 * MIB * t + 5.0 * MIB * noise.normal())
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    let t = a.trend.unwrap();
    assert!(t.lo < 2.0 * MIB && 2.0 * MIB < t.hi, "{t:?}");
}

#[test]
fn leak_under_a_sawtooth_is_a_leak() {
    let xs = times(600, 10.0);
    let ys: Vec<f64> = (0..600)
        .map(|i| 300.0 * MIB + f64::from(i) * 0.5 * MIB + f64::from(i % 7) * 40.0 * MIB)
        .collect();
    expect(&xs, &ys, &secs(), Verdict::Leak, Shape::LinearGrowth);
}

#[test]
fn leak_after_warm_up_is_a_leak() {
    let xs = times(300, 10.0);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 20.0 * MIB + 700.0 * MIB * t.min(2.0) / 2.0 + 3.0 * MIB * t)
        .collect();
    expect(&xs, &ys, &secs(), Verdict::Leak, Shape::LinearGrowth);
}

#[test]
fn stair_steps_of_a_steady_leak_are_not_warm_up() {
    // 0.2 MiB per step from the first step, and four stair steps of 12 MiB
    // in the first third (a new arena, a burst of the probe slowing the
    // steps): the rise before the last stair is the leak's own rate.
    let xs: Vec<f64> = (0..1500).map(f64::from).collect();
    let ys: Vec<f64> = xs
        .iter()
        .map(|&s| {
            let stairs = [120.0, 240.0, 330.0, 470.0]
                .iter()
                .filter(|&&at| s >= at)
                .count() as f64;
            700.0 * MIB + 0.2 * MIB * s + 12.0 * MIB * stairs
        })
        .collect();
    let a = analyze(&xs, &ys, &VerdictOptions::per_step());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    let trimmed = a.warmup_end.unwrap();
    assert!(
        trimmed < 200.0,
        "warm-up up to step {trimmed}: {:#?}",
        a.evidence
    );
}

#[test]
fn slow_leak_on_a_big_baseline_per_step() {
    // 8 GiB resident, 0.5 MiB per step over 2000 steps: 1 GiB in all.
    let xs: Vec<f64> = (0..2000).map(f64::from).collect();
    let mut noise = Noise::new(9);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&s| 8.0 * GIB + 0.5 * MIB * s + 20.0 * MIB * noise.normal().abs())
        .collect();
    let opts = VerdictOptions::per_step();
    let a = analyze(&xs, &ys, &opts);
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert!(a.evidence[0].contains("/step"), "{:#?}", a.evidence);
}

#[test]
fn allocator_drift_on_a_big_baseline_is_not_a_leak() {
    // 5 KiB per step on 8 GiB: 10 MiB over 2000 steps, 0.1 % of the level.
    let xs: Vec<f64> = (0..2000).map(f64::from).collect();
    let ys: Vec<f64> = xs.iter().map(|&s| 8.0 * GIB + 5.0 * 1024.0 * s).collect();
    expect(
        &xs,
        &ys,
        &VerdictOptions::per_step(),
        Verdict::NoLeak,
        Shape::Flat,
    );
}

#[test]
fn a_leak_cut_short_is_too_early_to_tell_not_flat() {
    // Ctrl-C after 100 steps of a 200 KiB/step leak on 1 GiB: about 18 MiB
    // over the fit, below the 20 MiB (2 % of the level) a leak needs.
    let xs: Vec<f64> = (0..100).map(f64::from).collect();
    let mut noise = Noise::new(11);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&s| GIB + 200.0 * 1024.0 * s + 0.2 * MIB * noise.normal())
        .collect();
    let a = analyze(&xs, &ys, &VerdictOptions::per_step());
    assert_eq!(
        (a.verdict, a.shape),
        (Verdict::Inconclusive, Shape::TooEarly),
        "{:#?}",
        a.evidence
    );
    assert!(
        a.shape_text.starts_with("too early to tell: grew ")
            && a.shape_text
                .contains("which this rate reaches after about 10"),
        "{}",
        a.shape_text
    );
}

#[test]
fn tiny_drift_is_not_a_leak() {
    // 1 MiB over a minute on a small process: below the absolute threshold.
    let xs = times(600, 10.0);
    let ys: Vec<f64> = xs.iter().map(|&t| 50.0 * MIB + MIB * t / 60.0).collect();
    expect(&xs, &ys, &secs(), Verdict::NoLeak, Shape::Flat);
}

#[test]
fn shrinking_is_not_a_leak() {
    let xs = times(300, 10.0);
    let ys: Vec<f64> = xs.iter().map(|&t| 900.0 * MIB - 10.0 * MIB * t).collect();
    expect(&xs, &ys, &secs(), Verdict::NoLeak, Shape::Shrinking);
}

#[test]
fn too_short_is_inconclusive() {
    let xs = times(10, 10.0);
    let ys: Vec<f64> = xs.iter().map(|&t| 100.0 * MIB * t).collect();
    expect(&xs, &ys, &secs(), Verdict::Inconclusive, Shape::TooShort);
}

#[test]
fn pure_noise_is_not_a_leak() {
    let xs = times(300, 10.0);
    let mut noise = Noise::new(1);
    let ys: Vec<f64> = xs
        .iter()
        .map(|_| 100.0 * MIB + MIB * noise.normal())
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::NoLeak, "{:#?}", a.evidence);
}

#[test]
fn day_long_trace_is_analysed() {
    // 24 h at 10 Hz; the timing lives in the example `long_trace`.
    let n = 864_000;
    let xs = times(n, 10.0);
    let ys: Vec<f64> = (0..n)
        .map(|i| 2.0 * GIB + i as f64 * 1024.0 + f64::from((i % 13) as u32) * 8.0 * MIB)
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert!(a.n_fit <= 200);
}

#[test]
fn exit_teardown_does_not_hide_a_leak() {
    // As recorded by `leakspy run`: 16 MiB/s for 6 s, then the last sample
    // taken while the interpreter exits shows most memory gone.
    let xs = times(60, 10.0);
    let mut ys: Vec<f64> = xs.iter().map(|t| 15.0 * MIB + 16.0 * MIB * t).collect();
    ys[59] = 15.0 * MIB;
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert_eq!(a.teardown_trimmed, 1);
    assert!(a.trend.unwrap().r2 > 0.9);
}

#[test]
fn a_last_sawtooth_trough_is_not_a_teardown_of_note() {
    let xs = times(600, 10.0);
    let ys: Vec<f64> = (0..600)
        .map(|i| 300.0 * MIB + f64::from(i % 7) * 33.0 * MIB)
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::NoLeak);
    assert!(a.teardown_trimmed <= 30);
}

#[test]
fn growth_that_stalls_for_the_last_second_is_not_called_a_leak() {
    // A 90-item replay buffer filling at 1 MiB per step: full after 5.4 s of
    // a 6.5 s run. Too little flat tail to call it saturated, too much to
    // call it a steady leak.
    let xs = times(65, 10.0);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| 14.0 * MIB + 17.0 * MIB * t.min(5.4))
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Inconclusive, "{:#?}", a.evidence);
    assert_eq!(a.shape, Shape::Saturating);
}

#[test]
fn short_leak_paced_by_a_loaded_scheduler_stays_a_leak() {
    // 8 MiB/s for 5.3 s at 10 Hz, as in the worker-process run test, where
    // each sample finds the leaking process behind by up to 0.5 s of its
    // allocations (a loaded machine lets it catch up in bursts). Window
    // minima pick the worst lag of each window, so the second half's five
    // windows alone are ragged; the run as a whole is not.
    let xs = times(53, 10.0);
    for seed in 0..300 {
        let mut noise = Noise::new(seed);
        let ys: Vec<f64> = xs
            .iter()
            .map(|&t| 60.0 * MIB + 8.0 * MIB * (t - 0.5 * noise.uniform()).max(0.0))
            .collect();
        let a = analyze(&xs, &ys, &secs());
        assert_eq!(a.verdict, Verdict::Leak, "seed {seed}: {:#?}", a.evidence);
    }
}

#[test]
fn growth_that_keeps_slowing_is_not_called_a_leak() {
    // A cache approaching its bound over a ten-minute run, with no flat tail
    // yet: the second half's rate is significantly below the whole run's.
    let xs = times(600, 1.0);
    let mut noise = Noise::new(5);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| {
            300.0 * MIB + 400.0 * MIB * (1.0 - (-t / 300.0).exp()) + 0.2 * MIB * noise.normal()
        })
        .collect();
    expect(&xs, &ys, &secs(), Verdict::Inconclusive, Shape::Slowing);
}

#[test]
fn a_short_stall_near_the_end_of_a_steady_leak_is_still_a_leak() {
    // 12 MiB/s for 15 s at 10 Hz, with RSS flat for the last 0.8 s (about
    // 6 % of the span) while the leak refills memory freed by a big
    // temporary (as after a census of the probe).
    let xs = times(150, 10.0);
    let ys: Vec<f64> = xs
        .iter()
        .map(|&t| {
            let t_eff = t.min(14.1);
            700.0 * MIB + 12.0 * MIB * t_eff
        })
        .collect();
    let a = analyze(&xs, &ys, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
}

#[test]
fn a_steady_leaks_rate_is_settled_and_a_drifting_ones_is_not() {
    let xs = times(300, 10.0);
    let mut noise = Noise::new(7);
    let steady: Vec<f64> = xs
        .iter()
        .map(|t| GIB + 2.0 * MIB * t + 0.2 * MIB * noise.normal())
        .collect();
    let a = analyze(&xs, &steady, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert!(a.settled(), "{:#?}", a.evidence);
    // A leak under start-up allocations that wind down over the run: the
    // whole run's rate is well above its second half's.
    let drifting: Vec<f64> = xs
        .iter()
        .map(|t| GIB + 1.0 * MIB * t + 60.0 * MIB * (1.0 - (-t / 12.0).exp()))
        .collect();
    let a = analyze(&xs, &drifting, &secs());
    assert_eq!(a.verdict, Verdict::Leak, "{:#?}", a.evidence);
    assert!(!a.settled(), "{:#?}", a.evidence);
    // Not a leak: no rate to settle.
    let flat: Vec<f64> = xs
        .iter()
        .map(|_| GIB + 0.2 * MIB * noise.normal())
        .collect();
    assert!(!analyze(&xs, &flat, &secs()).settled());
}
