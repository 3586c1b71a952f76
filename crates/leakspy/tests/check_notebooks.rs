//! `leakspy check` on Jupyter notebooks, end to end: the real binary on notebooks written the
//! way Jupyter writes them (nbformat: one-space indent, sorted keys, a final newline).

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

fn leakspy(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("leakspy").unwrap();
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/notebooks")
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A temp folder with copies of the fixture notebooks (written by nbformat).
fn project(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for n in names {
        fs::copy(fixtures().join(n), dir.path().join(n)).unwrap();
    }
    dir
}

/// A cell's source as nbformat stores it: a list of lines, each with its newline but the last.
fn lines(source: &str) -> Value {
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|l| Value::String(l.into()))
            .collect(),
    )
}

/// A notebook's JSON as nbformat writes it (`json.dumps(nb, indent=1, sort_keys=True,
/// ensure_ascii=False)` plus a newline; serde_json's maps are sorted by key).
fn notebook_json(cells: &[(&str, &str)]) -> String {
    let cells: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, (kind, source))| {
            let mut cell = json!({
                "cell_type": kind,
                "id": format!("c{i}"),
                "metadata": {},
                "source": lines(source),
            });
            if *kind == "code" {
                cell["execution_count"] = Value::Null;
                cell["outputs"] = json!([]);
            }
            cell
        })
        .collect();
    let nb = json!({
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5
    });
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(&nb, &mut ser).unwrap();
    String::from_utf8(out).unwrap() + "\n"
}

#[test]
fn text_names_the_cell_and_the_line() {
    let dir = project(&["train.ipynb"]);
    let out = leakspy(dir.path())
        .args(["check", "train.ipynb"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    insta::assert_snapshot!("notebook_text", stdout(&out));
}

#[test]
fn json_sarif_and_github_use_cells() {
    let dir = project(&["train.ipynb"]);
    let out = leakspy(dir.path())
        .args(["check", "train.ipynb", "--output-format", "json"])
        .output()
        .unwrap();
    let items: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let found: Vec<(String, u64, u64, u64, u64)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["code"].as_str().unwrap().to_string(),
                i["cell"].as_u64().unwrap(),
                i["location"]["row"].as_u64().unwrap(),
                i["location"]["column"].as_u64().unwrap(),
                i["noqa_row"].as_u64().unwrap(),
            )
        })
        .collect();
    // ruff's conventions: `cell` 1-based among all cells (markdown too), rows in that cell.
    assert_eq!(
        found,
        vec![("LS002".into(), 4, 7, 5, 7), ("LS001".into(), 6, 8, 5, 8)]
    );
    // The fix's edits are located in the cell too.
    assert_eq!(
        items[0]["fix"]["edits"][0]["location"],
        json!({"row": 7, "column": 23})
    );
    // A message's "line N" is the cell's: the loss is made on line 3 of the same cell.
    let message = items[0]["message"].as_str().unwrap();
    assert!(message.contains("`F.mse_loss(...)` (line 3)"), "{message}");

    let out = leakspy(dir.path())
        .args(["check", "train.ipynb", "--output-format", "sarif"])
        .output()
        .unwrap();
    let sarif: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(repo_root().join("crates/leakspy/tests/data/sarif-schema-2.1.0.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "invalid SARIF:\n{}", errors.join("\n"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["properties"]["cell"], 4);
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        7
    );

    let out = leakspy(dir.path())
        .args(["check", "train.ipynb", "--output-format", "github"])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "::error title=leakspy (LS002),file=train.ipynb,line=7,col=5,endLine=7,endColumn=24::cell 4:line 7: LS002 "
        ),
        "{text}"
    );
}

