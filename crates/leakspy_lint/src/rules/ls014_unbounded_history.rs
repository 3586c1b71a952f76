//! ## What it does
//! Flags a history kept on an object that grows on every step and that nothing ever bounds:
//! `self.<list>.append(...)` (or `.extend`, `.insert`, `+= [...]`, an unbounded `deque`), or
//! `self.<dict>[step] = ...` keyed by a step counter, in a per-step method (`step`, `update`,
//! `training_step`, `on_train_batch_end`...) or in a step loop, when no method of the class
//! clears, truncates or rebinds it. What is kept must be more than a number (an array, a tensor,
//! an object): a history of floats costs bytes per step. Also flags a history whose only trimming
//! is weaker than its growth: a `pop(0)` in another, less frequent method, or in the same method
//! outside the loop that appends (one per episode against one append per step). Also flags a list
//! or dict in a module global or in a closure cell of a returned function (a logger made by a
//! factory) that grows on every step and that nothing in the file clears (the factory, the
//! closure itself or a sibling closure), made by a factory that does not itself run once per
//! step (each step's closures would get cells of their own); a global the script writes out
//! once, outside any loop (`torch.save(feats, path)` after the loop), is its result, not a
//! leak. Also flags a local list of a function that runs once, bound before its training loop
//! (one that backpropagates or steps an optimizer) and grown on every step, that the function
//! never reads (`all_infos.append(infos)`): it keeps the whole run's entries for nothing; a
//! loop that only runs a model (an evaluation, a test episode) ends with its data. Reported
//! once per attribute, at its first growth site.
//!
//! ## Why is this bad?
//! The object lives for the whole run (an agent, an environment, a trainer), so the list keeps
//! every entry it was ever given: memory grows linearly with steps and never comes back. In one
//! of our users' runs an environment's `episode_rewards` and `episode_actions` grew on every
//! `step()` and were never cleared: 16 agents over 13 generations kept about 20 GB of them, and
//! the job died at 175 GB. A history of tensors that carry a graph is far worse (see LS002).
//!
//! ## Example
//! ```python
//! class TradingEnv:
//!     def __init__(self, prices):
//!         self.prices = prices
//!         self.t = 0
//!         self.episode_actions = []
//!
//!     def step(self, action):
//!         self.episode_actions.append(action.copy())
//!         self.t += 1
//!         return self.prices[self.t], float(self.prices[self.t] @ action)
//!
//!
//! def run(agent, prices, steps):
//!     env = TradingEnv(prices)
//!     obs = prices[0]
//!     for step in range(steps):
//!         obs, reward = env.step(agent.act(obs))
//! ```
//!
//! ## Use instead
//! ```python
//! class TradingEnv:
//!     def __init__(self, prices):
//!         self.prices = prices
//!         self.t = 0
//!         self.episode_actions = []
//!
//!     def reset(self):
//!         self.t = 0
//!         self.episode_actions.clear()
//!         return self.prices[0]
//!
//!     def step(self, action):
//!         self.episode_actions.append(action.copy())
//!         self.t += 1
//!         return self.prices[self.t], float(self.prices[self.t] @ action)
//!
//!
//! def run(agent, prices, steps):
//!     env = TradingEnv(prices)
//!     obs = env.reset()
//!     for step in range(steps):
//!         obs, reward = env.step(agent.act(obs))
//! ```
//! or `self.loss_history = deque(maxlen=1000)` when only the recent entries are read.
//!
//! ## Fix safety
//! No fix is offered: where the history should be cleared (per episode, per epoch) or how many
//! entries to keep is the author's decision.
//!
//! ## Stays silent on
//! `deque(maxlen=...)` (also when one branch of an initialiser makes it one and another a list
//! of them); lists set by index (`ids[env_id] = n` overwrites an entry); lists cleared, truncated (`x = x[-n:]`, `del x[:-n]`) or rebound in any
//! method (`reset()`, `on_epoch_end()`); lists grown only under `if len(self.x) < capacity:` (a
//! ring buffer that overwrites once full) or after a guard that returns once a count reaches a
//! cap (`if self.n_measured >= self.max: return`, with `self.n_measured += 1` in that method); a `pop(0)` in the loop that appends or in a
//! `while len(...) > n` loop; local lists the function reads, returns or passes on (what an
//! evaluation or a feature pass collects is its result), and those of a function that runs
//! again and again, or whose loop trains nothing (a test episode); module globals that a
//! script's or notebook's loop that trains nothing fills and the code reads afterwards (an
//! evaluation pass whose predictions are concatenated for its metrics); histories of numbers
//! (`loss.item()`, rewards); objects made afresh in each epoch, evaluation or episode (a callback created per validation keeps one
//! validation's entries), in this file or in the other files that make them, and objects the
//! loop that grows them renews when a condition ends their stretch (`if done: episode[i] =
//! EpisodeBuffer()` in the loop that calls `episode[i].put(...)`); classes defined elsewhere in the project whose base may clear the list,
//! and public attributes of classes this file never instantiates (their users may clear them),
//! except a callback or module a framework drives and keeps for the run; a dataset's storage,
//! the lists its `__getitem__` serves (a dataset filled through its `add()` holds its data);
//! histories that grow once per epoch, generation or episode; a history object that another
//! class fills through its methods and hands back from the method that fills it (`return
//! self.losshistory` at the end of `train()`: the result its caller asked for, as Keras returns
//! `History`); objects that are all scratch (each
//! made as a local of a function that neither trains nor runs a training loop, used there only
//! through its methods, never handed out by them); histories grown by loops that run
//! a count written in the source, at most 1,000 times in all (`for r in range(N_ROUNDS + 1)`
//! with `N_ROUNDS = 25`: the rounds of an experiment); dicts keyed by names (bounded key sets)
//! or by the elements a loop takes from a collection (`for t in self.timesteps`: the same keys
//! every time it runs); files that do not use torch or numpy; appended values that carry an autograd graph
//! (LS002 reports those); attributes that code elsewhere in the file or in another file of the
//! project resets or drains (`agent.loss_history.clear()`, `state.activations.popleft()`: a
//! queue one module fills and another consumes).

