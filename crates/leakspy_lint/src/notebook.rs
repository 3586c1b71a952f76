//! Jupyter notebooks (`.ipynb`): the code cells joined into one module, IPython's escapes
//! blanked, positions mapped back to a cell and a line in it, and fixed cell sources written
//! back into the notebook's JSON text with every other byte left as it was.
//!
//! The rules see what IPython runs: the code cells in order, one module (a name a cell binds is
//! known to the cells after it). Each cell is joined as it is, plus a newline when it lacks one,
//! so a cell's offsets in the joined module are its own offsets shifted by where it starts.
//! IPython's escapes (`%magic`, `!shell`, `x = !cmd`, `obj?`) are found with ruff's parser in
//! IPython mode and replaced by a placeholder of the same length (`0` and spaces, newlines
//! kept): lines and columns are unchanged and the module stays valid Python. A cell whose cell
//! magic runs something other than Python (`%%bash`, `%%html`) is not checked.
//!
//! Writing back never re-serialises the notebook: the JSON is read for the cells' `source`
//! values and where they lie in the text, and only the `source` of a cell a fix changed is
//! replaced, in the layout it had (one string, or a list of lines with its own indentation and
//! escapes), so outputs, metadata, key order, indentation and the final newline stay as they
//! were, byte for byte.

use std::ops::Range;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt};
use ruff_python_parser::{parse_unchecked, Mode, ParseOptions};
use ruff_text_size::{Ranged, TextRange, TextSize};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::diagnostic::{Edit, Fix};

/// Cell magics whose body is Python that IPython runs in the notebook's namespace: the first
/// line is blanked and the rest checked. Any other cell magic (`%%bash`, `%%writefile`,
/// `%%html`, ...) makes the cell something other than Python, and it is not checked.
const PYTHON_CELL_MAGICS: &[&str] = &[
    "time",
    "timeit",
    "capture",
    "prun",
    "debug",
    "python",
    "python3",
    "pypy",
    "memit",
    "memray_flamegraph",
    "leakspy",
];

/// Why a file could not be read as a notebook.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NotebookError {
    #[error("not a valid notebook: the JSON is malformed ({0})")]
    Json(String),
    #[error("not a valid notebook: {0}")]
    Shape(String),
    #[error("nbformat {0} notebooks are not supported (nbformat 4 is; `jupyter nbconvert --to notebook` upgrades it)")]
    OldFormat(u64),
    #[error("not a Python notebook (its kernel's language is {0}): skipped")]
    NotPython(String),
}

/// How a cell's `source` is laid out in the JSON, to write it back the same way.
#[derive(Debug, Clone)]
enum Layout {
    /// One JSON string.
    Text,
    /// A list of lines; what comes between `[` and the first line, between two lines (the
    /// comma included) and after the last one, and each line's raw JSON text.
    Lines {
        open: String,
        sep: String,
        close: String,
        raw: Vec<(String, String)>,
    },
}

#[derive(Debug, Clone)]
struct CodeCell {
    /// 1-based position among all the notebook's cells (markdown and raw cells count), as
    /// Jupyter shows them and ruff reports them.
    number: usize,
    source: String,
    /// Where the `source` value lies in the JSON text.
    raw: Range<usize>,
    layout: Layout,
    /// Python that IPython runs (not a `%%bash`-like cell).
    python: bool,
    changed: bool,
}

/// A parsed notebook: its JSON text and its code cells.
#[derive(Debug, Clone)]
pub struct Notebook {
    text: String,
    cells: Vec<CodeCell>,
    /// The text has no byte above ASCII: the writer escaped everything else (`\u00e9`), and
    /// new lines are written the same way.
    ascii: bool,
}

#[derive(Deserialize)]
struct RawNotebook<'a> {
    #[serde(borrow, default)]
    cells: Option<Vec<RawCell<'a>>>,
    #[serde(default)]
    nbformat: Option<u64>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
