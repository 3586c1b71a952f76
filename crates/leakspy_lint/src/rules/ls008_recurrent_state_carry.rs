//! ## What it does
//! Flags a recurrent state that is fed back into a module on every training iteration and never
//! detached: `out, h = rnn(x, h)`, `h = cell(x, h)`, `out, (h, c) = lstm(x, (h, c))` inside a
//! loop that calls `.backward()` (or steps an optimizer), with autograd on and nothing in that
//! loop detaching or re-creating `h`. Also `out, self.h = self.rnn(x, self.h)` in a per-step
//! method (`training_step`, `update`, ...) that backpropagates. Also a state carried across the
//! iterations of a rollout, generation or evaluation loop with autograd on that never
//! backpropagates (nor does its function): `logits, value, (h, c) = policy(obs, state)` then
//! `state = (h, c)`. Also a sampling loop anywhere (`output, hidden = decoder(inp, hidden)` in
//! `generate()`) when its code runs with autograd on (a call in this file or another has it on)
//! and neither backpropagates nor returns anything that carries a graph: nobody can ever use the
//! graph it builds. The callee is an `nn.Module` the analysis knows (also a parameter every
//! caller in the project passes a module to), a callee named like a recurrent layer (`rnn`,
//! `lstm`, `gru`, `cell`), or a function of the file that feeds the state it is given to a call
//! and returns a new one carrying a graph it made (`char, h = predict(net, char, h)`).
//!
//! ## Why is this bad?
//! The new `h` is an output of the module, so it carries the autograd graph of this step; fed
//! back in, it links the next step's graph to this one. Without a `.detach()` the chain reaches
//! back to the first batch: the graph of every step stays alive (memory grows with each step),
//! every `.backward()` walks back through all of them (each step gets slower), and the second
//! `.backward()` fails with "Trying to backward through the graph a second time" unless
//! `retain_graph=True` was added, which keeps the saved activations of every step as well. This
//! is the reason for `repackage_hidden` in PyTorch's word-language-model example.
//!
//! ## Example
//! ```python
//! def train_epoch(model, batches, optimizer, criterion):
//!     hidden = None
//!     for data, targets in batches:
//!         optimizer.zero_grad()
//!         output, hidden = model(data, hidden)
//!         loss = criterion(output, targets)
//!         loss.backward(retain_graph=True)
//!         optimizer.step()
//! ```
//!
//! ## Use instead
//! ```python
//! def train_epoch(model, batches, optimizer, criterion):
//!     hidden = None
//!     for data, targets in batches:
//!         optimizer.zero_grad()
//!         if hidden is not None:
//!             hidden = tuple(h.detach() for h in hidden)
//!         output, hidden = model(data, hidden)
//!         loss = criterion(output, targets)
//!         loss.backward()
//!         optimizer.step()
//! ```
//!
//! ## Fix safety
//! No fix is offered: whether the state is a tensor (`h.detach()`) or a tuple
//! (`tuple(s.detach() for s in h)`), and where the truncation should happen, depends on the
//! model.
//!
//! ## Stays silent on
//! A state detached or re-created anywhere in the training loop (`h = h.detach()`,
//! `h = repackage_hidden(h)`, `h = model.init_hidden(...)`, `h.detach_()`), including only every
//! `k` steps; bounded full backpropagation through time (the state re-created per sequence and
//! one `.backward()` after the time loop); loops under `torch.no_grad()`/`inference_mode()`,
//! also when every caller in the project runs the function so; sampling code that returns the
//! graph (a caller may backpropagate through it), that no call in the project runs (its callers
//! are unknown), set-up code (`__init__` running a model to learn its shapes), a loop that
//! makes the module it calls (a stack of layers) and a few steps written out (`range(4)`); a
//! loop over the time axis of its input (`for t in range(inputs.shape[0])`: one forward pass
//! over a sequence, however its names read); a helper that detaches the state it is given
//! before its model sees it (`h = tuple(e.data for e in h)`), or hands it back untouched.

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::rules::helpers::short;
use crate::semantic::mutation::Mutation;
use crate::semantic::names::{dotted, is_dotted, last_segment};
use crate::semantic::scan::visit_block;
use crate::semantic::value::Kind;

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !checker.grad_enabled() {
        return;
    }
    let Stmt::Assign(assign) = stmt else { return };
    let [target] = assign.targets.as_slice() else {
        return;
    };
    let Expr::Call(call) = &*assign.value else {
        return;
    };
    let mut outputs = Vec::new();
    target_keys(target, &mut outputs);
    let Some(carried) = carried_keys(checker, target, &outputs, call) else {
        return;
    };
    let callee = short(checker, &call.func);
    // The loop whose iterations the state is carried across: the innermost one that trains.
    let trainer = checker
        .loops()
        .iter()
        .rev()
        .find(|l| l.facts.calls_backward || l.facts.steps_optimizer)
        .map(|l| (l.stmt, l.offset));
    // What keeping every step's graph costs: with a backward, its walk; without, the activations.
    let mut cost = "every `.backward()` walks back through all of them (memory and step time grow)";
    // What to do instead of detaching: for a loop whose graph nobody uses, not to build it.
    let mut instead = None;
    // The carried keys that nothing in the loop's body detaches or re-creates.
    let not_reset = |body: &[Stmt]| -> Vec<&String> {
        carried
            .iter()
            .filter(|k| !reset_in(checker, body, k, &outputs))
            .collect()
    };
    let (leaking, context): (Vec<&String>, String) = if let Some((loop_stmt, offset)) = trainer {
        let body: &[Stmt] = match loop_stmt {
            Stmt::For(f) => &f.body,
            Stmt::While(w) => &w.body,
            _ => return,
        };
        (
            not_reset(body),
            format!(
                "on every iteration of the training loop at line {}, which backpropagates,",
                checker.line(offset)
            ),
        )
    } else if let Some((body, offset)) = rollout_loop(checker, call) {
        // A rollout, generation or evaluation loop with autograd on that never backpropagates
        // (nor does its function, after it): the chain grows for as long as the loop runs.
        cost = "every step's saved activations stay (memory grows with every step)";
        (
            not_reset(body),
            format!(
                "on every iteration of the loop at line {}, with autograd on and no \
                 `.backward()` to free the saved activations,",
                checker.line(offset)
            ),
        )
    } else if let Some((body, offset)) = generation_loop(checker, call) {
        // A generation or sampling loop: its graph can never be used, and the carried state
        // makes it longer with every step until the loop ends.
        cost = "every step's saved activations stay until the loop ends (memory grows with \
                every step)";
        instead = Some(match checker.function() {
            Some(def) => format!(
                "run the loop under `with torch.no_grad():` (or decorate `{}` with \
                 `@torch.no_grad()`)",
                def.name.as_str()
            ),
            None => "run the loop under `with torch.no_grad():`".to_string(),
        });
        (
            not_reset(body),
            format!(
                "on every iteration of the loop at line {}, with autograd on, in code that \
                 neither backpropagates nor returns a graph,",
                checker.line(offset)
            ),
        )
    } else {
        // A per-step method that backpropagates and keeps the state on the object.
        if checker.in_loop() || !checker.in_per_step_function() || !checker.function_trains() {
            return;
        }
        let Some(def) = checker.function() else {
            return;
        };
        let fname = def.name.as_str();
        let leaking = carried
            .iter()
            .filter(|k| {
                self_attr_of(k).is_some_and(|attr| {
                    !reset_in(checker, &def.body, k, &outputs)
                        && !reset_elsewhere(checker, attr, fname)
                })
            })
            .collect();
        (
            leaking,
            format!("on every call of `{fname}()`, which backpropagates,"),
        )
    };
    if leaking.is_empty() {
        return;
    }
    let names = leaking
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(" and ");
    let (verb, it) = if leaking.len() == 1 {
        ("is", "it")
    } else {
        ("are", "they")
    };
    let advice = if leaking.len() == 1 {
        let k = leaking[0];
        format!(
            "`{k} = {k}.detach()` at the start of each iteration or chunk \
             (`{k} = tuple(s.detach() for s in {k})` if it is an LSTM's `(h, c)`)"
        )
    } else {
        let ks = leaking.iter().map(|k| k.as_str()).collect::<Vec<_>>();
        let detached = ks
            .iter()
            .map(|k| format!("{k}.detach()"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "`{} = {detached}` at the start of each iteration or chunk",
            ks.join(", ")
        )
    };
    let remedy = match instead {
        Some(i) => format!("{i}, or detach with {advice}"),
        None => format!("detach with {advice}"),
    };
    let message = format!(
        "{names} {verb} fed back into `{callee}(...)` {context} and never \
         detached or re-created there: each step's graph links to the previous step's, so {it} \
         keep{s} the autograd graph of every step alive and {cost}; {remedy}",
        s = if leaking.len() == 1 { "s" } else { "" },
    );
    checker.report(Diagnostic::new(Rule::LS008, message, stmt.range()));
}

