//! Applying fixes to a source text.

use crate::diagnostic::{Applicability, Diagnostic, Edit, Fix};

/// The result of applying the fixes of one file.
pub struct FixedSource {
    pub source: String,
    /// How many diagnostics had their fix applied.
    pub applied: usize,
}

/// Applies the fixes of `diagnostics` whose applicability is at least `min`. A fix whose edits
/// overlap an already accepted edit is skipped (it will be offered again on the next run), so the
/// result never mixes two fixes of the same text.
pub fn apply_fixes(source: &str, diagnostics: &[Diagnostic], min: Applicability) -> FixedSource {
    let (mut accepted, applied) = select_fixes(diagnostics, min, |_| true);
    accepted.sort_by_key(|e| (e.range.start(), e.range.end()));
    let mut out = String::with_capacity(source.len() + 64);
    let mut last = 0usize;
    for edit in accepted {
        let start = usize::from(edit.range.start());
        let end = usize::from(edit.range.end());
        out.push_str(&source[last..start]);
        out.push_str(&edit.content);
        last = end;
    }
    out.push_str(&source[last..]);
    FixedSource {
        source: out,
        applied,
    }
}

/// The edits of the fixes `apply_fixes` would apply, among those `allowed` accepts (a notebook
/// accepts only fixes inside one cell), and how many fixes they make.
pub fn select_fixes(
    diagnostics: &[Diagnostic],
    min: Applicability,
    allowed: impl Fn(&Fix) -> bool,
) -> (Vec<&Edit>, usize) {
    let mut accepted: Vec<&Edit> = Vec::new();
    let mut applied = 0;
    let mut fixes: Vec<_> = diagnostics
        .iter()
        .filter_map(|d| d.fix.as_ref())
        .filter(|f| f.applicability >= min && allowed(f))
        .collect();
    fixes.sort_by_key(|f| f.edits.first().map(|e| e.range.start()));
    for fix in fixes {
        let overlaps = fix.edits.iter().any(|e| {
            accepted.iter().any(|a| {
                e.range.start() < a.range.end() && a.range.start() < e.range.end()
                    || (e.range.is_empty() && a.range.is_empty() && e.range == a.range)
            })
        });
        if overlaps {
            continue;
        }
        accepted.extend(fix.edits.iter());
        applied += 1;
    }
    (accepted, applied)
}