struct RawCell<'a> {
    #[serde(default)]
    cell_type: Option<String>,
    #[serde(borrow, default)]
    source: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(default)]
    kernelspec: Option<KernelSpec>,
    #[serde(default)]
    language_info: Option<LanguageInfo>,
}

#[derive(Deserialize, Default)]
struct KernelSpec {
    #[serde(default)]
    language: Option<String>,
}

#[derive(Deserialize, Default)]
struct LanguageInfo {
    #[serde(default)]
    name: Option<String>,
}

/// The offset of `part`, a slice borrowed from `whole`, in `whole`.
fn offset_in(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

impl Notebook {
    /// Reads a notebook's JSON text (a UTF-8 byte-order mark already removed).
    pub fn parse(text: String) -> Result<Notebook, NotebookError> {
        let raw: RawNotebook = serde_json::from_str(&text).map_err(|e| {
            if e.is_data() {
                NotebookError::Shape(format!(
                    "{} (line {}, column {})",
                    strip_serde_position(&e.to_string()),
                    e.line(),
                    e.column()
                ))
            } else {
                NotebookError::Json(format!(
                    "{} at line {}, column {}",
                    strip_serde_position(&e.to_string()),
                    e.line(),
                    e.column()
                ))
            }
        })?;
        let Some(raw_cells) = raw.cells else {
            return Err(match raw.nbformat {
                Some(v) if v < 4 => NotebookError::OldFormat(v),
                _ => NotebookError::Shape("no `cells` list".into()),
            });
        };
        if let Some(v) = raw.nbformat.filter(|v| *v < 4) {
            return Err(NotebookError::OldFormat(v));
        }
        if let Some(lang) = raw.metadata.and_then(|m| {
            m.kernelspec
                .and_then(|k| k.language)
                .or(m.language_info.and_then(|l| l.name))
        }) {
            if !lang.eq_ignore_ascii_case("python") && !lang.is_empty() {
                return Err(NotebookError::NotPython(lang));
            }
        }
        let mut cells = Vec::new();
        for (i, cell) in raw_cells.iter().enumerate() {
            let number = i + 1;
            if cell.cell_type.as_deref() != Some("code") {
                continue;
            }
            let Some(value) = cell.source else {
                return Err(NotebookError::Shape(format!(
                    "cell {number} has no `source`"
                )));
            };
            let (source, layout) = read_source(value).ok_or_else(|| {
                NotebookError::Shape(format!(
                    "the `source` of cell {number} is neither a string nor a list of strings"
                ))
            })?;
            let start = offset_in(&text, value.get());
            let python = is_python_cell(&source);
            cells.push(CodeCell {
                number,
                source,
                raw: start..start + value.get().len(),
                layout,
                python,
                changed: false,
            });
        }
        let ascii = text.is_ascii();
        Ok(Notebook { text, cells, ascii })
    }

    /// How many code cells are checked (Python), and how many are not (`%%bash`-like).
    pub fn code_cells(&self) -> (usize, usize) {
        let python = self.cells.iter().filter(|c| c.python).count();
        (python, self.cells.len() - python)
    }

    /// The number of the cell that a kernel running the notebook from the
    /// top labels `In[n]` (IPython's `Cell In[n]`): its n-th code cell with
    /// a source that is not blank, as Jupyter's executors (nbclient, behind
    /// `jupyter execute` and `nbconvert --execute`) skip blank cells.
    pub fn executed_cell(&self, n: usize) -> Option<usize> {
        self.cells
            .iter()
            .filter(|c| !c.source.trim().is_empty())
            .nth(n.checked_sub(1)?)
            .map(|c| c.number)
    }

    /// The checked cells joined into one module.
    pub fn joined(&self) -> Joined {
        let mut display = String::new();
        let mut starts = Vec::new();
        let mut row = 1;
        for (idx, cell) in self.cells.iter().enumerate().filter(|(_, c)| c.python) {
            starts.push(CellStart {
                cell: idx,
                number: cell.number,
                offset: TextSize::try_from(display.len()).unwrap_or_default(),
                len: cell.source.len(),
                row,
            });
            display.push_str(&cell.source);
            if !cell.source.is_empty() && !cell.source.ends_with('\n') {
                display.push('\n');
            }
            row += cell.source.split_inclusive('\n').count();
        }
        let mut checked = display.clone();
        let mut blanked = Vec::new();
        for start in &starts {
            let base = usize::from(start.offset);
            let text = &display[base..base + start.len];
            for range in escapes(text) {
                let (s, e) = (base + range.start, base + range.end);
                blank(&mut checked, s..e);
                blanked.push(TextRange::new(
                    TextSize::try_from(s).unwrap_or_default(),
                    TextSize::try_from(e).unwrap_or_default(),
                ));
            }
        }
        let cell_ends = starts
            .iter()
            .map(|s| s.offset + TextSize::try_from(s.len).unwrap_or_default())
            .collect();
        Joined {
            display,
            checked,
            index: NotebookIndex { starts },
            blanked,
            cell_ends,
        }
    }

    /// Applies edits (offsets in `joined`, each inside one cell, see [`Joined::allows`]) to the
    /// cells' sources.
    pub fn apply(&mut self, joined: &Joined, edits: &[&Edit]) {
        let mut per_cell: Vec<Vec<&Edit>> = vec![Vec::new(); self.cells.len()];
        for edit in edits {
            if let Some(start) = joined.index.start_of(edit.range.start()) {
                per_cell[start.cell].push(edit);
            }
        }
        for start in &joined.index.starts {
            let edits = &mut per_cell[start.cell];
            if edits.is_empty() {
                continue;
            }
            edits.sort_by_key(|e| (e.range.start(), e.range.end()));
            let base = usize::from(start.offset);
            let cell = &mut self.cells[start.cell];
            let mut out = String::with_capacity(cell.source.len() + 32);
            let mut last = 0;
            for edit in edits.iter() {
                let s = usize::from(edit.range.start()) - base;
                let e = usize::from(edit.range.end()) - base;
                out.push_str(&cell.source[last..s]);
                out.push_str(&edit.content);
                last = e;
            }
            out.push_str(&cell.source[last..]);
            if out != cell.source {
                cell.source = out;
                cell.changed = true;
            }
        }
    }

    /// The cells a fix changed: (cell number, source before, source now), given the notebook
    /// before the fixes.
    pub fn changed_cells<'a>(&'a self, before: &'a Notebook) -> Vec<(usize, &'a str, &'a str)> {
        self.cells
            .iter()
            .zip(&before.cells)
            .filter(|(now, then)| now.source != then.source)
            .map(|(now, then)| (now.number, then.source.as_str(), now.source.as_str()))
            .collect()
    }

    /// The notebook's JSON text with the changed cells' sources written in; the same bytes
    /// when nothing changed.
    pub fn to_json(&self) -> String {
        if !self.cells.iter().any(|c| c.changed) {
            return self.text.clone();
        }
        let mut out = String::with_capacity(self.text.len() + 64);
        let mut last = 0;
        for cell in self.cells.iter().filter(|c| c.changed) {
            out.push_str(&self.text[last..cell.raw.start]);
            write_source(&mut out, &cell.source, &cell.layout, self.ascii);
            last = cell.raw.end;
        }
        out.push_str(&self.text[last..]);
        out
    }
}