/// The innermost loop around the statement that is a training iteration (a rollout that steps
/// an environment, a loop over data) when neither it nor its function backpropagates, outside
/// a module's own methods: its body and offset.
fn rollout_loop<'a>(
    checker: &Checker<'a>,
    call: &ExprCall,
) -> Option<(&'a [Stmt], ruff_text_size::TextSize)> {
    // A module's own methods build the graph of one forward pass on purpose (time steps,
    // refinement steps, tiles), for the caller to backpropagate.
    if checker.function_trains() || checker.in_module_class() {
        return None;
    }
    let l = checker
        .loops()
        .iter()
        .rev()
        .find(|l| l.role.is_training())?;
    // An object running its own submodule (`self.lstm(q, h)`, `self.encoder(tile, cache)`) in a
    // loop is model code too, unless the loop steps something (an environment).
    let own_submodule = matches!(&*call.func, Expr::Attribute(a)
        if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self"));
    let steps = l
        .facts
        .callees
        .iter()
        .any(|c| *c == "step" || c.starts_with("step_"));
    if own_submodule && !steps {
        return None;
    }
    let body: &'a [Stmt] = match l.stmt {
        // A loop over the time axis of its input (`for t in range(inputs.shape[0])`) is one
        // forward pass over a sequence, as long as the sequence, whatever its names say.
        Stmt::For(f) if over_time_axis(checker, &f.iter) => return None,
        Stmt::For(f) => &f.body,
        Stmt::While(w) => &w.body,
        _ => return None,
    };
    Some((body, l.offset))
}