use crate::semantic::model::FEW_ROUNDS;
use ruff_python_ast::{CmpOp, Expr, ExprCall, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextSize};

use crate::checker::{Checker, Holder};
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::semantic::facts::{self_attr, Change, PlaceFacts};
use crate::semantic::iteration::coarse_name;
use crate::semantic::iteration::{Grain, LoopRole, Training};
use crate::semantic::lifetime::reset_from_outside;
use crate::semantic::located::child_blocks;
use crate::semantic::mutation::Mutation;
use crate::semantic::names::{dotted, is_dotted, last_segment};
use crate::semantic::scan::{keys_in, GROW_METHODS};
use crate::semantic::value::Kind;

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    if !GROW_METHODS.contains(&attr.attr.as_str()) {
        return;
    }
    let Some(name) = self_attr(&attr.value) else {
        let values: Vec<&Expr> = call.arguments.args.iter().collect();
        if values.iter().any(|v| checker.value(v).has_graph())
            || !values.iter().any(|v| heavy(checker, v))
        {
            return;
        }
        free_history(checker, &attr.value, call.range(), false);
        return;
    };
    let values: Vec<&Expr> = if attr.attr.as_str() == "insert" {
        call.arguments.args.iter().skip(1).collect()
    } else {
        call.arguments.args.iter().collect()
    };
    if values.iter().any(|v| checker.value(v).has_graph())
        || !values.iter().any(|v| heavy(checker, v))
    {
        return;
    }
    check(checker, name, call.start(), call.range(), false);
}