/// serde_json's message without its " at line L column C" (said once, our way).
fn strip_serde_position(message: &str) -> &str {
    match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    }
}

fn read_source(value: &RawValue) -> Option<(String, Layout)> {
    let text = value.get();
    if text.starts_with('"') {
        let s: String = serde_json::from_str(text).ok()?;
        return Some((s, Layout::Text));
    }
    let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
    let mut source = String::new();
    let mut raw = Vec::with_capacity(items.len());
    for item in &items {
        let line: String = serde_json::from_str(item.get()).ok()?;
        source.push_str(&line);
        raw.push((line, item.get().to_string()));
    }
    let (open, sep, close) = match (items.first(), items.last()) {
        (Some(first), Some(last)) => {
            let first_at = offset_in(text, first.get());
            let last_end = offset_in(text, last.get()) + last.get().len();
            let open = text[1..first_at].to_string();
            let sep = match items.get(1) {
                Some(second) => {
                    text[first_at + first.get().len()..offset_in(text, second.get())].to_string()
                }
                None => format!(",{open}"),
            };
            (open, sep, text[last_end..text.len() - 1].to_string())
        }
        // An empty cell: nbformat's own layout, should a line ever be added.
        _ => ("\n".into(), ",\n".into(), "\n".into()),
    };
    Some((
        source,
        Layout::Lines {
            open,
            sep,
            close,
            raw,
        },
    ))
}