/// `range(x.shape[0])`, `range(x.size(1))`, or `range(len(x))` of a tensor (directly, or
/// through a local bound once to such a count, `steps = inputs.shape[0]`).
fn over_time_axis(checker: &Checker, iter: &Expr) -> bool {
    let Expr::Call(call) = iter else { return false };
    if !is_dotted(&call.func, "range") {
        return false;
    }
    let [stop] = &*call.arguments.args else {
        return false;
    };
    let count = match stop {
        Expr::Name(n) => checker.function().and_then(|def| {
            let mut found = None;
            let mut binds = 0;
            visit_block(&def.body, &mut |s| {
                if let Stmt::Assign(a) = s {
                    if a.targets.iter().any(|t| is_dotted(t, n.id.as_str())) {
                        binds += 1;
                        found = Some(&*a.value);
                    }
                }
            });
            (binds == 1).then_some(found).flatten()
        }),
        e => Some(e),
    };
    let Some(count) = count else { return false };
    let tensor = |e: &Expr| checker.value(e).is_tensor_like() || checker.value(e).has_graph();
    match count {
        // `x.shape[0]`: an axis of a tensor or an array.
        Expr::Subscript(s) => {
            matches!(&*s.value, Expr::Attribute(a) if a.attr.as_str() == "shape")
        }
        Expr::Call(c) => match &*c.func {
            // `x.size(0)`
            Expr::Attribute(a) => a.attr.as_str() == "size" && !c.arguments.args.is_empty(),
            // `len(x)`
            Expr::Name(n) => n.id.as_str() == "len" && c.arguments.args.first().is_some_and(tensor),
            _ => false,
        },
        _ => false,
    }
}

