//! Wording, edits and reports several rules share (the analysis they rest on lives in
//! `semantic/`).

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::Ranged;

use crate::checker::{Checker, Holder, Lifetime, Until};
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::registry::Rule;
use crate::semantic::facts::{init_kind_of_call, visit_body};
use crate::semantic::located::{
    few_rounds, in_except_handler, locate, locate_in_scope, runs_every_step, scope_root,
    under_modulo_guard, Located,
};
use crate::semantic::mutation::{Mutation, CONCATENATIONS};
use crate::semantic::names::{is_dotted, is_snapshot_method, last_segment};
use crate::semantic::value::{Kind, Value};

/// What a stored graph-carrying value keeps once `.backward()` ran through it.
pub const RETAINED_AFTER_BACKWARD: &str =
    "its chain of autograd nodes; `.backward()` freed the activations";
/// ... and when no `.backward()` did (the run report corrects either with
/// what the probe saw: a framework may call backward where the file does not).
pub const RETAINED_WITHOUT_BACKWARD: &str =
    "with every saved activation: no `.backward()` frees them";
/// ... and when every `.backward()` of the function keeps the graph (`retain_graph=True`).
pub const RETAINED_DESPITE_BACKWARD: &str =
    "with every saved activation: `.backward(retain_graph=True)` frees none of them";
/// ... and in a framework's step hook, whose returned loss the framework backpropagates.
pub const RETAINED_UNTIL_FRAMEWORK_BACKWARD: &str =
    "every saved activation until the framework's `.backward()` frees them, its chain of \
     autograd nodes after";

/// What a stored graph-carrying value keeps alive. After `.backward()` the saved activations
/// are freed and the chain of autograd nodes remains; without it, whole activations stay.
pub(crate) fn retained(checker: &Checker, value: &Value) -> &'static str {
    let backpropagated = value.origin().is_some_and(|o| o.backpropagated);
    // A framework's step hook (`training_step`) returns the loss for the framework to
    // backpropagate once the hook returns (`hooks.rs`); a hook no table lists and named for
    // training is taken to do the same.
    let framework_step = matches!(
        checker.cadence(),
        crate::semantic::iteration::Cadence::Every(_, crate::semantic::iteration::Reason::Hook)
    ) && checker.function().is_some_and(|f| {
        let name = f.name.as_str();
        match crate::semantic::hooks::method(name) {
            Some(h) => h.returns == crate::semantic::hooks::Returned::Backpropagated,
            None => name.contains("train"),
        }
    });
    let loop_trains = checker.loops().iter().any(|l| l.trains);
    let facts = &checker.scope().body_facts;
    if facts.calls_backward && facts.every_backward_retains {
        RETAINED_DESPITE_BACKWARD
    } else if backpropagated
        || checker.function_trains()
        || checker.block_facts().calls_backward
        || loop_trains
    {
        RETAINED_AFTER_BACKWARD
    } else if framework_step {
        RETAINED_UNTIL_FRAMEWORK_BACKWARD
    } else {
        RETAINED_WITHOUT_BACKWARD
    }
}

/// "the autograd graph of `self.critic(...)` (line 12)".
pub(crate) fn origin_phrase(checker: &Checker, value: &Value) -> String {
    match value.origin() {
        Some(o) => format!(
            "the autograd graph of `{}` ({})",
            o.what,
            where_made(checker, o)
        ),
        None => "an autograd graph".to_string(),
    }
}

/// Where a graph was made: "line 12" in this file, "models/net.py:31" in another file of the
/// project.
pub(crate) fn where_made(checker: &Checker, origin: &crate::semantic::value::Origin) -> String {
    match &origin.site {
        Some(site) => site.to_string(),
        None => format!("line {}", checker.line(origin.offset)),
    }
}

/// An edit appending a method call to an expression (`x` -> `x.detach()`), adding parentheses
/// when the expression binds looser than attribute access.
pub(crate) fn append_call(checker: &Checker, expr: &Expr, method: &str) -> Vec<Edit> {
    let _ = checker;
    if !needs_parens(expr) {
        vec![Edit::insertion(expr.end(), format!(".{method}()"))]
    } else {
        vec![
            Edit::insertion(expr.start(), "("),
            Edit::insertion(expr.end(), format!(").{method}()")),
        ]
    }
}