fn write_source(out: &mut String, source: &str, layout: &Layout, ascii: bool) {
    match layout {
        Layout::Text => out.push_str(&json_string(source, ascii)),
        Layout::Lines {
            open,
            sep,
            close,
            raw,
        } => {
            out.push('[');
            if source.is_empty() {
                out.push(']');
                return;
            }
            out.push_str(open);
            for (i, line) in lines_as_python_splits(source).enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                // A line the fix left alone keeps its own escapes.
                match raw.iter().find(|(decoded, _)| decoded == line) {
                    Some((_, text)) => out.push_str(text),
                    None => out.push_str(&json_string(line, ascii)),
                }
            }
            out.push_str(close);
            out.push(']');
        }
    }
}

/// The lines of a source with their ends, where Python's `str.splitlines(True)` ends them
/// (nbformat splits sources so): after `\n`, `\r\n`, a lone `\r`, and the other line
/// boundaries Python knows (form feed, vertical tab, `\x1c`-`\x1e`, NEL, U+2028, U+2029).
fn lines_as_python_splits(source: &str) -> impl Iterator<Item = &str> {
    let mut rest = source;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut chars = rest.char_indices().peekable();
        let mut end = rest.len();
        while let Some((i, c)) = chars.next() {
            let boundary = matches!(
                c,
                '\n' | '\x0b'
                    | '\x0c'
                    | '\x1c'
                    | '\x1d'
                    | '\x1e'
                    | '\u{85}'
                    | '\u{2028}'
                    | '\u{2029}'
            ) || (c == '\r' && chars.peek().is_none_or(|(_, n)| *n != '\n'));
            if boundary {
                end = i + c.len_utf8();
                break;
            }
        }
        let (line, tail) = rest.split_at(end);
        rest = tail;
        Some(line)
    })
}