/// What is kept is more than a number: anything but a number, a 0-d tensor (a detached loss),
/// a string or a tuple of them. A history of floats (`loss.item()`) costs bytes per step, not
/// the memory of a leak.
fn heavy(checker: &Checker, expr: &Expr) -> bool {
    match expr {
        Expr::Tuple(t) => t.elts.iter().any(|e| heavy(checker, e)),
        e => {
            let v = checker.value(e);
            v.kind != Kind::Plain && !v.scalar
        }
    }
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    match stmt {
        Stmt::Assign(a) => {
            for t in &a.targets {
                let Expr::Subscript(sub) = t else { continue };
                let Some(name) = self_attr(&sub.value) else {
                    if !checker.value(&a.value).has_graph()
                        && checker.key_changes_per_iteration(&sub.slice)
                        && heavy(checker, &a.value)
                    {
                        free_history(checker, &sub.value, stmt.range(), true);
                    }
                    continue;
                };
                let around: Vec<&Stmt> = checker.scope().loops.iter().map(|l| l.stmt).collect();
                if checker.value(&a.value).has_graph()
                    || !step_key(&sub.slice, &around)
                    || !heavy(checker, &a.value)
                {
                    continue;
                }
                check(checker, name, sub.start(), stmt.range(), true);
            }
        }
        Stmt::AugAssign(a) if matches!(&*a.value, Expr::List(_) | Expr::ListComp(_)) => {
            let Some(name) = self_attr(&a.target) else {
                return;
            };
            if checker.value(&a.value).has_graph() || !heavy(checker, &a.value) {
                return;
            }
            check(checker, name, a.start(), stmt.range(), false);
        }
        _ => {}
    }
}

/// A key that changes every step: a step counter, `len(self.x)`, `time.time()`. A name that a
/// `for` statement of `around` takes from a collection is one of its elements, whatever it is
/// called (`for t in self.timesteps`): its values come again each time the loop runs.
fn step_key(slice: &Expr, around: &[&Stmt]) -> bool {
    if let Expr::Call(c) = slice {
        if let Some(f) = crate::semantic::names::dotted(&c.func) {
            if matches!(f.as_str(), "len" | "time.time" | "time.perf_counter") {
                return true;
            }
        }
    }
    keys_in(slice).iter().any(|k| {
        (coarse_name(last_segment(k)) == Some(false) || matches!(last_segment(k), "t"))
            && !around.iter().any(|s| takes_element(s, k))
    })
}

/// Does the `for` statement bind `name` to an element of what it goes through, rather than to a
/// count (`range`, `itertools.count`, the index of `enumerate`)?
fn takes_element(stmt: &Stmt, name: &str) -> bool {
    let Stmt::For(f) = stmt else { return false };
    element_of(&f.target, &f.iter, name)
}

fn element_of(target: &Expr, iter: &Expr, name: &str) -> bool {
    if let Expr::Call(c) = iter {
        let func = dotted(&c.func).unwrap_or_default();
        let first = c.arguments.args.first();
        match last_segment(&func) {
            "range" | "trange" | "count" => return false,
            // What a progress bar or a copy goes through.
            "tqdm" | "iter" | "list" | "sorted" | "reversed" => {
                if let Some(inner) = first {
                    return element_of(target, inner, name);
                }
            }
            "enumerate" => {
                if let (Expr::Tuple(t), Some(inner)) = (target, first) {
                    return t.elts.get(1).is_some_and(|e| element_of(e, inner, name));
                }
                return false;
            }
            _ => {}
        }
    }
    match target {
        Expr::Name(n) => n.id.as_str() == name,
        Expr::Tuple(t) => t.elts.iter().any(|e| element_of(e, iter, name)),
        _ => false,
    }
}

