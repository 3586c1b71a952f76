//! `[tool.leakspy]` in the nearest `pyproject.toml`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Config {
    pub select: Option<Vec<String>>,
    #[serde(default)]
    pub extend_select: Vec<String>,
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Glob patterns of paths to skip, on top of `.gitignore` and virtual environments.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Glob patterns of more files to check in folder walks, on top of `*.py`, `*.pyi` and
    /// `*.ipynb` (ruff's `extend-include`); a matching `.ipynb` is read as a notebook, any
    /// other file as Python.
    #[serde(default)]
    pub extend_include: Vec<String>,
    /// Glob pattern -> rule selectors ignored in matching files.
    #[serde(default)]
    pub per_file_ignores: std::collections::BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
struct PyProject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    leakspy: Option<toml::Value>,
}

/// The configuration and the folder of the `pyproject.toml` it came from.
pub struct Loaded {
    pub config: Config,
    pub root: Option<PathBuf>,
}

/// Finds the nearest `pyproject.toml` with a `[tool.leakspy]` table, from `start` upwards.
pub fn load(start: &Path) -> Result<Loaded> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    let mut dir = if start.is_dir() {
        Some(start.as_path())
    } else {
        start.parent()
    };
    while let Some(d) = dir {
        let candidate = d.join("pyproject.toml");
        if candidate.is_file() {
            if let Some(config) = parse(&candidate)? {
                return Ok(Loaded {
                    config,
                    root: Some(d.to_path_buf()),
                });
            }
        }
        dir = d.parent();
    }
    Ok(Loaded {
        config: Config::default(),
        root: None,
    })
}

fn parse(path: &Path) -> Result<Option<Config>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let project: PyProject =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    let Some(table) = project.tool.and_then(|t| t.leakspy) else {
        return Ok(None);
    };
    let config: Config = table.try_into().with_context(|| {
        format!(
            "invalid [tool.leakspy] in {}: expected keys select, extend-select, ignore, exclude, extend-include, per-file-ignores",
            path.display()
        )
    })?;
    Ok(Some(config))
}
