//! What this file's functions return, learned by silent walks before the walk that reports.
//!
//! During a silent walk, parameters carry a placeholder graph, so a summary can say "returns a
//! graph when argument *i* carries one" (`def compute(pred, y): return F.mse_loss(pred, y)`).
//! Call sites record which parameters receive graphs (`normalizer.update(policy(s))` makes `x`
//! in `Normalizer.update(self, x)` a graph). Method calls resolve through the class of the
//! receiver when known, else through arity among the classes that define the method.

use std::rc::Rc;

use ruff_python_ast::{Expr, ExprCall, StmtClassDef, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::model::{Scope, ScopeKind, SemanticModel};
use super::names::{is_conventional_loss_param, is_conventional_module_param};
use super::scan::BlockFacts;
use super::value::{Graph, Kind, Origin, Value};
use crate::summaries::Passed;

impl<'a> SemanticModel<'a> {
    /// A method defined by exactly one class of this file (`agent.update(...)` when only
    /// `DDPGAgent` has `update`).
    pub(crate) fn unique_method_summary(
        &self,
        method: &str,
        call: &ExprCall,
        grad: bool,
    ) -> Option<Value> {
        let owners = self.method_owners.get(method)?;
        let nargs = self.current_call_args.get();
        let fitting: Vec<&String> = owners
            .iter()
            .filter(|c| {
                self.facts
                    .class(c)
                    .and_then(|f| f.arity.get(method))
                    .is_none_or(|(min, max)| nargs >= *min && nargs <= *max)
            })
            .collect();
        if fitting.len() != 1 {
            return None;
        }
        self.summary_call(&format!("{}.{}", fitting[0], method), call, grad)
    }

    /// The value a call of this file's function or method returns, remembering the
    /// graph-carrying arguments it receives (for the callee's parameters).
    pub(crate) fn summary_call(&self, key: &str, call: &ExprCall, grad: bool) -> Option<Value> {
        // Positions of the arguments that carry a graph (not a placeholder's).
        let mut taints: Vec<usize> = Vec::new();
        let args: Vec<Value> = call
            .arguments
            .args
            .iter()
            .map(|a| self.value_inner(a))
            .collect();
        for (i, a) in args.iter().enumerate() {
            if a.origin().is_some_and(|o| o.param.is_none()) {
                taints.push(i);
            }
        }
        // What the arguments are, for parameters that only ever receive numbers.
        {
            let number = |v: &Value| v.kind == Kind::Plain && v.graph == Graph::No;
            // Keywords are read without evaluating calls in them: evaluating them here would
            // evaluate nested calls once more per level of nesting.
            let keywords: Vec<(&str, bool)> = call
                .arguments
                .keywords
                .iter()
                .filter_map(|k| Some((k.arg.as_ref()?.as_str(), self.plainly_number(&k.value))))
                .collect();
            let mut map = self.param_numbers.borrow_mut();
            if !map.contains_key(key) {
                map.insert(key.to_string(), Default::default());
            }
            let entry = map.get_mut(key).expect("inserted above");
            let starred = call
                .arguments
                .args
                .iter()
                .any(|a| matches!(a, Expr::Starred(_)));
            if entry.positional.len() < args.len() {
                entry.positional.resize(args.len(), None);
            }
            for (slot, a) in entry.positional.iter_mut().zip(&args) {
                super::model::ArgNumbers::see(slot, number(a) && !starred);
            }
            if entry.tensor.len() < args.len() {
                entry.tensor.resize(args.len(), None);
            }
            for (slot, a) in entry.tensor.iter_mut().zip(&args) {
                super::model::ArgNumbers::see(slot, a.is_tensor() && !starred);
            }
            if entry.passed.len() < args.len() {
                entry.passed.resize(args.len(), None);
            }
            for (slot, a) in entry.passed.iter_mut().zip(&args) {
                Passed::see(slot, if starred { None } else { passed(a) });
            }
            for (name, is_number) in keywords {
                let slot = entry.keyword.entry(name.to_string()).or_insert(true);
                *slot &= is_number;
            }
        }
        if !taints.is_empty() && grad {
            let mut map = self.param_taint.borrow_mut();
            let entry = map.entry(key.to_string()).or_default();
            for i in taints {
                if entry.len() <= i {
                    entry.resize(i + 1, None);
                }
                // The first graph a call site passes names the parameter's; it reaches the
                // callee as its argument `i` (a summary returning it stays parametric).
                if entry[i].is_none() {
                    if let (Some(o), Some(expr)) = (args[i].origin(), call.arguments.args.get(i)) {
                        entry[i] = Some(self.as_passed(o, expr, i));
                    }
                }
            }
        }
        // An abstract method (it only documents itself) runs a subclass's override: what the
        // overrides return (the project index joins them) is what the call returns.
        let v = match self.overrides.get(key) {
            Some(over) => over,
            None => self.summaries.get(key)?,
        };
        if !grad {
            return Some(without_graph(v.clone()));
        }
        // A summary whose graph comes from parameter `i` passes the argument's graph through.
        Some(substitute(v, &args))
    }

    /// The origin of a graph passed as argument `expr`: backpropagated when the caller's
    /// `.backward()` runs through it (`loss.backward()` then `self.record(loss)`, or before it):
    /// whatever the callee keeps of it, the caller's backward frees its activations, and only
    /// the chain of autograd nodes stays.
    pub(crate) fn as_passed(&self, origin: &Origin, expr: &Expr, position: usize) -> Rc<Origin> {
        let mut o = origin.clone();
        o.through = Some(position);
        if !o.backpropagated {
            // A name or attribute is its own key: no set of keys to build.
            o.backpropagated = match super::names::dotted(expr) {
                Some(k) => self.consumed_by_backward(&k),
                None => super::scan::keys_in(expr)
                    .iter()
                    .any(|k| self.consumed_by_backward(k)),
            };
        }
        Rc::new(o)
    }

    /// Is `expr` a number without evaluating any call in it: a literal, a name or attribute
    /// holding one, `len(...)`, `.item()`, or arithmetic on those.
    fn plainly_number(&self, expr: &Expr) -> bool {
        match expr {
            Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) => true,
            Expr::Name(_) | Expr::Attribute(_) => {
                let v = self.value_inner(expr);
                v.kind == Kind::Plain && v.graph == Graph::No
            }
            Expr::UnaryOp(u) => self.plainly_number(&u.operand),
            Expr::BinOp(b) => self.plainly_number(&b.left) && self.plainly_number(&b.right),
            Expr::Call(c) => match &*c.func {
                Expr::Name(n) => {
                    matches!(n.id.as_str(), "len" | "int" | "float" | "round")
                        && self.lookup(n.id.as_str()).is_none()
                }
                Expr::Attribute(a) => a.attr.as_str() == "item",
                _ => false,
            },
            _ => false,
        }
    }

    /// Opens the scope of a function: its parameters bound (conventional module and loss names
    /// as such, placeholders in a silent walk, graphs that callers pass), grad off when a
    /// decorator or every caller in this file says so. `None` when a silent walk can learn
    /// nothing from its body: the summary is then recorded directly.
    pub(crate) fn enter_function(
        &mut self,
        def: &'a StmtFunctionDef,
        class: Option<&'a StmtClassDef>,
    ) -> Option<()> {
        let name = def.name.as_str();
        let body_facts = self.cached_facts(&def.body, || BlockFacts::scan(&def.body));
        let key = summary_key(def, class);
        // A summary pass learns return values and the graphs passed to this file's functions:
        // a function that returns nothing (or that nothing in the file calls by name) and calls
        // none of them teaches it nothing.
        let teaches = self.reporting || {
            // Other files of the project may call it when the file's summary is made.
            let called = self.calls_out.is_some()
                || self
                    .called_names
                    .as_ref()
                    .is_none_or(|names| names.contains(name));
            (body_facts.returns_value && called) || {
                let facts = self.facts;
                let owners = &self.method_owners;
                let external = &self.external_callees;
                let external_calls = !external.is_empty();
                // An attribute holding an instance of a module class of this file
                // (`self.norm(h)`) runs that class's `forward`.
                let submodule = |c: &str| {
                    class.is_some_and(|k| {
                        facts
                            .class(k.name.as_str())
                            .and_then(|f| f.attrs.get(c))
                            .and_then(|p| p.class.as_deref())
                            .and_then(|held| facts.class(held))
                            .is_some_and(|h| h.is_module && h.methods.contains("forward"))
                    })
                };
                body_facts.callees.iter().any(|c| {
                    facts.functions.contains(*c)
                        || owners.contains_key(*c)
                        || external_calls && external.contains(*c)
                        || facts.classes.contains_key(*c)
                        || submodule(c)
                })
            }
        };
        if !teaches {
            // Its body is not walked, so nothing is ever returned: the summary is what an empty
            // body gives, and binding the parameters would be wasted.
            self.summaries.insert(key, Value::plain());
            return None;
        }
        let mut scope = Scope::new(ScopeKind::Function { def, class }, body_facts);
        let module_self = class.is_some_and(|c| {
            self.facts
                .class(c.name.as_str())
                .is_some_and(|f| f.is_module)
        });
        for p in def.parameters.iter() {
            let pname = p.name().as_str().to_string();
            let annotated_module = p
                .annotation()
                .and_then(|a| self.facts.imports.qualify(a))
                .is_some_and(|q| q == "torch.nn.Module" || self.facts.is_module_class(&q));
            // Conventional names (`model`, `criterion`) say torch modules only in torch code.
            let torch = self.facts.uses_torch;
            let v = if annotated_module || torch && is_conventional_module_param(&pname) {
                Value::no_graph(Kind::Module)
            } else if torch && is_conventional_loss_param(&pname) {
                Value::no_graph(Kind::LossFn)
            } else if pname == "self" && module_self {
                Value::no_graph(Kind::Module)
            } else if p.default().is_some_and(|d| {
                matches!(
                    d,
                    Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::StringLiteral(_)
                )
            }) {
                // A parameter whose default is a number, a flag or a string is one.
                Value::plain()
            } else {
                Value::unknown()
            };
            scope.env.insert(pname.clone(), v);
            scope.params.insert(pname);
        }
        let positional = crate::summaries::extract::positional_params(def);
        // Parameters that every call site in this file gives a number are numbers (`i` in
        // `agent.update(i, batch)` called with `range`'s ints).
        if let Some(numbers) = self.param_numbers.borrow().get(&key) {
            for (i, pname) in positional.iter().enumerate() {
                if numbers.always_number(Some(i), pname)
                    && scope
                        .env
                        .get(*pname)
                        .is_some_and(|v| v.kind == Kind::Unknown && v.graph == Graph::Unknown)
                {
                    scope.env.insert((*pname).to_string(), Value::plain());
                }
            }
        }
        // Parameters that every call site passes a module to (in this file, and in the others
        // the index has seen) are modules: `generate(decoder, ...)` runs the model; those given
        // a module's parameters are those (`ema.update(model.parameters())`).
        {
            let numbers = self.param_numbers.borrow();
            let here = numbers.get(&key);
            let elsewhere = self.external.passed_params.get(&key);
            for (i, pname) in positional.iter().enumerate() {
                let passed = match here.and_then(|n| n.passed_at(i)) {
                    Some(agreed) => agreed,
                    None => elsewhere.and_then(|m| m.get(i).copied().flatten()),
                };
                let Some(passed) = passed else { continue };
                if scope
                    .env
                    .get(*pname)
                    .is_some_and(|v| v.kind == Kind::Unknown && v.graph == Graph::Unknown)
                {
                    let kind = match passed {
                        Passed::Module => Kind::Module,
                        Passed::Parameters => Kind::Parameters,
                        // (Told with the graph it carries, below.)
                        Passed::Tensor => continue,
                    };
                    scope
                        .env
                        .insert((*pname).to_string(), Value::no_graph(kind));
                }
            }
        }
        // In a silent walk, unknown parameters carry a placeholder graph, so the summary can
        // say "returns a graph when argument i carries one" (`def compute(pred, y): return
        // F.mse_loss(pred, y)`, a normalizer's `update(x)`).
        if !self.reporting {
            for (i, pname) in positional.iter().enumerate() {
                if scope
                    .env
                    .get(*pname)
                    .is_some_and(|v| v.kind == Kind::Unknown && v.graph == Graph::Unknown)
                {
                    scope.env.insert(
                        (*pname).to_string(),
                        Value {
                            graph: Graph::Yes(Rc::new(Origin {
                                param: Some(i),
                                ..Origin::new((*pname).to_string(), def.start())
                            })),
                            ..Value::unknown()
                        },
                    );
                }
            }
        }
        // Parameters that callers (in this file, or elsewhere as the project index says) pass
        // graph-carrying values to. A summary that returns one stays "argument i's graph".
        // A parameter every call site passes a tensor is one (here, or, where no call here
        // passes it, in the project's other files): its fix can be `.detach()`.
        if let Some(taints) = self.param_taint.borrow().get(&key) {
            let numbers = self.param_numbers.borrow();
            let tensors = numbers.get(&key);
            let elsewhere = self.external.passed_params.get(&key);
            for (i, (pname, taint)) in positional.iter().zip(taints).enumerate() {
                if let Some(origin) = taint {
                    let passed_here =
                        tensors.is_some_and(|t| t.tensor.get(i).copied().flatten().is_some());
                    let tensor = tensors.is_some_and(|t| t.always_tensor(i))
                        || !passed_here
                            && elsewhere.and_then(|m| m.get(i).copied().flatten())
                                == Some(Passed::Tensor);
                    scope.env.insert(
                        (*pname).to_string(),
                        Value {
                            graph: Graph::Yes(origin.clone()),
                            kind: if tensor { Kind::Tensor } else { Kind::Unknown },
                            ..Value::unknown()
                        },
                    );
                }
            }
        }
        if def
            .decorator_list
            .iter()
            .any(|d| self.is_grad_disabling(&d.expression))
            || self.training().only_called_without_grad(def)
            || class.is_some() && super::hooks::method(name).is_some_and(|h| !h.grad)
        {
            scope.no_grad = 1;
        }
        self.scopes.push(scope);
        Some(())
    }

    /// Closes the function's scope; a silent walk records what it returned.
    pub(crate) fn leave_function(
        &mut self,
        def: &'a StmtFunctionDef,
        class: Option<&'a StmtClassDef>,
    ) {
        let scope = self.scopes.pop().expect("pushed by enter_function");
        if !self.reporting {
            let mut ret = scope.returned.unwrap_or_else(Value::plain);
            if scope.no_grad > 0 {
                ret = without_graph(ret);
            }
            self.summaries
                .insert(summary_key(def, class), parametric(ret));
        }
    }

    /// A `return`: joins what the function returns, marking a loss backpropagated here.
    pub(crate) fn record_return(&mut self, ret: &ruff_python_ast::StmtReturn) {
        // Only a silent walk records summaries.
        if self.reporting {
            return;
        }
        let mut v = ret
            .value
            .as_deref()
            .map(|e| self.value(e))
            .unwrap_or_else(Value::plain);
        if let Some(e) = ret.value.as_deref() {
            // A returned loss that was backpropagated here keeps only its nodes.
            let uses = &self.scope().body_facts.backward_uses;
            if super::scan::keys_in(e).iter().any(|k| uses.contains(k)) {
                v = backpropagated(v);
            }
        }
        let scope = self.scope_mut();
        scope.returned = Some(match scope.returned.take() {
            Some(prev) => prev.join(v),
            None => v,
        });
    }
}

