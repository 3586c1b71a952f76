//! Which fixes `leakspy fix` tries: the `check` findings that the
//! diagnosis joined to what grows (`leakspy_report::attach_static_findings`:
//! the findings on the lines that made the kept objects and on the lines
//! that keep them), safe ones by default, unsafe ones only when asked. What
//! grows with no known fix is said with its holder and the rule's advice.

use leakspy_report::{Describe, Diagnosis, GrowthGroup, StaticMatch};

/// One fix to apply, and the growth it is for.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Planned {
    /// As the diagnosis shows it: relative to the job's folder, or absolute.
    pub file: String,
    /// In a notebook, the cell, and `line` a row of it.
    pub cell: Option<usize>,
    pub line: u64,
    pub rule: String,
    /// What the fix does, in the rule's words.
    pub fix: String,
    pub safe: bool,
    /// Who holds what it is for.
    pub holder: String,
}

impl Planned {
    /// `train.py:41`, `train.ipynb:cell 4:line 7`.
    pub fn location(&self) -> String {
        match self.cell {
            Some(c) => format!("{}:cell {c}:line {}", self.file, self.line),
            None => format!("{}:{}", self.file, self.line),
        }
    }

    /// The same finding's fix (same rule, file and line).
    pub fn same_place(&self, other: &Planned) -> bool {
        self.file == other.file
            && self.cell == other.cell
            && self.line == other.line
            && self.rule == other.rule
    }
}

/// What grows with no fix `check` knows.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Unfixed {
    pub holder: String,
    pub grows: String,
    pub made_at: Option<String>,
    /// The findings on its lines (`LS015 file:line: message`), whose
    /// messages end with what to do instead.
    pub advice: Vec<String>,
}

#[derive(Debug, Default)]
pub(super) struct Plan {
    pub apply: Vec<Planned>,
    /// Unsafe fixes left out without `--unsafe-fixes`.
    pub withheld: Vec<Planned>,
    pub unfixed: Vec<Unfixed>,
    /// Growing groups with neither a holder nor a finding.
    pub unexplained: usize,
}

pub(super) fn plan(d: &Diagnosis, unsafe_fixes: bool) -> Plan {
    let mut p = Plan::default();
    for g in &d.growth {
        let Some(holder) = holder_of(g) else {
            p.unexplained += 1;
            continue;
        };
        let fixable: Vec<&StaticMatch> = g
            .static_findings
            .iter()
            .filter(|m| m.fix.is_some())
            .collect();
        if fixable.is_empty() {
            p.unfixed.push(Unfixed {
                holder,
                grows: g.growers[0].describe(),
                made_at: g
                    .created_at
                    .as_ref()
                    .map(|c| format!("{}:{}", c.file, c.line)),
                advice: g
                    .static_findings
                    .iter()
                    .map(|m| {
                        format!(
                            "{} {}: {} (`leakspy rule {}` shows what to use instead)",
                            m.rule,
                            m.location(),
                            m.message,
                            m.rule
                        )
                    })
                    .collect(),
            });
            continue;
        }
        for m in fixable {
            let planned = Planned {
                file: m.file.clone(),
                cell: m.cell,
                line: m.line,
                rule: m.rule.clone(),
                fix: m.fix.clone().unwrap_or_default(),
                safe: m.safe_fix,
                holder: holder.clone(),
            };
            let same = |q: &Planned| q.same_place(&planned);
            if p.apply.iter().any(same) || p.withheld.iter().any(same) {
                continue;
            }
            if planned.safe || unsafe_fixes {
                p.apply.push(planned);
            } else {
                p.withheld.push(planned);
            }
        }
    }
    p
}

/// Where the run named nothing that grows (no census in time: a short job), the fixes of the
/// leak findings of `check` in the files the job runs. Only the run after them can tell
/// whether they were the leak, so each says that the run did not name it.
pub(super) fn from_findings(files: &[leakspy_trace::CheckedFile], unsafe_fixes: bool) -> Plan {
    let mut p = Plan::default();
    for m in files.iter().flat_map(|f| &f.findings) {
        let leak = leakspy_lint::Rule::from_code(&m.rule)
            .is_some_and(|r| r.kind() == leakspy_lint::RuleKind::Leak);
        let Some(fix) = m.fix.clone().filter(|_| leak) else {
            continue;
        };
        let kept = leakspy_report::kept_by(&m.rule, &m.message)
            .unwrap_or_else(|| format!("what check {} says", m.rule));
        let planned = Planned {
            file: m.file.clone(),
            cell: m.cell,
            line: m.line,
            rule: m.rule.clone(),
            fix,
            safe: m.safe_fix,
            holder: format!("{kept}; the run named no holder"),
        };
        if p.apply
            .iter()
            .chain(&p.withheld)
            .any(|q| q.same_place(&planned))
        {
            continue;
        }
        if planned.safe || unsafe_fixes {
            p.apply.push(planned);
        } else {
            p.withheld.push(planned);
        }
    }
    p
}

/// Who keeps a group's objects: the holder the probe named, else what the
/// finding on the line that made them says keeps them.
fn holder_of(g: &GrowthGroup) -> Option<String> {
    if let Some(h) = g.holder.as_ref().filter(|h| h.is_named()) {
        return Some(leakspy_report::holder_name(h));
    }
    g.static_holder
        .clone()
        .or_else(|| (!g.static_findings.is_empty()).then(|| "(no holder named)".to_string()))
}

/// What to change where no fix is known, for people.
pub(super) fn advice_text(u: &Unfixed) -> String {
    let mut s = format!("held by {}: {}", u.holder, u.grows);
    if let Some(at) = &u.made_at {
        s.push_str(&format!(", made at {at}"));
    }
    s.push('\n');
    if u.advice.is_empty() {
        // Without the line, whether a rule knows it was not asked.
        s.push_str(if u.made_at.is_some() {
            "    no `check` rule knows this pattern: "
        } else {
            "    the run did not show the line that made or keeps them (a longer run lets the \
             probe trace it): "
        });
        s.push_str(
            "stop keeping what grows there every step (clear or bound the container, or keep \
             `.item()` / `.detach()`ed values)\n",
        );
    }
    for a in &u.advice {
        s.push_str(&format!("    {a}\n"));
    }
    s
}