/// A JSON string as Jupyter writes it (Python's `json.dumps`): control characters escaped,
/// and everything above ASCII too when the file has no such byte.
fn json_string(s: &str, ascii: bool) -> String {
    let text = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    if !ascii || text.is_ascii() {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Whether IPython runs the cell as Python: not when it starts with a cell magic that runs
/// something else.
fn is_python_cell(source: &str) -> bool {
    let Some(first) = source.lines().find(|l| !l.trim().is_empty()) else {
        return true;
    };
    let Some(magic) = first.strip_prefix("%%") else {
        return true;
    };
    let name = magic.split_whitespace().next().unwrap_or("");
    PYTHON_CELL_MAGICS.contains(&name)
}

/// The byte ranges of IPython's escapes in one cell (a cell magic's first line included).
fn escapes(cell: &str) -> Vec<Range<usize>> {
    if !cell.contains(['%', '!', '?']) {
        return Vec::new();
    }
    let parsed = parse_unchecked(cell, ParseOptions::from(Mode::Ipython));
    let mut finder = EscapeFinder(Vec::new());
    if let Some(module) = parsed.syntax().as_module() {
        finder.visit_body(&module.body);
    }
    finder.0
}

struct EscapeFinder(Vec<Range<usize>>);

impl<'a> Visitor<'a> for EscapeFinder {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if let Stmt::IpyEscapeCommand(c) = stmt {
            self.0
                .push(c.range().start().into()..c.range().end().into());
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::IpyEscapeCommand(c) = expr {
            self.0
                .push(c.range().start().into()..c.range().end().into());
        }
        visitor::walk_expr(self, expr);
    }
}

/// Replaces `range` of `text` by `0` and spaces, keeping its line breaks: an expression
/// statement (or value) of the same length on the same lines.
fn blank(text: &mut String, range: Range<usize>) {
    let mut replaced = String::with_capacity(range.len());
    let mut first = true;
    for c in text[range.clone()].chars() {
        if c == '\n' || c == '\r' {
            replaced.push(c);
            continue;
        }
        if first {
            replaced.push('0');
            first = false;
            for _ in 1..c.len_utf8() {
                replaced.push(' ');
            }
        } else {
            for _ in 0..c.len_utf8() {
                replaced.push(' ');
            }
        }
    }
    text.replace_range(range, &replaced);
}

/// The checked cells joined into one module.
pub struct Joined {
    /// The cells as written (what the user sees in frames).
    pub display: String,
    /// The same text with IPython's escapes blanked: what the rules check.
    pub checked: String,
    pub index: NotebookIndex,
    blanked: Vec<TextRange>,
    /// Where each code cell ends in the joined module.
    cell_ends: Vec<TextSize>,
}

impl Joined {
    /// What `check_source_as` is told the joined text is: a notebook, with its cells.
    pub fn source_kind(&self) -> crate::SourceKind<'_> {
        crate::SourceKind::Notebook {
            cell_ends: &self.cell_ends,
        }
    }

    /// Whether a fix may be written back: each edit inside one cell, none in a blanked escape.
    pub fn allows(&self, fix: &Fix) -> bool {
        fix.edits.iter().all(|e| {
            let inside = self.index.start_of(e.range.start()).is_some_and(|s| {
                e.range.end() <= s.offset + TextSize::try_from(s.len).unwrap_or_default()
            });
            inside
                && !self.blanked.iter().any(|b| {
                    e.range.start() < b.end() && b.start() < e.range.end()
                        || (e.range.is_empty() && b.contains(e.range.start()))
                })
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct CellStart {
    /// Index into the notebook's code cells.
    cell: usize,
    number: usize,
    offset: TextSize,
    len: usize,
    /// 1-based row of the cell's first line in the joined module.
    row: usize,
}

/// Where each checked cell starts in the joined module: turns a row of the module into a cell
/// and a row in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotebookIndex {
    starts: Vec<CellStart>,
}

impl NotebookIndex {
    /// The cell an offset of the joined module lies in (an empty cell never holds one).
    fn start_of(&self, offset: TextSize) -> Option<&CellStart> {
        let i = self.starts.partition_point(|s| s.offset <= offset);
        self.starts[..i].last()
    }

    /// (cell number, 1-based row in the cell) of a 1-based row of the joined module.
    pub fn cell_row(&self, row: usize) -> (usize, usize) {
        let i = self.starts.partition_point(|s| s.row <= row);
        match self.starts[..i].last() {
            Some(s) => (s.number, row - s.row + 1),
            None => (1, row),
        }
    }

    /// A message of a finding in `cell`, its "line N" (a row of the joined module) said the
    /// notebook's way: "line R" in the same cell, "cell C, line R" in another one.
    pub fn translate_message(&self, message: &str, cell: usize) -> String {
        const WORD: &str = "line ";
        let mut out = String::with_capacity(message.len() + 16);
        let mut rest = message;
        while let Some(i) = rest.find(WORD) {
            let after = &rest[i + WORD.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let word_start = i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric();
            let word_end = !after[digits..]
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric());
            out.push_str(&rest[..i]);
            match after[..digits].parse::<usize>() {
                Ok(row) if digits > 0 && word_start && word_end => {
                    let (c, r) = self.cell_row(row);
                    if c == cell {
                        out.push_str(&format!("line {r}"));
                    } else {
                        out.push_str(&format!("cell {c}, line {r}"));
                    }
                    rest = &after[digits..];
                }
                _ => {
                    out.push_str(WORD);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The joined module's rows of the cell that holds `row`: the first and the last.
    pub fn cell_rows(&self, row: usize) -> (usize, usize) {
        let i = self.starts.partition_point(|s| s.row <= row);
        let first = self.starts[..i].last().map_or(1, |s| s.row);
        let next = self.starts[i..]
            .iter()
            .find(|s| s.row > first)
            .map_or(usize::MAX, |s| s.row - 1);
        (first, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// nbformat's own layout: `json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False)`.
    const NB: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "metadata": {},
   "source": [
    "# Title"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 1,
   "metadata": {},
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "hi\n"
     ]
    }
   ],
   "source": [
    "%matplotlib inline\n",
    "losses = []\n",
    "x = !ls"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": "for i in range(3):\n    !echo é\n    losses.append(i)"
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": [
    "%%bash\n",
    "ls | wc -l"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    #[test]
    fn joins_code_cells_and_blanks_escapes() {
        let nb = Notebook::parse(NB.to_string()).unwrap();
        assert_eq!(nb.code_cells(), (2, 1));
        let j = nb.joined();
        assert_eq!(
            j.display,
            "%matplotlib inline\nlosses = []\nx = !ls\nfor i in range(3):\n    !echo é\n    losses.append(i)\n"
        );
        assert_eq!(
            j.checked,
            "0                 \nlosses = []\nx = 0  \nfor i in range(3):\n    0       \n    losses.append(i)\n"
        );
        assert_eq!(j.display.len(), j.checked.len());
        assert!(ruff_python_parser::parse_module(&j.checked).is_ok());
        assert_eq!(j.index.cell_row(2), (2, 2));
        assert_eq!(j.index.cell_row(4), (3, 1));
        assert_eq!(j.index.cell_row(6), (3, 3));
        assert_eq!(j.index.cell_rows(5), (4, usize::MAX));
        assert_eq!(j.index.cell_rows(1), (1, 3));
    }

    #[test]
    fn line_numbers_in_messages_name_the_cell() {
        let nb = Notebook::parse(NB.to_string()).unwrap();
        let j = nb.joined();
        assert_eq!(
            j.index
                .translate_message("the graph of `f(x)` (line 2), the loop at line 4", 3),
            "the graph of `f(x)` (cell 2, line 2), the loop at line 1"
        );
        assert_eq!(
            j.index.translate_message("inline 3; line x", 2),
            "inline 3; line x"
        );
    }

    #[test]
    fn unchanged_notebook_is_the_same_bytes() {
        let nb = Notebook::parse(NB.to_string()).unwrap();
        assert_eq!(nb.to_json(), NB);
    }

    #[test]
    fn edits_rewrite_only_their_cell() {
        let mut nb = Notebook::parse(NB.to_string()).unwrap();
        let j = nb.joined();
        let at = j.display.find("append(i)").unwrap() + "append(i".len();
        let edit = Edit::insertion(TextSize::try_from(at).unwrap(), ".detach()");
        assert!(j.allows(&Fix::safe("x", vec![edit.clone()])));
        nb.apply(&j, &[&edit]);
        let out = nb.to_json();
        let expected = NB.replace(
            r#""for i in range(3):\n    !echo é\n    losses.append(i)""#,
            r#""for i in range(3):\n    !echo é\n    losses.append(i.detach())""#,
        );
        assert_eq!(out, expected);
        // A list of lines keeps its layout; untouched lines keep their escapes.
        let mut nb = Notebook::parse(NB.to_string()).unwrap();
        let j = nb.joined();
        let at = j.display.find("[]").unwrap();
        let edit = Edit::replacement(
            TextRange::new(
                TextSize::try_from(at).unwrap(),
                TextSize::try_from(at + 2).unwrap(),
            ),
            "[0]",
        );
        nb.apply(&j, &[&edit]);
        assert_eq!(
            nb.to_json(),
            NB.replace(r#""losses = []\n""#, r#""losses = [0]\n""#)
        );
    }

    #[test]
    fn no_fix_inside_an_escape_or_across_cells() {
        let nb = Notebook::parse(NB.to_string()).unwrap();
        let j = nb.joined();
        let at = TextSize::try_from(j.display.find("!ls").unwrap()).unwrap();
        assert!(!j.allows(&Fix::safe("x", vec![Edit::insertion(at, "y")])));
        let end = TextSize::try_from(j.display.find("for").unwrap() + 2).unwrap();
        assert!(!j.allows(&Fix::safe(
            "x",
            vec![Edit::deletion(TextRange::new(at - TextSize::from(3), end))]
        )));
    }

    #[test]
    fn lines_split_where_python_splits_them() {
        let lines: Vec<&str> = lines_as_python_splits("a\r\nb\rc\x0cd\u{2028}e\n\nf").collect();
        assert_eq!(
            lines,
            ["a\r\n", "b\r", "c\x0c", "d\u{2028}", "e\n", "\n", "f"]
        );
        assert_eq!(lines_as_python_splits("").count(), 0);
        assert_eq!(lines_as_python_splits("x\n").collect::<Vec<_>>(), ["x\n"]);
    }

    #[test]
    fn ascii_only_files_get_escaped_lines() {
        assert_eq!(json_string("é\n", true), "\"\\u00e9\\n\"");
        assert_eq!(json_string("é\n", false), "\"é\\n\"");
        assert_eq!(json_string("😀", true), "\"\\ud83d\\ude00\"");
    }

    #[test]
    fn bad_notebooks_say_why() {
        let e = Notebook::parse("{\"cells\": [".into()).unwrap_err();
        assert!(matches!(e, NotebookError::Json(_)), "{e}");
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = Notebook::parse("{\"nbformat\": 3, \"worksheets\": []}".into()).unwrap_err();
        assert_eq!(e, NotebookError::OldFormat(3));
        let e = Notebook::parse(
            r#"{"cells": [{"cell_type": "code", "source": 3}], "nbformat": 4}"#.into(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("cell 1"), "{e}");
        let e = Notebook::parse(
            r#"{"cells": [], "metadata": {"kernelspec": {"language": "R"}}, "nbformat": 4}"#.into(),
        )
        .unwrap_err();
        assert_eq!(e, NotebookError::NotPython("R".into()));
        let e = Notebook::parse("[1, 2]".into()).unwrap_err();
        assert!(matches!(e, NotebookError::Shape(_)), "{e}");
    }

    #[test]
    fn a_kernel_numbers_the_cells_it_runs() {
        let nb = Notebook::parse(
            r##"{"cells": [
                {"cell_type": "markdown", "source": "# t"},
                {"cell_type": "code", "source": ["import torch\n"]},
                {"cell_type": "code", "source": "  \n"},
                {"cell_type": "code", "source": "%%bash\nls"},
                {"cell_type": "code", "source": "x = 1"}
            ], "nbformat": 4}"##
                .into(),
        )
        .unwrap();
        assert_eq!(nb.executed_cell(1), Some(2));
        // The blank cell runs not, the `%%bash` cell does.
        assert_eq!(nb.executed_cell(2), Some(4));
        assert_eq!(nb.executed_cell(3), Some(5));
        assert_eq!(nb.executed_cell(4), None);
        assert_eq!(nb.executed_cell(0), None);
    }
}