/// The innermost loop around the statement when it is a generation or sampling loop: code
/// that runs with autograd on (a call of its function does, or it is the module's top level),
/// neither backpropagates (itself or through what it calls) nor returns anything that carries a
/// graph, and keeps nothing of the loop's on an object or a parameter. Nothing can ever
/// backpropagate through the graph the carried state links, so it is all waste. Outside a
/// module's own methods and set-up code (`__init__` runs a model once to learn its shapes);
/// not a loop over a small fixed number of steps, nor one that makes the module it calls (a
/// new layer per iteration is a stack of layers, as long as the architecture, not a state
/// carried through one module).
fn generation_loop<'a>(
    checker: &Checker<'a>,
    call: &ExprCall,
) -> Option<(&'a [Stmt], ruff_text_size::TextSize)> {
    if checker.in_module_class() || checker.function_trains() || !checker.runs_with_grad() {
        return None;
    }
    if checker
        .function()
        .is_some_and(|def| def.name.as_str() == "__init__")
    {
        return None;
    }
    if checker
        .function()
        .is_some_and(|def| checker.training().trains(def))
    {
        return None;
    }
    let l = checker.innermost_loop()?;
    let body: &'a [Stmt] = match l.stmt {
        Stmt::For(f) if !few_steps(checker, &f.iter) => &f.body,
        Stmt::While(w) => &w.body,
        _ => return None,
    };
    let callee_root = dotted(&call.func).map(|d| d.split('.').next().unwrap_or("").to_string());
    if callee_root.is_some_and(|r| l.facts.rebinds(&r)) {
        return None;
    }
    let params = &checker.scope().params;
    let keeps_outside = l.facts.changes.iter().any(|(key, changes)| {
        let root = key.split(['.', '[']).next().unwrap_or(key);
        (root == "self" || params.contains(root)) && changes.contains(&Mutation::Grow)
    });
    if keeps_outside || !checker.returns_no_graph() {
        return None;
    }
    Some((body, l.offset))
}

/// `range(k)` (or a collection written out) with at most a handful of steps: the chain it
/// builds is as short as one forward pass's.
fn few_steps(checker: &Checker, iter: &Expr) -> bool {
    const FEW: u64 = 16;
    if checker.training().is_literal_collection(iter) {
        return true;
    }
    let Expr::Call(call) = iter else { return false };
    if !is_dotted(&call.func, "range") {
        return false;
    }
    let args = &call.arguments.args;
    let bound = |e: &Expr| crate::semantic::facts::int_value(e, &checker.facts.constants);
    match args.as_ref() {
        [stop] => bound(stop).is_some_and(|n| n <= FEW),
        [start, stop, ..] => match (bound(start), bound(stop)) {
            (Some(a), Some(b)) => b.saturating_sub(a) <= FEW,
            _ => false,
        },
        _ => false,
    }
}

/// The keys that are both an input and an output of a module call (`out, h = rnn(x, h)`), or an
/// input the loop rebuilds from the outputs (`state = (h, c)` after `out, (h, c) = lstm(x,
/// state)`).
fn carried_keys(
    checker: &Checker,
    target: &Expr,
    outputs: &[String],
    call: &ExprCall,
) -> Option<Vec<String>> {
    if outputs.is_empty() {
        return None;
    }
    let mut inputs = Vec::new();
    for a in call
        .arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
    {
        target_keys(a, &mut inputs);
    }
    let mut carried: Vec<String> = outputs
        .iter()
        .filter(|o| inputs.contains(o))
        .cloned()
        .collect();
    if let Some(l) = checker.innermost_loop() {
        let body: &[Stmt] = match l.stmt {
            Stmt::For(f) => &f.body,
            Stmt::While(w) => &w.body,
            _ => &[],
        };
        for k in &inputs {
            if !carried.contains(k) && repacked_in(body, k, outputs) {
                carried.push(k.clone());
            }
        }
    }
    // The syntactic test first: most assignments carry nothing, and the callee's value costs more.
    (!carried.is_empty()
        && (is_module_call(checker, call) || helper_links(checker, target, call, &carried)))
    .then_some(carried)
}