/// Splits a Python file into cells at blank lines before unindented statements, as a
/// researcher pastes a script into a notebook. Returns the cells and, per line of the file,
/// its (cell index among all cells, row in the cell), given `before` cells put first.
fn cells_of(source: &str, before: usize) -> (Vec<String>, Vec<(usize, usize)>) {
    let mut cells: Vec<String> = vec![String::new()];
    let mut map = Vec::new();
    let mut previous_blank = false;
    let mut depth: i64 = 0;
    for line in source.split_inclusive('\n') {
        let starts_statement = !line.starts_with([' ', '\t', '\n', '#', ')', ']', '}'])
            && !line.starts_with("else")
            && !line.starts_with("elif")
            && !line.starts_with("except")
            && !line.starts_with("finally");
        let current = cells.last().unwrap();
        if previous_blank && starts_statement && depth == 0 && !current.trim().is_empty() {
            // The blank lines end the cell before.
            cells.push(String::new());
        }
        let cell = cells.len() - 1;
        let row = cells[cell].split_inclusive('\n').count() + 1;
        map.push((cell + before + 1, row));
        cells.last_mut().unwrap().push_str(line);
        previous_blank = line.trim().is_empty();
        depth += line.matches(['(', '[', '{']).count() as i64
            - line.matches([')', ']', '}']).count() as i64;
    }
    (cells, map)
}

/// Findings of a JSON check: (file, code, row, column, message) in file order.
fn findings(out: &std::process::Output) -> Vec<Value> {
    serde_json::from_str::<Value>(&stdout(out))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(out), stderr(out)))
        .as_array()
        .unwrap()
        .clone()
}

/// The same code as `.py` files and as notebooks (the bundled example and every zoo program,
/// split into cells, with magics, shell escapes and a markdown cell added) gets the same
/// findings, each at the cell and line the `.py` line went to.
#[test]
fn notebooks_get_the_findings_of_the_same_code_as_python_files() {
    let dir = tempfile::tempdir().unwrap();
    let (py, nb) = (dir.path().join("py"), dir.path().join("nb"));
    fs::create_dir_all(&py).unwrap();
    fs::create_dir_all(&nb).unwrap();
    let mut programs = vec![repo_root().join("examples/leaky_train.py")];
    for entry in fs::read_dir(repo_root().join("examples/zoo")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
            programs.push(path);
        }
    }
    programs.sort();
    let mut maps = std::collections::BTreeMap::new();
    let mut total_cells = 0;
    for program in &programs {
        let name = program.file_stem().unwrap().to_string_lossy().into_owned();
        let source = fs::read_to_string(program).unwrap();
        fs::write(py.join(format!("{name}.py")), &source).unwrap();
        // A markdown cell and a cell of magics first; a shell cell last.
        let (cells, map) = cells_of(&source, 2);
        let mut all: Vec<(&str, &str)> = vec![
            ("markdown", "# Notes\n\nRun top to bottom."),
            (
                "code",
                "%load_ext autoreload\n%autoreload 2\n!nvidia-smi -L",
            ),
        ];
        all.extend(cells.iter().map(|c| ("code", c.trim_end_matches('\n'))));
        all.push(("code", "%%bash\nls -la | wc -l"));
        total_cells += all.len();
        fs::write(nb.join(format!("{name}.ipynb")), notebook_json(&all)).unwrap();
        maps.insert(name, map);
    }

    let py_out = leakspy(dir.path())
        .args(["check", "py", "--output-format", "json"])
        .output()
        .unwrap();
    let nb_out = leakspy(dir.path())
        .args(["check", "nb", "--output-format", "json"])
        .output()
        .unwrap();
    assert_eq!(py_out.status.code(), Some(1), "{}", stderr(&py_out));
    assert_eq!(nb_out.status.code(), Some(1), "{}", stderr(&nb_out));
    let (py_found, nb_found) = (findings(&py_out), findings(&nb_out));
    assert!(
        py_found.len() >= 12,
        "{} findings on the .py files",
        py_found.len()
    );
    assert_eq!(
        py_found.len(),
        nb_found.len(),
        "python:\n{}\nnotebooks:\n{}",
        stdout(&py_out),
        stdout(&nb_out)
    );
    for (p, n) in py_found.iter().zip(&nb_found) {
        let name = Path::new(p["filename"].as_str().unwrap())
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let map = &maps[&name];
        let row = p["location"]["row"].as_u64().unwrap() as usize;
        let (cell, cell_row) = map[row - 1];
        assert_eq!(p["code"], n["code"], "{name}");
        assert_eq!(n["cell"], cell, "{name}:{row}: {}", n["message"]);
        assert_eq!(n["location"]["row"], cell_row, "{name}:{row}");
        assert_eq!(
            n["location"]["column"], p["location"]["column"],
            "{name}:{row}"
        );
        // The message names the same lines, the notebook's way.
        let mut expected = String::new();
        let mut rest = p["message"].as_str().unwrap();
        while let Some(i) = rest.find("line ") {
            let after = &rest[i + 5..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            expected.push_str(&rest[..i]);
            if digits == 0 {
                expected.push_str("line ");
                rest = after;
                continue;
            }
            let (c, r) = map[after[..digits].parse::<usize>().unwrap() - 1];
            if c == cell {
                expected.push_str(&format!("line {r}"));
            } else {
                expected.push_str(&format!("cell {c}, line {r}"));
            }
            rest = &after[digits..];
        }
        expected.push_str(rest);
        assert_eq!(n["message"].as_str().unwrap(), expected, "{name}:{row}");
    }
    eprintln!(
        "{} findings in {} .py files; {} in {} notebooks of {total_cells} cells",
        py_found.len(),
        programs.len(),
        nb_found.len(),
        programs.len()
    );
}

