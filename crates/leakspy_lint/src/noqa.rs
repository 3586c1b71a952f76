//! `# noqa`, `# noqa: LS001,LS002` (per line) and `# leakspy: noqa` (whole file).

use ruff_text_size::TextSize;
use rustc_hash::FxHashMap;

use crate::lines::Lines;
use crate::registry::Rule;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Directive {
    All,
    Codes(Vec<String>),
}

#[derive(Debug, Default)]
pub struct NoqaMap {
    file_exempt: bool,
    /// Keyed by zero-based line number.
    lines: FxHashMap<usize, Directive>,
}

impl NoqaMap {
    /// Reads one comment token's text; the caller walks the tokens once for several purposes.
    pub fn add_comment(&mut self, text: &str, start: TextSize, lines: &Lines) {
        let body = text.trim_start_matches('#').trim();
        if let Some(rest) = strip_prefix_ci(body, "leakspy:") {
            if strip_prefix_ci(rest.trim(), "noqa").is_some() {
                self.file_exempt = true;
            }
            return;
        }
        if let Some(directive) = parse_noqa(text) {
            let line = lines.line(start) - 1;
            self.lines.insert(line, directive);
        }
    }

    pub fn file_exempt(&self) -> bool {
        self.file_exempt
    }

    pub fn suppresses(&self, line: usize, rule: Rule) -> bool {
        match self.lines.get(&line) {
            None => false,
            Some(Directive::All) => true,
            Some(Directive::Codes(codes)) => codes
                .iter()
                .any(|c| c.eq_ignore_ascii_case(rule.code()) || c == rule.name()),
        }
    }
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Finds a `noqa` directive anywhere in a comment (it may follow other text, as in
/// `# type: ignore  # noqa: LS002`).
fn parse_noqa(comment: &str) -> Option<Directive> {
    // Every comment of every file comes here: jump from `n` to `n` (memchr) rather than
    // compare every window, and never make a lowercased copy.
    let bytes = comment.as_bytes();
    let pos = memchr::memchr2_iter(b'n', b'N', bytes).find(|&i| {
        bytes
            .get(i..i + 4)
            .is_some_and(|w| w.eq_ignore_ascii_case(b"noqa"))
    })?;
    // `noqa` must start a comment segment: preceded by `#` and spaces only.
    let before = comment[..pos].trim_end();
    if !before.ends_with('#') {
        return None;
    }
    let rest = &comment[pos + 4..];
    let Some(codes) = rest.strip_prefix(':') else {
        return Some(Directive::All);
    };
    let codes: Vec<String> = codes
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(str::trim)
        .take_while(|c| !c.starts_with('#'))
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    if codes.is_empty() {
        Some(Directive::All)
    } else {
        Some(Directive::Codes(codes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives() {
        assert_eq!(parse_noqa("# noqa"), Some(Directive::All));
        assert_eq!(
            parse_noqa("# noqa: LS001, LS002"),
            Some(Directive::Codes(vec!["LS001".into(), "LS002".into()]))
        );
        assert_eq!(
            parse_noqa("# type: ignore # noqa:LS012"),
            Some(Directive::Codes(vec!["LS012".into()]))
        );
        assert_eq!(parse_noqa("# this is not a noqa comment"), None);
        assert_eq!(parse_noqa("# NoQA"), Some(Directive::All));
        assert_eq!(parse_noqa("# no"), None);
        assert_eq!(parse_noqa("# nnoqa"), None);
    }
}