/// A function of this file that takes the state and returns a new one carrying a graph it
/// made (`char, h = predict(net, char, h)` where `predict` runs `out, h = net(x, h)` and returns
/// `h`): the helper is the module call, one level down. A helper that detaches or re-creates the
/// state it is given (`h = tuple(e.data for e in h)` before its module call) links one step's
/// graph only, and one that hands the state back, or a graph it only passes through, links
/// nothing.
fn helper_links(checker: &Checker, target: &Expr, call: &ExprCall, carried: &[String]) -> bool {
    let Expr::Name(callee) = &*call.func else {
        return false;
    };
    let Some(summary) = checker.project_summary(&call.func) else {
        return false;
    };
    let Some(def) = checker.suite().iter().find_map(|s| match s {
        Stmt::FunctionDef(d) if d.name.as_str() == callee.id.as_str() => Some(d),
        _ => None,
    }) else {
        return false;
    };
    let slots: Vec<&Expr> = match target {
        Expr::Tuple(t) => t.elts.iter().collect(),
        Expr::List(l) => l.elts.iter().collect(),
        e => vec![e],
    };
    let n = slots.len();
    // A function of the module, not a method: no `self` to skip.
    let params = crate::summaries::extract::positional_params(def);
    carried.iter().all(|key| {
        let Some(i) = slots.iter().position(|s| is_dotted(s, key)) else {
            return false;
        };
        let out = if n == 1 {
            summary.clone()
        } else {
            summary.part(i, n)
        };
        // A graph that stands for a parameter's is the argument handed back.
        if !out
            .origin()
            .is_some_and(|o| o.param.is_none() && o.or_params == 0)
        {
            return false;
        }
        // The parameter the state is passed as, by position or by keyword.
        let param = call
            .arguments
            .args
            .iter()
            .position(|a| is_dotted(a, key))
            .and_then(|p| params.get(p).copied())
            .or_else(|| {
                call.arguments.keywords.iter().find_map(|k| {
                    (is_dotted(&k.value, key))
                        .then(|| k.arg.as_ref().map(|a| a.as_str()))
                        .flatten()
                })
            });
        let Some(param) = param else { return false };
        // It reaches a call inside, and nothing there detaches or re-creates it.
        let mut fed = false;
        visit_block(&def.body, &mut |s| {
            if let Stmt::Assign(a) = s {
                if let Expr::Call(c) = &*a.value {
                    fed |= c
                        .arguments
                        .args
                        .iter()
                        .chain(c.arguments.keywords.iter().map(|k| &k.value))
                        .any(|x| is_dotted(x, param));
                }
            }
        });
        fed && !reset_in(checker, &def.body, param, &[])
    })
}

/// A call of an `nn.Module`, or of a callee named like a recurrent layer (`rnn`, `self.lstm`,
/// `gru_cell`, `cell`) whose kind the analysis does not know (a parameter, say).
fn is_module_call(checker: &Checker, call: &ExprCall) -> bool {
    let v = checker.value(&call.func);
    if v.kind == Kind::Module {
        return true;
    }
    if v.kind != Kind::Unknown {
        return false;
    }
    let Some(name) = dotted(&call.func) else {
        return false;
    };
    let last = last_segment(&name).to_ascii_lowercase();
    last.contains("rnn") || last.contains("lstm") || last.contains("gru") || last.ends_with("cell")
}

/// Names and attribute chains of a target or argument, looking into tuples and lists.
fn target_keys(expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Tuple(t) => t.elts.iter().for_each(|e| target_keys(e, out)),
        Expr::List(l) => l.elts.iter().for_each(|e| target_keys(e, out)),
        Expr::Starred(s) => target_keys(&s.value, out),
        e => {
            if let Some(d) = dotted(e) {
                out.push(d);
            }
        }
    }
}

fn self_attr_of(key: &str) -> Option<&str> {
    key.strip_prefix("self.").filter(|a| !a.contains('.'))
}

/// Does `body` bind `key` to the outputs of the carrying call only (`state = (h, c)`)?
fn repacked_in(body: &[Stmt], key: &str, outputs: &[String]) -> bool {
    let mut found = false;
    visit_block(body, &mut |stmt| {
        if let Stmt::Assign(a) = stmt {
            if a.targets.iter().any(|t| is_dotted(t, key)) && repacks(&a.value, outputs) {
                found = true;
            }
        }
    });
    found
}

/// A name, tuple or list made of the carrying call's outputs only.
fn repacks(value: &Expr, outputs: &[String]) -> bool {
    let mut keys = Vec::new();
    target_keys(value, &mut keys);
    matches!(value, Expr::Tuple(_) | Expr::List(_) | Expr::Name(_))
        && !keys.is_empty()
        && keys.iter().all(|k| outputs.contains(k))
}