/// A fix that detaches what `key` (a container or a running total) keeps. It is safe only when
/// every use of `key` besides the statement at `site` is logging, printing, counting or
/// arithmetic on numbers (`uses.rs`): nothing that might need the graph can see the change.
pub(crate) fn detach_fix(
    checker: &Checker,
    key: &str,
    site: ruff_text_size::TextRange,
    message: String,
    edits: Vec<Edit>,
) -> crate::diagnostic::Fix {
    let applicability = if checker.only_numeric_uses(key, site) {
        crate::diagnostic::Applicability::Safe
    } else {
        crate::diagnostic::Applicability::Unsafe
    };
    crate::diagnostic::Fix::new(applicability, message, edits)
}

/// Stores numbers where that is as safe: `x.item()` in place of `x` when every graph-carrying
/// value stored (`x`, or the elements of a tuple or list written out) is a 0-d tensor and
/// everything made from `key` ends as text or a count (`only_text_uses`). A 0-d tensor kept per
/// step costs some KiB of resident memory (its own allocations among the step's freed ones),
/// a float 24 bytes, so `.detach()` leaves a smaller leak where `.item()` leaves none. None
/// where that does not hold: `.detach()` is the fix then.
pub(crate) fn item_fix(
    checker: &Checker,
    key: &str,
    site: ruff_text_size::TextRange,
    stored: &Expr,
) -> Option<crate::diagnostic::Fix> {
    let (shown, edits) = called_on_graphs(checker, stored, "item", true)?;
    if !checker.only_text_uses(key, site) {
        return None;
    }
    Some(crate::diagnostic::Fix::new(
        crate::diagnostic::Applicability::Safe,
        format!("Store `{shown}`: nothing reads `{key}` but to print, log or count it, so numbers serve"),
        edits,
    ))
}

/// `stored` (a value, or a tuple or list written out: `(reg_loss, cls_loss)`) with `.method()`
/// called on each graph-carrying element: how it then reads, and the edits that make it. None
/// when nothing in it carries a graph, or an element carries one in something other than a
/// tensor (a dict, a nested tuple; with `scalar`, anything but a 0-d tensor) or is starred.
pub(crate) fn called_on_graphs(
    checker: &Checker,
    stored: &Expr,
    method: &str,
    scalar: bool,
) -> Option<(String, Vec<Edit>)> {
    let elts: Vec<&Expr> = match stored {
        Expr::Tuple(t) => t.elts.iter().collect(),
        Expr::List(l) => l.elts.iter().collect(),
        e => vec![e],
    };
    let mut edits = Vec::new();
    let mut shown = Vec::new();
    for elt in &elts {
        let value = checker.value(elt);
        if matches!(elt, Expr::Starred(_)) {
            return None;
        }
        if !value.has_graph() {
            shown.push(short(checker, elt));
            continue;
        }
        if !value.is_tensor() || scalar && !value.scalar {
            return None;
        }
        shown.push(call_text(checker, elt, method));
        edits.extend(append_call(checker, elt, method));
    }
    if edits.is_empty() {
        return None;
    }
    let shown = match stored {
        Expr::Tuple(_) if elts.len() == 1 => format!("({},)", shown[0]),
        Expr::Tuple(_) => format!("({})", shown.join(", ")),
        Expr::List(_) => format!("[{}]", shown.join(", ")),
        _ => shown.join(""),
    };
    Some((shown, edits))
}

/// How `append_call` shows in a message: `x.detach()`, or `(a * b).detach()` for an expression
/// that binds looser than attribute access. Long expressions are shortened.
pub(crate) fn call_text(checker: &Checker, expr: &Expr, method: &str) -> String {
    let text = short(checker, expr);
    if needs_parens(expr) {
        format!("({text}).{method}()")
    } else {
        format!("{text}.{method}()")
    }
}

pub(crate) fn detached_text(checker: &Checker, expr: &Expr) -> String {
    call_text(checker, expr, "detach")
}

fn needs_parens(expr: &Expr) -> bool {
    !matches!(
        expr,
        Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_) | Expr::Subscript(_)
    )
}

