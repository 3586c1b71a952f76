//! Wording and edits several rules share.

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Edit;
use crate::semantic::names::dotted;
use crate::semantic::scan::keys_in;
use crate::semantic::value::Value;

/// What a stored graph-carrying value keeps alive. After `.backward()` the saved activations
/// are freed and the chain of autograd nodes remains; without it, whole activations stay.
pub(crate) fn retained(checker: &Checker, value: &Value) -> &'static str {
    let backpropagated = value.origin().is_some_and(|o| o.backpropagated);
    if backpropagated || checker.function_trains() || checker.block_facts().calls_backward {
        "its chain of autograd nodes; `.backward()` freed the activations"
    } else {
        "with every saved activation: no `.backward()` frees them"
    }
}

/// "the autograd graph of `self.critic(...)` (line 12)".
pub(crate) fn origin_phrase(checker: &Checker, value: &Value) -> String {
    match value.origin() {
        Some(o) => format!(
            "the autograd graph of `{}` (line {})",
            o.what,
            checker.line(o.offset)
        ),
        None => "an autograd graph".to_string(),
    }
}

/// An edit appending a method call to an expression (`x` -> `x.detach()`), adding parentheses
/// when the expression binds looser than attribute access.
pub(crate) fn append_call(checker: &Checker, expr: &Expr, method: &str) -> Vec<Edit> {
    let simple = matches!(
        expr,
        Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_) | Expr::Subscript(_)
    );
    if simple {
        vec![Edit::insertion(expr.end(), format!(".{method}()"))]
    } else {
        let _ = checker;
        vec![
            Edit::insertion(expr.start(), "("),
            Edit::insertion(expr.end(), format!(").{method}()")),
        ]
    }
}

/// Does the expression change from one iteration of the innermost loop to the next (it mentions
/// the loop target or something rebound in the loop)?
pub(crate) fn varies_per_iteration(checker: &Checker, expr: &Expr) -> bool {
    let Some(frame) = checker.innermost_loop() else {
        return false;
    };
    let keys = keys_in(expr);
    if keys.iter().any(|k| frame.facts.rebinds(k)) {
        return true;
    }
    // f-strings and calls such as `len(history)` or `step()` change too.
    matches!(expr, Expr::FString(_)) || matches!(expr, Expr::Call(_)) && dotted(expr).is_none()
}

/// The text of a node, shortened.
pub(crate) fn short(checker: &Checker, expr: &Expr) -> String {
    checker.snippet(expr.range())
}