fn check(
    checker: &mut Checker,
    name: &str,
    offset: TextSize,
    range: ruff_text_size::TextRange,
    dict: bool,
) {
    if !(checker.facts.uses_torch || checker.facts.imports.has_alias_for("numpy")) {
        return;
    }
    if checker.runs_fixed_times(FEW_ROUNDS) {
        return;
    }
    let (Some(class), Some(place)) = (checker.class(), checker.attr_facts(name)) else {
        return;
    };
    // A base class defined elsewhere may clear it; code that runs once (or only with a
    // debugging option on) keeps nothing per step.
    if checker.class_facts().is_some_and(|c| !c.bases_seen) || checker.iteration().is_none() {
        return;
    }
    // An object made afresh each epoch (or evaluation, or episode) keeps one epoch's entries.
    if checker.training().made_per_iteration(class.name.as_str()) {
        return;
    }
    // Every object is scratch: a local of one call of a function that drives no training (a
    // metric made in `compute()` and stepped over one batch's items).
    if checker.only_scratch_objects(class.name.as_str()) {
        return;
    }
    // The history is what training hands back to its caller (a loss curve), kept on purpose.
    if returned_by_filler(checker, class.name.as_str()) {
        return;
    }
    // What a dataset's `__getitem__` reads is its storage: a dataset that `add()` fills holds
    // its data, bounded by the data, not a history of steps.
    if is_dataset(checker, class) && place.read_in.contains("__getitem__") {
        return;
    }
    let kind_ok = if dict {
        place.init == Kind::Dict
    } else {
        matches!(place.init, Kind::List | Kind::Deque { bounded: false })
    };
    if !kind_ok || place.is_bounded() {
        return;
    }
    // Report once per attribute, at its first growth site that runs every step.
    let source = checker.source;
    let training = checker.training();
    let first = place
        .changes
        .iter()
        .filter(|c| c.mutation == Mutation::Grow && !below_a_length(class, name, c))
        .filter_map(|c| site(training, source, class, name, c).map(|s| (c, s)))
        .min_by_key(|(c, _)| c.offset);
    let Some((first, site)) = first else {
        return;
    };
    if first.offset != offset {
        return;
    }
    let weak = match trims(training, source, class, name, place, first) {
        Bound::Bounded => return,
        Bound::Never => None,
        Bound::Weak(c) => Some(c),
    };
    // Code that holds the object may drain it: this file (`state.buffer.popleft()`), or
    // another file of the project (a queue one module fills and another consumes).
    if weak.is_none()
        && (reset_from_outside(source, name)
            || checker.external.reset_elsewhere.contains(name)
            || !checker.owner_visible(class.name.as_str(), name))
    {
        return;
    }
    let key = format!("self.{name}");
    let when = match site.loop_line {
        Some(offset) => format!(
            "on every iteration of the loop at line {} in `{}()`",
            checker.line(offset),
            first.function
        ),
        None => format!("on every call of `{}()`", first.function),
    };
    let bound = if dict {
        "or keep only the recent keys"
    } else {
        "or make it a `deque(maxlen=...)`"
    };
    let message = match weak {
        None => format!(
            "`{key}` grows {when} and nothing in `{}` clears, truncates or bounds it: it keeps \
             every entry for the life of the object; clear it when the episode or epoch ends, \
             {bound}",
            class.name.as_str()
        ),
        Some(trim) => format!(
            "`{key}` grows {when}, but only `{}` in `{}()` (line {}) trims it, one entry {}: \
             it still grows without bound; truncate it where it grows, or make it a \
             `deque(maxlen=...)`",
            checker.snippet(trim_range(source, trim.offset)),
            trim.function,
            checker.line(trim.offset),
            if trim.function == first.function {
                "at a time, outside the loop that grows it"
            } else {
                "per call"
            }
        ),
    };
    checker.report(Diagnostic::new(Rule::LS014, message, range));
}

/// Does another class of the file keep an object of `class`, fill it through its own methods
/// and hand it back from the method that does (`Model.train()` runs the loop whose `_test()`
/// calls `self.losshistory.append(...)`, then `return self.losshistory, self.train_state`)?
/// Then the history is the result the caller asked for, as Keras returns its `History`.
fn returned_by_filler(checker: &Checker, class: &str) -> bool {
    checker.semantic().suite().iter().any(|s| {
        let Stmt::ClassDef(k) = s else { return false };
        let Some(facts) = checker.facts.class(k.name.as_str()) else {
            return false;
        };
        let held: Vec<String> = facts
            .attrs
            .iter()
            .filter(|(_, p)| p.class.as_deref() == Some(class))
            .map(|(n, _)| format!("self.{n}"))
            .collect();
        if held.is_empty() {
            return false;
        }
        let methods: Vec<&ruff_python_ast::StmtFunctionDef> = k
            .body
            .iter()
            .filter_map(|item| match item {
                Stmt::FunctionDef(f) => Some(f),
                _ => None,
            })
            .collect();
        methods.iter().any(|m| {
            let returned = crate::semantic::scan::returned_keys(&m.body);
            held.iter()
                .any(|h| returned.contains(h) && fills(&methods, m, h))
        })
    })
}