/// Ends the sentence "keeps ... alive ": "until `self.losses` is cleared in `on_epoch_end()`
/// (line 40)", "until `train()` returns".
pub(crate) fn until(checker: &Checker, lifetime: &Lifetime) -> String {
    let key = &lifetime.key;
    match &lifetime.until {
        Until::Reset {
            mutation,
            function,
            offset,
        } => format!(
            "until `{key}` is {} in `{function}()` (line {})",
            match mutation {
                Mutation::Rebind => "rebound",
                Mutation::Trim => "trimmed",
                _ => "cleared",
            },
            checker.line(*offset)
        ),
        Until::LifeOfObject { known: true } => {
            "for the life of the object (nothing clears it)".to_string()
        }
        Until::LifeOfObject { known: false } => "for the life of the object".to_string(),
        Until::ObjectLives { object } => format!("for as long as `{object}` lives"),
        Until::Process => "for the life of the process (a module global)".to_string(),
        Until::Return { function } if lifetime.holder == Holder::Param => {
            format!("for as long as the caller of `{function}()` keeps `{key}`")
        }
        Until::Return { function } => format!("until `{function}()` returns"),
        Until::OuterLoop { offset } => format!(
            "until the loop at line {} rebinds `{key}`",
            checker.line(*offset)
        ),
        Until::Closure => "for as long as the closure lives".to_string(),
        Until::Periodic { offset } => format!(
            "until the reset at line {}, which runs only every so many steps",
            checker.line(*offset)
        ),
    }
}

/// The text of a node, shortened.
/// Storing into `container` keeps a bounded number of items whatever runs: a preallocated
/// tensor or array (writing copies the values in), or a `deque(maxlen=...)`, made so where it
/// is read or where the attribute is initialised, or (for an entry, `self.stats[key]`) by an
/// assignment of the same place in the function.
pub(crate) fn keeps_a_bounded_number(checker: &Checker, container: &Expr) -> bool {
    if matches!(
        checker.value(container).kind,
        Kind::Deque { bounded: true } | Kind::Tensor | Kind::Output | Kind::Array
    ) {
        return true;
    }
    if checker
        .place_facts(container)
        .is_some_and(|p| p.is_bounded())
    {
        return true;
    }
    let Expr::Subscript(_) = container else {
        return false;
    };
    let Some(body) = checker.function().map(|f| &f.body) else {
        return false;
    };
    let place = checker.snippet(container.range());
    let mut bounded = false;
    visit_body(body, &mut |stmt| {
        if let Stmt::Assign(a) = stmt {
            if let Expr::Call(call) = &*a.value {
                bounded |= a
                    .targets
                    .iter()
                    .any(|t| checker.snippet(t.range()) == place)
                    && matches!(
                        init_kind_of_call(call, &checker.facts.imports, &checker.facts.classes),
                        Kind::Deque { bounded: true }
                    );
            }
        }
    });
    bounded
}

pub(crate) fn short(checker: &Checker, expr: &Expr) -> String {
    checker.snippet(expr.range())
}

// ----- statement removal (LS012, LS101-LS103) ---------------------------------------------

/// Offset of the start of the line holding `offset`.
pub(crate) fn line_start(source: &str, offset: ruff_text_size::TextSize) -> usize {
    let o = usize::from(offset);
    source[..o].rfind('\n').map_or(0, |i| i + 1)
}

/// Offset just after the newline ending the line that holds `offset` (or the end of the file).
pub(crate) fn next_line_start(source: &str, offset: ruff_text_size::TextSize) -> usize {
    let o = usize::from(offset);
    source[o..].find('\n').map_or(source.len(), |i| o + i + 1)
}

/// Does the statement have its lines to itself (only indentation before it, only a comment
/// after it)?
pub(crate) fn owns_its_lines(source: &str, stmt: &ruff_python_ast::Stmt) -> bool {
    let start = usize::from(stmt.start());
    let before = &source[line_start(source, stmt.start())..start];
    let end = usize::from(stmt.end());
    let after_end = next_line_start(source, stmt.end());
    let after = source[end..after_end].trim();
    before.trim().is_empty() && (after.is_empty() || after.starts_with('#'))
}