/// A returned value whose graph a caller passed in (`through`) stands for that argument's graph:
/// what one caller passes is not what the function returns to another.
fn parametric(v: Value) -> Value {
    let graph = match v.graph {
        Graph::Yes(o) if o.through.is_some() => {
            let mut o = (*o).clone();
            o.param = o.through.take();
            o.site = None;
            Graph::Yes(Rc::new(o))
        }
        g => g,
    };
    let parts = v.parts.map(|x| parametric(x.clone()));
    Value { graph, parts, ..v }
}

/// The value with its graphs marked as backpropagated (elements of a tuple included).
fn backpropagated(v: Value) -> Value {
    let graph = match v.graph {
        Graph::Yes(o) if !o.backpropagated => {
            let mut o = (*o).clone();
            o.backpropagated = true;
            Graph::Yes(Rc::new(o))
        }
        g => g,
    };
    let parts = v.parts.map(|x| backpropagated(x.clone()));
    Value { graph, parts, ..v }
}

pub(crate) fn summary_key(def: &StmtFunctionDef, class: Option<&StmtClassDef>) -> String {
    match class {
        Some(c) => format!("{}.{}", c.name.as_str(), def.name.as_str()),
        None => def.name.as_str().to_string(),
    }
}

/// The value with no graph anywhere in it (computed under `no_grad`).
fn without_graph(v: Value) -> Value {
    let parts = v.parts.map(|x| without_graph(x.clone()));
    Value {
        graph: Graph::No,
        parts,
        ..v
    }
}

/// A summary's value at a call: graphs that stand for parameter `i` become the argument's.
fn substitute(v: &Value, args: &[Value]) -> Value {
    let parts = v.parts.map(|x| substitute(x, args));
    if let Graph::Yes(o) = &v.graph {
        if o.param.is_some() {
            // The first of the parameters it stands for whose argument carries a graph.
            return match o
                .params()
                .find_map(|i| args.get(i).filter(|a| a.has_graph()))
            {
                Some(a) => Value {
                    graph: a.graph.clone(),
                    parts,
                    ..v.clone()
                },
                // What the summary knew of the result came from the placeholder.
                None => Value {
                    parts,
                    ..Value::unknown()
                },
            };
        }
    }
    Value { parts, ..v.clone() }
}

/// What kind of object an argument is, for the parameter that receives it.
fn passed(v: &Value) -> Option<Passed> {
    match v.kind {
        Kind::Module => Some(Passed::Module),
        Kind::Parameters => Some(Passed::Parameters),
        _ => None,
    }
}