/// Does `start`, or a method of its class it calls (however deep), call a method of `held`
/// (`self.losshistory.append(...)`)?
fn fills(
    methods: &[&ruff_python_ast::StmtFunctionDef],
    start: &ruff_python_ast::StmtFunctionDef,
    held: &str,
) -> bool {
    let mut seen: Vec<&str> = vec![start.name.as_str()];
    let mut work = vec![start];
    while let Some(m) = work.pop() {
        let keys = crate::semantic::scan::called_keys(&m.body);
        if keys
            .iter()
            .any(|k| k.strip_prefix(held).is_some_and(|r| r.starts_with('.')))
        {
            return true;
        }
        for k in &keys {
            let Some(name) = k.strip_prefix("self.").filter(|n| !n.contains('.')) else {
                continue;
            };
            if let Some(next) = methods.iter().find(|f| f.name.as_str() == name) {
                if !seen.contains(&next.name.as_str()) {
                    seen.push(next.name.as_str());
                    work.push(next);
                }
            }
        }
    }
    false
}

/// A history kept by a module global or a closure cell (a logger's dict, a feature cache): it
/// grows once per step and nothing in the file clears it. `by_key`: grown by `c[k] = v`, which
/// grows a dict but only overwrites an entry of a list.
fn free_history(
    checker: &mut Checker,
    container: &Expr,
    range: ruff_text_size::TextRange,
    by_key: bool,
) {
    if !(checker.facts.uses_torch || checker.facts.imports.has_alias_for("numpy")) {
        return;
    }
    if checker.runs_fixed_times(FEW_ROUNDS) {
        return;
    }
    if checker.iteration().map(|it| it.grain()) != Some(Grain::Step) {
        return;
    }
    let Some(lifetime) = checker.lifetime(container) else {
        return;
    };
    let key = &lifetime.key;
    let kind = checker.value(container).kind;
    let grows = match kind {
        Kind::Dict => true,
        Kind::List | Kind::Deque { bounded: false } => !by_key,
        _ => false,
    };
    if !grows {
        return;
    }
    let reset = match lifetime.holder {
        // Module-level code gets a function's exemptions: what a script's or notebook's loop
        // that trains nothing collects and reads afterwards (an evaluation pass over the test
        // set, concatenated for its metrics) is its result, as a run-long local's is below.
        Holder::Global => {
            checker
                .facts
                .globals
                .get(key.as_str())
                .is_none_or(|g| g.changes.iter().any(|c| c.mutation != Mutation::Grow))
                || written_out_once(checker.semantic().suite(), key)
                || checker.innermost_loop().is_some_and(|l| !l.trains)
                    && !crate::semantic::scan::only_grown(checker.semantic().suite(), key, &|_| {
                        false
                    })
        }
        // A cell outlives the call that made it only through a function that is returned (a
        // logger made by a factory); a reset in the factory bounds it, and so does a
        // registration of that function as a hook that ends with the owner's call.
        Holder::Closure => {
            !checker.returned_by_enclosing_function()
                || checker.closure_reset(key)
                || checker.hook_cell_scoped(key)
        }
        // A local of a function that runs once, bound before its training loop, kept until it
        // returns and never read there: it keeps the whole run's entries for nothing. (One the
        // function reads, returns or passes on is what it collects: its result. A loop that
        // only runs a model, an evaluation or a test episode, ends with its data.)
        Holder::OuterLocal => {
            !matches!(
                lifetime.until,
                crate::semantic::lifetime::Until::Return { .. }
            ) || checker.cadence().grain().is_some()
                || !checker.innermost_loop().is_some_and(|l| l.trains)
                || checker
                    .function()
                    .is_none_or(|f| !crate::semantic::scan::only_grown(&f.body, key, &|_| false))
        }
        _ => return,
    };
    if reset || reset_from_outside(checker.source, key) {
        return;
    }
    let holder = match lifetime.holder {
        Holder::Global => "a module global",
        Holder::OuterLocal => "a local of the whole run",
        _ => "a closure variable",
    };
    let when = match checker.innermost_loop() {
        Some(l) => format!(
            "on every iteration of the loop at line {}",
            checker.line(l.offset)
        ),
        None => format!(
            "on every call of `{}()`",
            checker.function().map_or("?", |f| f.name.as_str())
        ),
    };
    let message = format!(
        "`{key}` ({holder}) grows {when} and nothing in this file clears, truncates or bounds \
         it: it keeps every entry {}; clear it when the episode or epoch ends, or keep only the \
         recent entries",
        crate::rules::helpers::until(checker, &lifetime),
    );
    checker.report(Diagnostic::new(Rule::LS014, message, range));
}

