//! `leakspy __leakspy-judge-series`: `assert_no_leak`'s verdict on the
//! series it counted, by the rule every other verdict on what grows uses
//! (`leakspy_report::judge_exact`). Internal: the Python package calls it.

use std::collections::BTreeMap;
use std::io::Read;

use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Deserialize)]
struct Input {
    x: Vec<f64>,
    series: BTreeMap<String, Vec<Option<f64>>>,
}

/// Reads the series on stdin, writes the ones that grow (with their fits) on
/// stdout as one JSON object.
pub fn run() -> Result<u8> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading the series on stdin")?;
    let input: Input = serde_json::from_str(&text).context("the series on stdin are not valid")?;
    let out = leakspy_report::judge_exact(&input.x, &input.series);
    println!("{}", serde_json::to_string(&out)?);
    Ok(0)
}
