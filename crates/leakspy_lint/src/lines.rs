//! Line numbers, found on demand.

use std::cell::OnceCell;

use ruff_source_file::LineIndex;
use ruff_text_size::TextSize;

/// The line starts of a source, found on first use: most files have no finding and no `noqa`
/// comment, and never pay for a pass over their whole text.
pub struct Lines<'s> {
    source: &'s str,
    index: OnceCell<LineIndex>,
}

impl<'s> Lines<'s> {
    pub fn new(source: &'s str) -> Self {
        Self {
            source,
            index: OnceCell::new(),
        }
    }

    pub fn index(&self) -> &LineIndex {
        self.index
            .get_or_init(|| LineIndex::from_source_text(self.source))
    }

    /// The one-based line of `offset`.
    pub fn line(&self, offset: TextSize) -> usize {
        self.index().line_index(offset).get()
    }

    /// The index, if something asked for it.
    pub fn into_built(self) -> Option<LineIndex> {
        self.index.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_once_and_only_when_asked() {
        let lines = Lines::new("a = 1\nb = 2\n");
        assert!(lines.index.get().is_none());
        assert_eq!(lines.line(TextSize::new(6)), 2);
        assert_eq!(lines.line(TextSize::new(0)), 1);
        assert!(lines.into_built().is_some());
        assert!(Lines::new("x").into_built().is_none());
    }
}