/// Does the script write the global out once, outside any loop (`torch.save(feats, path)`,
/// `pickle.dump(feats, f)`, `np.save(path, feats)` at module level, after the loop that fills
/// it)? Then what it collects is the script's result, as a returned history is a method's.
fn written_out_once(suite: &[Stmt], key: &str) -> bool {
    const WRITERS: &[&str] = &["save", "savez", "savez_compressed", "dump", "save_file"];
    suite.iter().any(|stmt| match stmt {
        Stmt::Expr(e) => {
            let Expr::Call(call) = &*e.value else {
                return false;
            };
            let writes = match &*call.func {
                Expr::Attribute(a) => WRITERS.contains(&a.attr.as_str()),
                _ => false,
            };
            writes && call.arguments.args.iter().any(|a| is_dotted(a, key))
        }
        Stmt::With(w) => written_out_once(&w.body, key),
        Stmt::If(i) => {
            written_out_once(&i.body, key)
                || i.elif_else_clauses
                    .iter()
                    .any(|c| written_out_once(&c.body, key))
        }
        Stmt::Try(t) => written_out_once(&t.body, key) || written_out_once(&t.finalbody, key),
        _ => false,
    })
}

struct Site {
    /// The hot loop the growth is in, if any.
    loop_line: Option<TextSize>,
}

/// Is this growth one that runs every step (and is of a kind this rule tracks)?
fn site(
    training: &Training,
    source: &str,
    class: &StmtClassDef,
    name: &str,
    change: &Change,
) -> Option<Site> {
    let method = method_def(class, &change.function, change.offset)?;
    let m = method.name.as_str();
    if m == "__init__"
        || m == "reset"
        || m == "setup"
        || m.starts_with("_init")
        || m.starts_with("init")
    {
        return None;
    }
    let path = path_at(&method.body, change.offset);
    // The kind of growth: a list method, `+= [...]`, or a dict store keyed by a step counter.
    let rest = &source[usize::from(change.offset)..];
    let prefix = format!("self.{name}");
    let after = rest.strip_prefix(prefix.as_str())?.trim_start();
    if let Some(method_call) = after.strip_prefix('.') {
        let called = method_call.split('(').next().unwrap_or("").trim();
        if !GROW_METHODS.contains(&called) {
            return None;
        }
    } else if after.starts_with('[') {
        let stmt = path.last()?;
        let Stmt::Assign(a) = stmt else { return None };
        let key_ok = a.targets.iter().any(
            |t| matches!(t, Expr::Subscript(s) if s.start() == change.offset && step_key(&s.slice, &path)),
        );
        if !key_ok {
            return None;
        }
    } else if !after.starts_with("+=") {
        return None;
    }
    let innermost_loop = path
        .iter()
        .rev()
        .find(|s| matches!(s, Stmt::For(_) | Stmt::While(_)));
    // Every step: in a step loop (a training loop that is not an epoch or episode loop), or
    // in a method that runs once per step.
    match innermost_loop {
        Some(lp) => (training.loop_role(lp) == LoopRole::Training(Grain::Step)).then_some(Site {
            loop_line: Some(lp.start()),
        }),
        None => (training.method_grain(class.name.as_str(), m) == Some(Grain::Step))
            .then_some(Site { loop_line: None }),
    }
}

enum Bound<'p> {
    Bounded,
    Never,
    /// Only single-element trims in other, less frequent methods.
    Weak(&'p Change),
}