#[test]
fn fix_rewrites_only_the_fixed_lines() {
    let dir = project(&["train.ipynb", "train_fixed.ipynb"]);
    let before = fs::read_to_string(dir.path().join("train.ipynb")).unwrap();
    let twin = fs::read_to_string(dir.path().join("train_fixed.ipynb")).unwrap();

    // --diff shows the cells and writes nothing.
    let out = leakspy(dir.path())
        .args(["check", "--diff", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let diff = stdout(&out);
    assert!(
        diff.contains("--- train.ipynb:cell 4\n+++ train.ipynb:cell 4\n"),
        "{diff}"
    );
    assert!(diff.contains("+    losses.append(loss.detach())"), "{diff}");
    assert!(diff.contains("--- train.ipynb:cell 6\n"), "{diff}");
    assert_eq!(
        fs::read_to_string(dir.path().join("train.ipynb")).unwrap(),
        before
    );

    let out = leakspy(dir.path())
        .args(["check", "--fix", "."])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("Fixed 2 findings."));
    let after = fs::read_to_string(dir.path().join("train.ipynb")).unwrap();
    // Byte for byte: only the two fixed lines changed; outputs, metadata, magics, layout and
    // the final newline are as nbformat wrote them.
    let expected = before
        .replace(
            "\"    losses.append(loss)\"",
            "\"    losses.append(loss.detach())\"",
        )
        .replace(
            "\"    total += loss\\n\"",
            "\"    total += loss.detach()\\n\"",
        );
    assert_ne!(expected, before);
    assert_eq!(after, expected);
    // A notebook with nothing to fix is the same bytes.
    assert_eq!(
        fs::read_to_string(dir.path().join("train_fixed.ipynb")).unwrap(),
        twin
    );
    // And the fixed notebook is clean.
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("All checks passed! (2 files checked)"));
}

#[test]
fn fixes_keep_other_layouts_too() {
    // One string per source (some writers), and everything above ASCII escaped
    // (`ensure_ascii=True`): both kept, the new text written the same way.
    let dir = tempfile::tempdir().unwrap();
    let text = "{\n  \"cells\": [\n    {\n      \"cell_type\": \"code\",\n      \"execution_count\": null,\n      \"metadata\": {},\n      \"outputs\": [],\n      \"source\": \"import torch\\nlosses = []  # p\\u00e9rte\\nmodel = torch.nn.Linear(2, 1)\\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\\nfor _ in range(10):\\n    loss = model(torch.randn(4, 2)).sum()\\n    opt.zero_grad()\\n    loss.backward()\\n    opt.step()\\n    losses.append(loss)\\n\"\n    }\n  ],\n  \"metadata\": {},\n  \"nbformat\": 4,\n  \"nbformat_minor\": 2\n}";
    fs::write(dir.path().join("a.ipynb"), text).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "--fix", "a.ipynb"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let after = fs::read_to_string(dir.path().join("a.ipynb")).unwrap();
    assert_eq!(
        after,
        text.replace("losses.append(loss)\\n", "losses.append(loss.item())\\n")
    );
}

