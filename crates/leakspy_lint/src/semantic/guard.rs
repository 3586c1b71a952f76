//! Conditions under which a statement does not run on every iteration of a training run in
//! normal use: once (`if step == 0:`), a fixed number of times (`if it in {0, 10, n - 1}:`), a flag the guarded code turns off, a lazy `if x is None:`
//! initialisation) or only when a debugging option is switched on (`if plot:` with
//! `plot=False` by default, `if self.save_activations:` with the attribute `False` from
//! `__init__`). What such code keeps does not grow with training.

use ruff_python_ast::{CmpOp, Expr, Stmt, UnaryOp};

use super::facts::{self_attr, visit_body};
use super::model::SemanticModel;
use super::names::dotted;
use super::value::Kind;

impl SemanticModel<'_> {
    /// Is the current statement under an `if` (inside the iteration `it`) that lets it run
    /// once, or only with an option that is off by default?
    pub(crate) fn rarely_runs(&self, it: super::model::Iteration) -> bool {
        let scope = self.scope();
        let floor = match it {
            super::model::Iteration::Loop { depth, .. } => depth + 1,
            super::model::Iteration::Call { .. } => 0,
        };
        scope
            .guards
            .iter()
            .filter(|g| g.depth >= floor)
            .any(|g| self.once(g.test, g.body, it) || self.off_by_default(g.test))
    }

    /// Is the current statement under a periodic condition (`if step % 100 == 0:`) inside the
    /// iteration `it`: it runs once every so many iterations, as an outer loop's body would.
    pub(crate) fn periodically(&self, it: super::model::Iteration) -> bool {
        let floor = match it {
            super::model::Iteration::Loop { depth, .. } => depth + 1,
            super::model::Iteration::Call { .. } => 0,
        };
        self.scope()
            .guards
            .iter()
            .any(|g| g.depth >= floor && super::iteration::is_periodic(g.test))
    }

    /// `step == 0`, `not initialized` with the body setting it, `x is None` with the body
    /// assigning `x`, `not hasattr(self, "fig")` with the body assigning `self.fig`, `it in
    /// {0, 2, n - 1}`.
    fn once(&self, test: &Expr, body: &[Stmt], it: super::model::Iteration) -> bool {
        match test {
            Expr::Compare(c) if c.ops.len() == 1 => {
                let (op, right) = (c.ops[0], &c.comparators[0]);
                match op {
                    CmpOp::Eq => {
                        is_small_literal(right) && is_counter(&c.left)
                            || is_small_literal(&c.left) && is_counter(right)
                    }
                    CmpOp::Is => {
                        right.is_none_literal_expr()
                            && dotted(&c.left).is_some_and(|k| assigns(body, &k))
                    }
                    // `if it in plot_iterations:` with a set written out in the source: at
                    // most as many times as it has elements.
                    CmpOp::In => self.training().is_literal_collection(right),
                    // `if c not in self.memo: self.memo[c] = ...`: once per key, when the keys
                    // come from a fixed set (not a step counter).
                    CmpOp::NotIn => {
                        dotted(right).is_some_and(|k| assigns_item(body, &k))
                            && !self.key_changes_in(it, &c.left)
                    }
                    _ => false,
                }
            }
            Expr::UnaryOp(u) if u.op == UnaryOp::Not => {
                dotted(&u.operand).is_some_and(|k| assigns(body, &k))
                    || hasattr_key(&u.operand).is_some_and(|k| assigns(body, &k))
            }
            Expr::Name(_) | Expr::Attribute(_) => dotted(test).is_some_and(|k| assigns(body, &k)),
            Expr::BoolOp(b) => b.values.iter().any(|v| self.once(v, body, it)),
            _ => false,
        }
    }

    /// A flag that is off unless someone turns it on: a parameter defaulting to `False` or
    /// `None`, or an attribute `__init__` sets to `False` or `None`.
    fn off_by_default(&self, test: &Expr) -> bool {
        match test {
            Expr::BoolOp(b) => b.values.iter().any(|v| self.off_by_default(v)),
            Expr::Name(n) => self.function().is_some_and(|f| {
                f.parameters.iter_non_variadic_params().any(|p| {
                    p.parameter.name.as_str() == n.id.as_str()
                        && p.default.as_deref().is_some_and(|d| {
                            d.is_none_literal_expr()
                                || matches!(d, Expr::BooleanLiteral(b) if !b.value)
                        })
                })
            }),
            Expr::Attribute(_) => self_attr(test).is_some_and(|attr| {
                self.attr_facts(attr)
                    .is_some_and(|p| p.init == Kind::Plain && self.init_is_off(attr))
            }),
            _ => false,
        }
    }

    /// `self.<attr> = False` (or `None`) in `__init__`.
    fn init_is_off(&self, attr: &str) -> bool {
        let Some(class) = self.class() else {
            return false;
        };
        let mut off = false;
        for s in &class.body {
            let Stmt::FunctionDef(f) = s else { continue };
            if f.name.as_str() != "__init__" {
                continue;
            }
            visit_body(&f.body, &mut |s| {
                if let Stmt::Assign(a) = s {
                    if a.targets.iter().any(|t| self_attr(t) == Some(attr))
                        && (a.value.is_none_literal_expr()
                            || matches!(&*a.value, Expr::BooleanLiteral(b) if !b.value))
                    {
                        off = true;
                    }
                }
            });
        }
        off
    }
}

/// A step, epoch or iteration counter: `step`, `self.global_step`, `self.get_num_updates()`,
/// `i` (any short loop index), `batch_idx`.
fn is_counter(e: &Expr) -> bool {
    let name = match e {
        Expr::Call(c) => dotted(&c.func),
        e => dotted(e),
    };
    let Some(name) = name else { return false };
    let last = super::names::last_segment(&name).trim_start_matches("get_");
    last.len() <= 2 || super::iteration::coarse_name(last).is_some()
}

fn is_small_literal(e: &Expr) -> bool {
    matches!(e, Expr::NumberLiteral(n) if n.value.as_int().and_then(|i| i.as_u64()).is_some_and(|v| v <= 1))
}

/// Does the block assign an item of `key` (`key[k] = ...`)?
fn assigns_item(body: &[Stmt], key: &str) -> bool {
    let mut found = false;
    visit_body(body, &mut |s| {
        if let Stmt::Assign(a) = s {
            if a.targets.iter().any(
                |t| matches!(t, Expr::Subscript(sub) if dotted(&sub.value).as_deref() == Some(key)),
            ) {
                found = true;
            }
        }
    });
    found
}

/// Does the block assign `key` (as a whole)?
fn assigns(body: &[Stmt], key: &str) -> bool {
    let mut found = false;
    visit_body(body, &mut |s| {
        let targets: Vec<&Expr> = match s {
            Stmt::Assign(a) => a.targets.iter().collect(),
            Stmt::AnnAssign(a) => vec![&*a.target],
            Stmt::AugAssign(a) => vec![&*a.target],
            _ => vec![],
        };
        for t in targets {
            if super::scan::keys_in(t).contains(key) {
                found = true;
            }
        }
    });
    found
}

/// `hasattr(obj, "name")`: the key `obj.name`.
fn hasattr_key(e: &Expr) -> Option<String> {
    let Expr::Call(c) = e else { return None };
    if !matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "hasattr") {
        return None;
    }
    let [obj, Expr::StringLiteral(name)] = &*c.arguments.args else {
        return None;
    };
    Some(format!("{}.{}", dotted(obj)?, name.value.to_str()))
}
