//! What a rule reports: a message at a range, with an optional fix.

use ruff_text_size::{Ranged, TextRange, TextSize};
use serde::Serialize;

use crate::registry::Rule;

/// Whether a fix may be applied without `--unsafe-fixes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Applicability {
    /// Changes behaviour a user may depend on (a type, gradient flow): needs `--unsafe-fixes`.
    Unsafe,
    /// Changes no behaviour a user depends on; applied by `--fix`.
    Safe,
}

/// One replacement of a source range by new text (an insertion when the range is empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: TextRange,
    pub content: String,
}

impl Edit {
    pub fn insertion(at: TextSize, content: impl Into<String>) -> Self {
        Self {
            range: TextRange::empty(at),
            content: content.into(),
        }
    }
    pub fn replacement(range: TextRange, content: impl Into<String>) -> Self {
        Self {
            range,
            content: content.into(),
        }
    }
    pub fn deletion(range: TextRange) -> Self {
        Self {
            range,
            content: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// What the fix does, e.g. "Append `loss.detach()` instead".
    pub message: String,
    pub applicability: Applicability,
    /// Non-overlapping edits, in source order.
    pub edits: Vec<Edit>,
}

impl Fix {
    pub fn new(applicability: Applicability, message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Self {
            message: message.into(),
            applicability,
            edits,
        }
    }
    pub fn safe(message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Self {
            message: message.into(),
            applicability: Applicability::Safe,
            edits,
        }
    }
    pub fn unsafe_edit(message: impl Into<String>, edits: Vec<Edit>) -> Self {
        Self {
            message: message.into(),
            applicability: Applicability::Unsafe,
            edits,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub rule: Rule,
    pub message: String,
    pub range: TextRange,
    pub fix: Option<Fix>,
}

impl Diagnostic {
    pub fn new(rule: Rule, message: impl Into<String>, range: TextRange) -> Self {
        Self {
            rule,
            message: message.into(),
            range,
            fix: None,
        }
    }
    #[must_use]
    pub fn with_fix(mut self, fix: Fix) -> Self {
        self.fix = Some(fix);
        self
    }
}

impl Ranged for Diagnostic {
    fn range(&self) -> TextRange {
        self.range
    }
}