#[test]
fn magics_and_shell_escapes_are_not_syntax_errors() {
    let dir = tempfile::tempdir().unwrap();
    let nb = notebook_json(&[
        ("code", "%matplotlib inline\nimport torch\nfiles = !ls\ntorch.randn?\n??torch.cat"),
        (
            "code",
            "%%time\nhist = []\nfor i in range(3):\n    !echo step\n    %time x = torch.randn(3, requires_grad=True)\n    hist.append(x * 2)",
        ),
        ("code", "%%bash\nfor f in *.py; do echo $f; done"),
        ("code", "%%writefile out.txt\nnot python (at all"),
    ]);
    fs::write(dir.path().join("m.ipynb"), nb).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "m.ipynb", "--output-format", "json"])
        .output()
        .unwrap();
    let items = findings(&out);
    assert!(
        items.iter().all(|i| i["code"] != "syntax-error"),
        "{}",
        stdout(&out)
    );
    // A real syntax error is reported at its cell and line, the magics around it are not.
    let nb = notebook_json(&[
        ("code", "%matplotlib inline\nimport torch"),
        ("markdown", "text"),
        ("code", "x = 1\ny = (2\n!ls"),
    ]);
    fs::write(dir.path().join("m.ipynb"), nb).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "m.ipynb"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.starts_with("m.ipynb:cell 3:line "), "{text}");
    assert!(text.contains("syntax-error"), "{text}");
}

#[test]
fn a_malformed_notebook_is_an_error_and_the_rest_are_checked() {
    let dir = project(&["train.ipynb"]);
    let good = fs::read_to_string(dir.path().join("train.ipynb")).unwrap();
    // Cut short, as by a crashed save.
    fs::write(dir.path().join("broken.ipynb"), &good[..good.len() / 2]).unwrap();
    fs::write(
        dir.path().join("r.ipynb"),
        r#"{"cells": [], "metadata": {"kernelspec": {"language": "R"}}, "nbformat": 4, "nbformat_minor": 5}"#,
    )
    .unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}{err}");
    assert!(
        err.contains("leakspy: error: ./broken.ipynb: not a valid notebook: the JSON is malformed"),
        "{err}"
    );
    assert!(err.contains("line "), "{err}");
    assert!(
        err.contains("./r.ipynb: not a Python notebook (its kernel's language is R): skipped"),
        "{err}"
    );
    assert!(text.contains("train.ipynb:cell 4:line 7: LS002"), "{text}");
    assert!(text.contains("in 1 file checked"), "{text}");
    assert!(!text.contains("All checks passed"), "{text}");

    // Only files that could not be checked: never "All checks passed".
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("broken.ipynb"), "{").unwrap();
    fs::write(
        dir.path().join("fine.ipynb"),
        notebook_json(&[("code", "x = 1")]),
    )
    .unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stdout(&out),
        "No findings in 1 file checked; 1 not checked (see above).\n"
    );
}

#[test]
fn folders_of_notebooks_are_walked_and_configured_like_ruff() {
    let dir = project(&["train.ipynb", "train_fixed.ipynb"]);
    fs::create_dir_all(dir.path().join("nested/deeper")).unwrap();
    fs::copy(
        fixtures().join("train.ipynb"),
        dir.path().join("nested/deeper/again.ipynb"),
    )
    .unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("Found 4 findings in 3 files checked."),
        "{text}"
    );
    assert!(
        text.contains("nested/deeper/again.ipynb:cell 6:line 8: LS001"),
        "{text}"
    );

    // .gitignore and `exclude` apply to notebooks as to Python files.
    fs::write(dir.path().join(".gitignore"), "nested/\n").unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    assert!(
        stdout(&out).contains("in 2 files checked"),
        "{}",
        stdout(&out)
    );
    fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.leakspy]\nexclude = [\"*.ipynb\"]\n",
    )
    .unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        "No Python files or notebooks found to check (.py, .pyi, .ipynb; `extend-include` adds others).\n"
    );
    // `extend-include` adds files a walk would not take.
    fs::write(
        dir.path().join("script.ipy"),
        "import torch\nlosses = []\nm = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(1000):\n    loss = m(torch.randn(1, 2)).sum()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    losses.append(loss)\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.leakspy]\nexclude = [\"*.ipynb\"]\nextend-include = [\"*.ipy\"]\n",
    )
    .unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    let text = stdout(&out);
    assert!(text.contains("script.ipy:10:"), "{text}");
    assert!(text.contains("in 1 file checked"), "{text}");
}

#[test]
fn an_empty_folder_is_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    let out = leakspy(dir.path()).args(["check", "."]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !stdout(&out).contains("All checks passed"),
        "{}",
        stdout(&out)
    );
    assert!(stdout(&out).starts_with("No Python files or notebooks found"));
}