/// Is one of the outputs packed in `value` detached or re-created in `body` (`h, c =
/// h.detach(), c.detach()` before `state = (h, c)`)? The call that carries them does not count.
fn packs_reset(checker: &Checker, body: &[Stmt], value: &Expr) -> bool {
    let mut packed = Vec::new();
    target_keys(value, &mut packed);
    let mut reset = false;
    visit_block(body, &mut |stmt| match stmt {
        Stmt::Assign(a) => {
            let mut keys = Vec::new();
            for t in &a.targets {
                target_keys(t, &mut keys);
            }
            let carry = matches!(&*a.value, Expr::Call(c) if is_module_call(checker, c));
            if !carry && !repacks(&a.value, &packed) && keys.iter().any(|k| packed.contains(k)) {
                reset = true;
            }
        }
        Stmt::Expr(e) if packed.iter().any(|k| resets_by_call(checker, &e.value, k)) => {
            reset = true;
        }
        _ => {}
    });
    reset
}

/// Is `key` detached, re-created or handed to a helper anywhere in `body`, other than by the
/// module calls that carry it (or by packing their outputs, `outputs`, back into it)?
fn reset_in(checker: &Checker, body: &[Stmt], key: &str, outputs: &[String]) -> bool {
    let mut reset = false;
    visit_block(body, &mut |stmt| {
        if reset {
            return;
        }
        reset = match stmt {
            Stmt::Assign(a) => {
                let mut keys = Vec::new();
                for t in &a.targets {
                    target_keys(t, &mut keys);
                }
                keys.iter().any(|k| k == key)
                    && !a
                        .targets
                        .iter()
                        .any(|t| is_carry(checker, t, &a.value, key))
                    && (!repacks(&a.value, outputs) || packs_reset(checker, body, &a.value))
            }
            Stmt::AnnAssign(a) => {
                is_dotted(&a.target, key)
                    && a.value
                        .as_deref()
                        .is_some_and(|v| !is_carry(checker, &a.target, v, key))
            }
            Stmt::For(f) => {
                let mut keys = Vec::new();
                target_keys(&f.target, &mut keys);
                keys.iter().any(|k| k == key)
            }
            Stmt::With(w) => w.items.iter().any(|i| {
                let mut keys = Vec::new();
                if let Some(v) = &i.optional_vars {
                    target_keys(v, &mut keys);
                }
                keys.iter().any(|k| k == key)
            }),
            Stmt::Delete(d) => d.targets.iter().any(|t| is_dotted(t, key)),
            Stmt::Expr(e) => resets_by_call(checker, &e.value, key),
            _ => false,
        };
    });
    reset
}

/// `h = rnn(x, h)` (and tuple forms): the assignment that carries the state.
fn is_carry(checker: &Checker, target: &Expr, value: &Expr, key: &str) -> bool {
    let Expr::Call(call) = value else {
        return false;
    };
    if !is_module_call(checker, call) && !helper_links(checker, target, call, &[key.to_string()]) {
        return false;
    }
    let mut inputs = Vec::new();
    for a in call
        .arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
    {
        target_keys(a, &mut inputs);
    }
    inputs.iter().any(|k| k == key)
}

/// `h.detach_()`, `h[0].detach_()`, `repackage_(h)` (a helper of this file given the state),
/// `self.reset_hidden()` (a method that rebinds the attribute).
fn resets_by_call(checker: &Checker, expr: &Expr, key: &str) -> bool {
    let Expr::Call(call) = expr else {
        return false;
    };
    let mentions = |e: &Expr| {
        let mut cur = e;
        loop {
            if is_dotted(cur, key) {
                return true;
            }
            match cur {
                Expr::Subscript(s) => cur = &s.value,
                _ => return false,
            }
        }
    };
    match &*call.func {
        Expr::Attribute(a) if a.attr.as_str() == "detach_" => mentions(&a.value),
        Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
            self_attr_of(key).is_some_and(|attr| {
                checker.attr_facts(attr).is_some_and(|p| {
                    p.changes
                        .iter()
                        .any(|c| c.function == a.attr.as_str() && c.mutation != Mutation::Grow)
                })
            })
        }
        Expr::Name(n) => {
            checker.facts.functions.contains(n.id.as_str())
                && call.arguments.args.iter().any(mentions)
        }
        _ => false,
    }
}

/// Does another method (not `__init__`, not the current one) rebind or detach `self.<attr>`?
fn reset_elsewhere(checker: &Checker, attr: &str, current: &str) -> bool {
    checker.attr_facts(attr).is_some_and(|p| {
        p.changes.iter().any(|c| {
            c.mutation != Mutation::Grow && c.function != "__init__" && c.function != current
        })
    })
}