/// An edit removing the located statement: its whole lines, or `pass` in its place when it is
/// the only statement of its block. `None` when it shares a line with other code.
pub(crate) fn remove_statement(checker: &Checker, located: &Located) -> Option<Edit> {
    let stmt = located.stmt();
    if located.body.len() == 1 {
        return Some(Edit::replacement(stmt.range(), "pass"));
    }
    if !owns_its_lines(checker.source, stmt) {
        return None;
    }
    let start = line_start(checker.source, stmt.start());
    let end = next_line_start(checker.source, stmt.end());
    Some(Edit::deletion(ruff_text_size::TextRange::new(
        ruff_text_size::TextSize::try_from(start).ok()?,
        ruff_text_size::TextSize::try_from(end).ok()?,
    )))
}

/// Shared by LS101 and LS102: reports a cleanup call that runs every step, with a fix that
/// removes it.
pub(crate) fn report_every_step(
    checker: &mut Checker,
    call: &ExprCall,
    stmt: &Stmt,
    rule: Rule,
    why: &str,
    fix_message: &str,
) {
    if !runs_every_step(checker) || checker.innermost_loop().is_some_and(|l| few_rounds(l.stmt)) {
        return;
    }
    let Some(located) = locate_in_scope(checker, stmt) else {
        return;
    };
    if under_modulo_guard(&located) || in_except_handler(&located, stmt.range()) {
        return;
    }
    let when = match checker.innermost_loop() {
        Some(l) => format!(
            "on every iteration of the loop at line {}",
            checker.line(l.offset)
        ),
        None => format!(
            "on every call of `{}()`, which runs once per step",
            checker.function().map_or("?", |f| f.name.as_str())
        ),
    };
    let message = format!("`{}` runs {}: {}", checker.snippet(call.range()), when, why);
    let mut diagnostic = Diagnostic::new(rule, message, call.range());
    if let Some(edit) = removal(checker, stmt, call, &located) {
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit(fix_message, vec![edit]));
    }
    checker.report(diagnostic);
}

/// Removes the statement when it is nothing but the call; removes a guarding
/// `if torch.cuda.is_available():` whose only statement it is.
fn removal(checker: &Checker, stmt: &Stmt, call: &ExprCall, located: &Located) -> Option<Edit> {
    let Stmt::Expr(e) = stmt else { return None };
    if e.value.range() != call.range() {
        return None;
    }
    if located.body.len() == 1 {
        if let Some(Stmt::If(parent)) = located.ancestors.last() {
            let is_available = match &*parent.test {
                Expr::Call(c) => checker
                    .qualified_function(&c.func)
                    .is_some_and(|q| q.ends_with(".is_available")),
                _ => false,
            };
            let guard_only =
                parent.elif_else_clauses.is_empty() && parent.body.len() == 1 && is_available;
            if guard_only {
                let root = scope_root(checker)?;
                let parent_loc = locate(root, parent.range())?;
                return remove_statement(checker, &parent_loc);
            }
        }
    }
    remove_statement(checker, located)
}

/// The concatenation under a result that is sliced (`[-N:]`) or copied (`.to(device)`),
/// and whether it was sliced.
pub(crate) fn unwrap_result(expr: &Expr) -> (&Expr, bool) {
    let mut cur = expr;
    let mut sliced = false;
    loop {
        match cur {
            Expr::Subscript(s) => {
                sliced = true;
                cur = &s.value;
            }
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if is_snapshot_method(a.attr.as_str()) => cur = &a.value,
                _ => return (cur, sliced),
            },
            _ => return (cur, sliced),
        }
    }
}

/// `torch.cat`-like function being called, by its short name.
pub(crate) fn concat_function(checker: &Checker, call: &ExprCall) -> Option<String> {
    let q = checker.qualified_function(&call.func)?;
    let last = last_segment(&q);
    (q.starts_with("torch.") && CONCATENATIONS.contains(&last)).then(|| format!("torch.{last}"))
}

/// Is the element the history itself, possibly sliced or copied (`h`, `h[1:]`, `h.to(dev)`)?
/// A `.detach()` on the way is not stripped: its value carries no graph.
pub(crate) fn refers_to(expr: &Expr, key: &str) -> bool {
    let mut cur = expr;
    loop {
        if is_dotted(cur, key) {
            return true;
        }
        match cur {
            Expr::Subscript(s) => cur = &s.value,
            Expr::Starred(s) => cur = &s.value,
            Expr::Call(c) => match &*c.func {
                Expr::Attribute(a) if c.arguments.is_empty() || is_snapshot_method(&a.attr) => {
                    cur = &a.value;
                }
                _ => return false,
            },
            _ => return false,
        }
    }
}