fn trims<'p>(
    training: &Training,
    source: &str,
    class: &StmtClassDef,
    name: &str,
    place: &'p PlaceFacts,
    growth: &Change,
) -> Bound<'p> {
    let mut weak = None;
    for reset in place.resets() {
        if reset.mutation != Mutation::Trim {
            return Bound::Bounded;
        }
        if !single_element_trim(source, name, reset.offset) {
            return Bound::Bounded;
        }
        if reset.function == growth.function {
            // In the growth's method: it keeps up when it runs in the growth's loop (or with
            // no loop around the growth), or drains in a `while` loop of its own; one trim per
            // iteration of an outer loop (per episode) does not.
            if same_method_trim_keeps_up(class, growth, reset) {
                return Bound::Bounded;
            }
            weak.get_or_insert(reset);
            continue;
        }
        // `while len(self.x) > n: self.x.pop(0)` bounds it wherever it runs.
        if let Some(method) = method_def(class, &reset.function, reset.offset) {
            if path_at(&method.body, reset.offset)
                .iter()
                .any(|s| matches!(s, Stmt::While(_) | Stmt::For(_)))
            {
                return Bound::Bounded;
            }
        }
        // A trim that runs as often as the growth keeps up with it.
        if training.method_grain(class.name.as_str(), &reset.function) == Some(Grain::Step)
            && !growth_in_loop(class, growth)
        {
            return Bound::Bounded;
        }
        weak.get_or_insert(reset);
    }
    match weak {
        Some(c) => Bound::Weak(c),
        None => Bound::Never,
    }
}

fn same_method_trim_keeps_up(class: &StmtClassDef, growth: &Change, trim: &Change) -> bool {
    let Some(method) = method_def(class, &growth.function, growth.offset) else {
        return true;
    };
    let is_loop = |s: &&&Stmt| matches!(s, Stmt::For(_) | Stmt::While(_));
    let growth_path = path_at(&method.body, growth.offset);
    let Some(growth_loop) = growth_path.iter().rev().find(is_loop) else {
        return true;
    };
    if growth_loop.range().contains(trim.offset) {
        return true;
    }
    path_at(&method.body, trim.offset)
        .iter()
        .any(|s| matches!(s, Stmt::While(_)) && !s.range().contains(growth.offset))
}

fn growth_in_loop(class: &StmtClassDef, growth: &Change) -> bool {
    method_def(class, &growth.function, growth.offset).is_some_and(|m| {
        path_at(&m.body, growth.offset)
            .iter()
            .any(|s| matches!(s, Stmt::For(_) | Stmt::While(_)))
    })
}

/// `self.x.pop(0)`, `self.x.popleft()`, `self.x.remove(v)`, `del self.x[0]`: one entry at a time.
fn single_element_trim(source: &str, name: &str, offset: TextSize) -> bool {
    let rest = &source[usize::from(offset)..];
    let line = rest.lines().next().unwrap_or("");
    if let Some(del) = line.strip_prefix("del ") {
        let inner = del.split_once('[').map_or("", |(_, r)| r);
        let inner = inner.split(']').next().unwrap_or("");
        return !inner.contains(':');
    }
    let prefix = format!("self.{name}.");
    line.starts_with(prefix.as_str())
}

fn trim_range(source: &str, offset: TextSize) -> ruff_text_size::TextRange {
    let rest = &source[usize::from(offset)..];
    let line = rest.lines().next().unwrap_or("");
    let len = line.split('#').next().unwrap_or(line).trim_end().len();
    ruff_text_size::TextRange::at(offset, TextSize::try_from(len).unwrap_or_default())
}

/// Is the class a dataset: does a base's qualified name end in `Dataset` (`torch.utils.data.
/// Dataset`, `datasets.Dataset`, a dataset class of the file)?
fn is_dataset(checker: &Checker, class: &StmtClassDef) -> bool {
    class
        .arguments
        .iter()
        .flat_map(|a| a.args.iter())
        .filter_map(|b| checker.facts.imports.qualify(b))
        .any(|q| last_segment(&q).ends_with("Dataset"))
}

fn method_def<'c>(
    class: &'c StmtClassDef,
    name: &str,
    offset: TextSize,
) -> Option<&'c StmtFunctionDef> {
    class.body.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == name && f.range().contains(offset) => Some(f),
        _ => None,
    })
}

/// Is the growth made only while a count is below a bound: the list's own length or a counter
/// the same method steps (`self.n_measured += 1`)? Either in the body of an `if len(self.x) < n:`
/// (or `<=`, or `n > ...`), as a ring buffer fills before it overwrites (`else: self.x[self.pos]
/// = item`), or after a guard that returns once the count reaches it (`if self.n >= self.max:
/// return`, also as one operand of `and`/`or`). It then keeps at most `n` entries: a cap the
/// author wrote, even where its limit is an option.
fn below_a_length(class: &StmtClassDef, name: &str, growth: &Change) -> bool {
    let Some(method) = method_def(class, &growth.function, growth.offset) else {
        return false;
    };
    let stepped = stepped_counters(&method.body);
    let is_count = |e: &Expr| match e {
        Expr::Call(call) => {
            matches!(&*call.func, Expr::Name(n) if n.id.as_str() == "len")
                && call.arguments.args.len() == 1
                && dotted(&call.arguments.args[0])
                    .is_some_and(|d| d.strip_prefix("self.") == Some(name))
        }
        _ => dotted(e).is_some_and(|d| stepped.contains(&d)),
    };
    // `count < n` when `below`, `count >= n` when not.
    let compares = |e: &Expr, below: bool| {
        let Expr::Compare(c) = e else { return false };
        let ([op], [right]) = (&*c.ops, &*c.comparators) else {
            return false;
        };
        match (op, below) {
            (CmpOp::Lt | CmpOp::LtE, true) | (CmpOp::Gt | CmpOp::GtE, false) => is_count(&c.left),
            (CmpOp::Gt | CmpOp::GtE, true) | (CmpOp::Lt | CmpOp::LtE, false) => is_count(right),
            _ => false,
        }
    };
    let path = path_at(&method.body, growth.offset);
    let inside = path.iter().any(|s| {
        let Stmt::If(i) = s else { return false };
        compares(&i.test, true) && i.body.iter().any(|b| b.range().contains(growth.offset))
    });
    let blocks = std::iter::once(method.body.as_slice()).chain(path.iter().flat_map(|s| {
        child_blocks(s)
            .into_iter()
            .filter(|b| b.iter().any(|x| x.range().contains(growth.offset)))
    }));
    let stopped = blocks.into_iter().any(|block| {
        block
            .iter()
            .take_while(|s| s.range().end() <= growth.offset)
            .any(|s| {
                let Stmt::If(i) = s else { return false };
                matches!(i.body.last(), Some(Stmt::Return(_) | Stmt::Break(_)))
                    && any_operand(&i.test, &|e| compares(e, false))
            })
    });
    inside || stopped
}

/// The `self.` counters a method body steps by one (`self.n += 1`).
fn stepped_counters(body: &[Stmt]) -> Vec<String> {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Steps(Vec<String>);
    impl<'a> Visitor<'a> for Steps {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::AugAssign(a) = stmt {
                if a.op == ruff_python_ast::Operator::Add {
                    if let Some(d) = dotted(&a.target).filter(|d| d.starts_with("self.")) {
                        self.0.push(d);
                    }
                }
            }
            visitor::walk_stmt(self, stmt);
        }
    }
    let mut steps = Steps(Vec::new());
    steps.visit_body(body);
    steps.0
}

/// Does `pred` hold for `test` or for any operand of its `and`/`or` chains?
fn any_operand(test: &Expr, pred: &dyn Fn(&Expr) -> bool) -> bool {
    match test {
        Expr::BoolOp(b) => b.values.iter().any(|v| any_operand(v, pred)),
        _ => pred(test),
    }
}

/// The statements containing `offset`, outermost first.
fn path_at(body: &[Stmt], offset: TextSize) -> Vec<&Stmt> {
    let mut path = Vec::new();
    let mut cur = body;
    'outer: loop {
        for s in cur {
            if s.range().contains(offset) {
                path.push(s);
                for b in child_blocks(s) {
                    if b.iter().any(|x| x.range().contains(offset)) {
                        cur = b;
                        continue 'outer;
                    }
                }
                break 'outer;
            }
        }
        break;
    }
    path
}
