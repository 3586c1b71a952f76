//! Who keeps a container alive across training iterations, and until when: the second half of
//! a leak finding's claim. A container grows with training only when it is grown once per
//! iteration (`iteration.rs`) and outlives that iteration: an attribute, a module global, a
//! closure cell, or a local bound before the training loop. A local of a function that runs
//! per step dies when the call returns, and one bound inside the training loop dies with the
//! iteration: neither grows with training, whatever loop fills it.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::TextSize;
use rustc_hash::FxHashSet;

use super::facts::{self_attr, PlaceFacts};
use super::iteration::Grain;
use super::model::{Iteration, ScopeKind, SemanticModel, FEW_ROUNDS};
use super::mutation::Mutation;
use super::names::dotted;
use super::scan::keys_in;

/// Who keeps a container alive beyond one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// `self.<attr>` or `obj.<attr>`: lives as long as the object.
    Attribute,
    /// A module global: lives as long as the process.
    Global,
    /// A variable of an enclosing function, captured by a closure.
    Closure,
    /// A local bound before the training loop: lives until the function returns or an outer
    /// loop rebinds it.
    OuterLocal,
    /// A parameter filled by a training loop of this function: the caller's container.
    Param,
}

/// Until when the holder keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// A method of the class clears, trims or rebinds `self.<attr>`.
    Reset {
        mutation: Mutation,
        function: String,
        offset: TextSize,
    },
    /// Nothing in the class resets `self.<attr>` (`known`: the class's facts were found).
    LifeOfObject {
        known: bool,
    },
    /// `obj.<attr>`: for as long as `obj` lives.
    ObjectLives {
        object: String,
    },
    /// A module global.
    Process,
    /// A local or a parameter: until the function returns.
    Return {
        function: String,
    },
    /// A local bound in an outer loop: until that loop rebinds it.
    OuterLoop {
        offset: TextSize,
    },
    /// Reset in the iteration, but only under a periodic condition (at `offset`).
    Periodic {
        offset: TextSize,
    },
    Closure,
}

/// Across what the container is kept: the iterations of a training loop, or the calls of a
/// function that runs once per iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Across {
    Loop { offset: TextSize, grain: Grain },
    Calls { function: String, grain: Grain },
}

#[derive(Debug, Clone)]
pub struct Lifetime {
    pub key: String,
    pub holder: Holder,
    pub until: Until,
    pub across: Across,
}

impl SemanticModel<'_> {
    /// Who keeps the container `expr` alive across training iterations, if anyone: `None` when
    /// the statement does not run once per iteration, or the container is made afresh within
    /// the iteration (rebound in it, a local of a per-step call, a local of the training loop's
    /// body).
    pub fn lifetime(&self, expr: &Expr) -> Option<Lifetime> {
        self.lifetime_in(expr, false)
    }

    /// `lifetime`, where `periodic_ok` also takes a container that the iteration resets only
    /// under a periodic condition (`if step % 100 == 0: total = 0`): it is kept until that
    /// reset, across as many iterations as the period.
    fn lifetime_in(&self, expr: &Expr, periodic_ok: bool) -> Option<Lifetime> {
        let expr = match expr {
            Expr::Subscript(s) => &*s.value,
            e => e,
        };
        let key = dotted(expr)?;
        let it = self.iteration()?;
        let scope = self.scope();
        let rebinds = |k: &str| {
            self.iteration_facts(it).rebinds(k)
                || scope.loops.last().is_some_and(|l| l.facts.rebinds(k))
        };
        let mut periodic = None;
        if rebinds(&key) {
            if !periodic_ok {
                return None;
            }
            periodic = Some(self.reset_only_periodically(it, &key)?);
        }
        let across = match it {
            Iteration::Loop { depth, grain } => Across::Loop {
                offset: scope.loops[depth].offset,
                grain,
            },
            Iteration::Call { grain } => Across::Calls {
                function: self
                    .function()
                    .map_or(String::new(), |f| f.name.to_string()),
                grain,
            },
        };
        let lifetime = |holder, until| {
            Some(Lifetime {
                key: key.clone(),
                holder,
                until: periodic.map_or(until, |offset| Until::Periodic { offset }),
                across: across.clone(),
            })
        };
        if let Some(attr) = self_attr(expr) {
            // In a hook or helper defined inside a method, `self` is that method's.
            let class = self.class().or_else(|| self.closure_class());
            let place = class
                .and_then(|c| self.facts.class(c.name.as_str()))
                .and_then(|c| c.attrs.get(attr));
            let class = class.map(|c| c.name.as_str());
            let until = self.attr_until(class, attr, place, it)?;
            return lifetime(Holder::Attribute, until);
        }
        let head = key.split('.').next().unwrap_or(&key).to_string();
        if let Expr::Attribute(a) = expr {
            // `obj.attr`: long-lived unless `obj` itself is made in this iteration, and only
            // when the analysis sees `obj`'s class (what resets the attribute is there).
            if rebinds(&head) || self.made_in_iteration(&head, it) {
                return None;
            }
            let class = self.class_of(&a.value)?;
            let place = self
                .facts
                .class(&class)
                .and_then(|c| c.attrs.get(a.attr.as_str()));
            let until = match self.attr_until(Some(&class), a.attr.as_str(), place, it)? {
                Until::LifeOfObject { .. } => Until::ObjectLives { object: head },
                u => u,
            };
            return lifetime(Holder::Attribute, until);
        }
        let ScopeKind::Function { def, .. } = &scope.kind else {
            // Module-level code (a script, a notebook) is a function's body run once: a name
            // bound inside the training loop dies with the iteration, and one an outer loop
            // binds afresh (a list per epoch) lives until that loop rebinds it.
            if let (Some(&bound), Iteration::Loop { depth, .. }) = (scope.bound_depth.get(&key), it)
            {
                if bound > depth && periodic.is_none() {
                    return None;
                }
                if let Some(outer) = scope.loops[..depth]
                    .iter()
                    .rev()
                    .find(|l| l.facts.rebinds(&key))
                {
                    return lifetime(
                        Holder::OuterLocal,
                        Until::OuterLoop {
                            offset: outer.offset,
                        },
                    );
                }
            }
            return lifetime(Holder::Global, Until::Process);
        };
        if scope.declared_global.contains(&key) {
            return lifetime(Holder::Global, Until::Process);
        }
        let function = def.name.to_string();
        if let Some(&bound) = scope.bound_depth.get(&key) {
            let Iteration::Loop { depth, .. } = it else {
                // A local of a call that runs per iteration dies when it returns.
                return None;
            };
            if bound > depth && periodic.is_none() {
                return None;
            }
            let until = match scope.loops[..depth]
                .iter()
                .rev()
                .find(|l| l.facts.rebinds(&key))
            {
                Some(outer) => Until::OuterLoop {
                    offset: outer.offset,
                },
                None => Until::Return { function },
            };
            return lifetime(Holder::OuterLocal, until);
        }
        if scope.params.contains(&key) {
            // The caller's container, filled across the iterations of a loop of this function.
            if !matches!(it, Iteration::Loop { .. }) {
                return None;
            }
            return lifetime(Holder::Param, Until::Return { function });
        }
        // A free variable: a closure cell or a module global.
        if self.facts.globals.contains_key(&key) {
            return lifetime(Holder::Global, Until::Process);
        }
        if self.scopes.len() > 2
            && self.scopes[..self.scopes.len() - 1]
                .iter()
                .any(|s| s.env.contains_key(&key))
        {
            return lifetime(Holder::Closure, Until::Closure);
        }
        None
    }

    /// Until when an attribute keeps what it holds: `None` when a method of its class resets it
    /// at least as often as the iteration grows it (`initialize_states()` called by every
    /// `forward`).
    fn attr_until(
        &self,
        class: Option<&str>,
        attr: &str,
        place: Option<&PlaceFacts>,
        it: Iteration,
    ) -> Option<Until> {
        let class_facts = class.and_then(|c| self.facts.class(c));
        let inherited: Vec<&PlaceFacts> = class_facts
            .into_iter()
            .flat_map(|c| c.in_file_bases.iter())
            .filter_map(|b| self.facts.class(b))
            .filter_map(|b| b.attrs.get(attr))
            .collect();
        // A subclass that only grows what a base of this file makes: the base's facts tell.
        let Some(place) = place.or_else(|| inherited.first().copied()) else {
            return Some(Until::LifeOfObject { known: false });
        };
        let grain = it.grain();
        let mut first = None;
        for reset in place
            .resets()
            .chain(inherited.iter().flat_map(|p| p.resets()))
        {
            let every = class.and_then(|c| self.training().method_grain(c, &reset.function));
            if every.is_some_and(|g| g >= grain) {
                return None;
            }
            first.get_or_insert(reset);
        }
        Some(match first {
            // A public attribute of a class this file does not make, with a method that resets
            // it: an accumulate-and-reset interface (`retrieve()`, then
            // `zero_accumulated_values()`), whose owner calls the reset, as it would any other
            // code that bounds it (below).
            Some(_) if class.is_some_and(|c| !self.owner_visible(c, attr)) => return None,
            Some(reset) => Until::Reset {
                mutation: reset.mutation,
                function: reset.function.clone(),
                offset: reset.offset,
            },
            // Nothing in the class resets it. A public attribute of a class made elsewhere may
            // be reset by the code that owns the object (`classifier.log_scalings.clear()` in
            // another module): only a class this file instantiates, or a private attribute,
            // says "nothing clears it".
            None => {
                // What resets it may be in a base class this file does not define.
                if class_facts.is_some_and(|c| !c.bases_seen) {
                    return None;
                }
                // Another file of the project resets an attribute of that name on some object
                // (`meter.values.clear()`): it may be this one.
                if self.external.reset_elsewhere.contains(attr) {
                    return None;
                }
                if class.is_some_and(|c| !self.owner_visible(c, attr)) {
                    return None;
                }
                Until::LifeOfObject { known: true }
            }
        })
    }

    /// Is a graph stored into (or added to) `container` here kept across training iterations?
    /// The container's lifetime when it outlives the iteration, the iteration trains (a loop
    /// whose body backpropagates or steps an optimizer, so each iteration's graph has done its
    /// work; or a call that runs per step), nothing empties it within the iteration, no
    /// `.backward()` consumes what it holds (in the function, or in any method of the class for
    /// an attribute: a REINFORCE agent's `log_probs`). A loop that only sums or collects losses
    /// (a loss built from parts, outputs gathered for the caller) does not train per iteration.
    pub fn keeps_graphs(&self, container: &Expr) -> Option<Lifetime> {
        let mut lifetime = self.lifetime_in(container, true)?;
        let it = self.iteration()?;
        if let Iteration::Loop { depth, .. } = it {
            if !self.scope().loops[depth].trains {
                return None;
            }
        }
        let key = &lifetime.key;
        if self.consumed_by_backward(key) {
            return None;
        }
        // Graphs kept until a reset that runs every so many steps (a logging window) are kept
        // across that many iterations, as a total reset every epoch is.
        if self.reset_in_iteration(key) {
            let offset = self.reset_only_periodically(it, key)?;
            lifetime.until = Until::Periodic { offset };
        }
        let key = &lifetime.key;
        // A local made afresh by each round of an outer loop, or by each call of a function
        // that runs again and again (a PPO update), and filled by loops that run a count
        // written in the source keeps as many graphs as the author chose, and lets them go with
        // the round or the call, unless the function hands them out. (A local of a function
        // that runs once keeps them for the whole run: `range(100)` epochs are its length.)
        if lifetime.holder == Holder::OuterLocal {
            let bound = self.scope().bound_depth.get(key).copied().unwrap_or(0);
            // The loop test first: it is cheap, and rarely passes.
            let afresh = || match lifetime.until {
                Until::OuterLoop { .. } => true,
                Until::Return { .. } => self.cadence().grain().is_some() && !self.hands_out(key),
                _ => false,
            };
            if self.loops_run_fixed_times(bound, FEW_ROUNDS) && afresh() {
                return None;
            }
            // Gradient accumulation: a call that steps the optimizer once, after counted rounds
            // of micro-batches that only backpropagate, is one training step; a total it makes
            // afresh keeps that step's micro-batches, handed out or not, and the next call's
            // total replaces it. (A pass over the data before one step keeps a graph for every
            // batch of the data set: not this.)
            if matches!(lifetime.until, Until::Return { .. }) && self.accumulates_gradients(bound) {
                return None;
            }
        }
        match lifetime.holder {
            Holder::Attribute if self.backpropagated_in_class(key) => None,
            _ => Some(lifetime),
        }
    }

    /// Where the block one iteration runs resets `key`, when every reset there runs only under
    /// a periodic condition of that block (`if step % log_every == 0: total = 0`, or
    /// `losses.clear()`): the first one's offset.
    fn reset_only_periodically(&self, it: Iteration, key: &str) -> Option<TextSize> {
        let body: &[Stmt] = match self.iteration_loop(it) {
            Some(l) => match l.stmt {
                Stmt::For(f) => &f.body,
                Stmt::While(w) => &w.body,
                _ => return None,
            },
            None => match self.scope().kind {
                ScopeKind::Function { def, .. } => &def.body,
                ScopeKind::Module => return None,
            },
        };
        let mut resets = Resets::default();
        resets.scan(body, key, false);
        if resets.always {
            return None;
        }
        resets.periodic
    }

    /// Are the loops from `depth` on micro-batch rounds of one optimizer step: each `for _ in
    /// range(...)`, backpropagating without stepping, in a function that steps the optimizer?
    fn accumulates_gradients(&self, depth: usize) -> bool {
        let scope = self.scope();
        let loops = scope.loops.get(depth..).unwrap_or_default();
        scope.body_facts.steps_optimizer
            && !loops.is_empty()
            && loops.iter().all(|l| {
                l.facts.calls_backward
                    && !l.facts.steps_optimizer
                    && matches!(l.stmt, Stmt::For(f)
                        if matches!(&*f.iter, Expr::Call(c) if super::names::is_dotted(&c.func, "range")))
            })
    }

    /// Does the current function return or yield what `key` names?
    fn hands_out(&self, key: &str) -> bool {
        let Some(def) = self.function() else {
            return true;
        };
        let mut out = false;
        super::scan::visit_block(&def.body, &mut |s| {
            let value = match s {
                Stmt::Return(r) => r.value.as_deref(),
                Stmt::Expr(e) => match &*e.value {
                    Expr::Yield(y) => y.value.as_deref(),
                    Expr::YieldFrom(y) => Some(&*y.value),
                    _ => None,
                },
                _ => None,
            };
            out |= value.is_some_and(|v| keys_in(v).contains(key));
        });
        out
    }

    /// Does a method of the current class backpropagate what `self.<attr>` holds?
    pub fn backpropagated_in_class(&self, key: &str) -> bool {
        if key.strip_prefix("self.").is_none() {
            return false;
        }
        let Some(class) = self.class() else {
            return false;
        };
        class.body.iter().any(|s| match s {
            Stmt::FunctionDef(f) => self
                .cached_facts(&f.body, || super::scan::BlockFacts::scan(&f.body))
                .backward_uses
                .contains(key),
            _ => false,
        })
    }

    /// Is `key` carried from one iteration of the loop at `depth` (of the current function's
    /// loop stack) to the next: every assignment to it in the loop's body computes the new value
    /// from the old one (`h = torch.cat([h, x])`), and none starts it afresh?
    pub fn carried_by_loop(&self, depth: usize, key: &str) -> bool {
        let Some(frame) = self.scope().loops.get(depth) else {
            return false;
        };
        let body: &[Stmt] = match frame.stmt {
            Stmt::For(f) => {
                if keys_in(&f.target).contains(key) {
                    return false;
                }
                &f.body
            }
            Stmt::While(w) => &w.body,
            _ => return false,
        };
        let mut fresh = false;
        super::scan::visit_block(body, &mut |s| match s {
            Stmt::Assign(a)
                if a.targets.iter().any(|t| keys_in(t).contains(key))
                    && !keys_in(&a.value).contains(key) =>
            {
                fresh = true;
            }
            Stmt::AnnAssign(a)
                if keys_in(&a.target).contains(key)
                    && a.value
                        .as_deref()
                        .is_some_and(|v| !keys_in(v).contains(key)) =>
            {
                fresh = true;
            }
            Stmt::For(f) if keys_in(&f.target).contains(key) => fresh = true,
            Stmt::With(w)
                if w.items.iter().any(|i| {
                    i.optional_vars
                        .as_deref()
                        .is_some_and(|v| keys_in(v).contains(key))
                }) =>
            {
                fresh = true;
            }
            _ => {}
        });
        !fresh
    }

    /// Is `key` (the key of a dict store, `d[key] = v`) new on each training iteration, so that
    /// the dict grows with training? It is when it mentions the training loop's own target
    /// (`for step, batch in enumerate(loader)`), a counter the iteration increments (`step += 1`,
    /// `self.global_step += 1`), `len(...)` of what grows, the time, or an object's `id`. A key
    /// from a fixed set (a layer name, a config key, the target of a loop over a dict's keys)
    /// takes the same values again: the dict is bounded by that set.
    pub fn key_changes_per_iteration(&self, key: &Expr) -> bool {
        self.iteration()
            .is_some_and(|it| self.key_changes_in(it, key))
    }

    /// `key_changes_per_iteration` for the iteration `it`.
    pub(crate) fn key_changes_in(&self, it: Iteration, key: &Expr) -> bool {
        if changing_call(key) {
            return true;
        }
        let keys = keys_in(key);
        // A step, batch or epoch counter by name (`step`, `self.global_step`, `batch_idx`).
        if keys
            .iter()
            .any(|k| super::iteration::coarse_name(super::names::last_segment(k)).is_some())
        {
            return true;
        }
        let mut counters: FxHashSet<String> = FxHashSet::default();
        let mut collect_counters = |body: &[Stmt]| {
            super::scan::visit_block(body, &mut |s| {
                if let Stmt::AugAssign(a) = s {
                    if matches!(
                        a.op,
                        ruff_python_ast::Operator::Add | ruff_python_ast::Operator::Sub
                    ) && matches!(
                        &*a.value,
                        Expr::NumberLiteral(_) | Expr::Name(_) | Expr::Attribute(_)
                    ) {
                        if let Some(d) = dotted(&a.target) {
                            counters.insert(d);
                        }
                    }
                }
            });
        };
        match it {
            Iteration::Loop { depth, .. } => {
                let frame = &self.scope().loops[depth];
                match frame.stmt {
                    Stmt::For(f) => {
                        if keys_in(&f.target).iter().any(|t| keys.contains(t)) {
                            return true;
                        }
                        collect_counters(&f.body);
                    }
                    Stmt::While(w) => collect_counters(&w.body),
                    _ => {}
                }
            }
            Iteration::Call { .. } => {
                if let Some(def) = self.function() {
                    collect_counters(&def.body);
                }
                // `self.step += 1` in another method of the class that runs per step.
                if let Some(class) = self.class() {
                    for s in &class.body {
                        if let Stmt::FunctionDef(f) = s {
                            collect_counters(&f.body);
                        }
                    }
                }
            }
        }
        keys.iter().any(|k| counters.contains(k))
    }

    /// `container` holds an object of a class of this file (`self.memory = ReplayBuffer(...)`,
    /// `buffer = RingBuffer(...)`): such a class manages its own storage.
    pub fn holds_file_object(&self, container: &Expr) -> bool {
        if self.class_of(container).is_some() {
            return true;
        }
        let (Some(attr), Some(class)) = (self_attr(container), self.class()) else {
            return false;
        };
        let mut found = false;
        super::facts::visit_body(&class.body, &mut |stmt| {
            if let Stmt::Assign(assign) = stmt {
                if assign.targets.iter().any(|t| self_attr(t) == Some(attr)) {
                    if let Expr::Call(call) = &*assign.value {
                        if let Some(q) = self.facts.imports.qualify(&call.func) {
                            found |= self.facts.classes.contains_key(q.as_str());
                        }
                    }
                }
            }
        });
        found
    }

    /// Can this file say that nothing resets `class.attr`? Only when it creates the class's
    /// objects outside tests (their owner is here; an object a test makes lives for one test),
    /// or the attribute is private, or a framework owns the objects (a `LightningModule`): a
    /// public attribute of a class made elsewhere may be reset by the code that owns the object
    /// (`classifier.log_scalings.clear()` in another module).
    pub fn owner_visible(&self, class: &str, attr: &str) -> bool {
        attr.starts_with('_')
            || self.training().owns_instances(class)
            || self.facts.class(class).is_some_and(|c| c.framework_owned)
    }

    /// Does the current function outlive the call that made it: is it returned by the function
    /// it is defined in (a factory: `def make_logger(): metrics = {}; def log(...): ...; return
    /// log`)? A helper or hook that only runs during the enclosing call dies with it, and so do
    /// the cells it fills.
    pub fn returned_by_enclosing_function(&self) -> bool {
        let Some(def) = self.function() else {
            return false;
        };
        let name = def.name.as_str();
        let Some(ScopeKind::Function { def: outer, .. }) = self
            .scopes
            .len()
            .checked_sub(2)
            .map(|i| &self.scopes[i].kind)
        else {
            return false;
        };
        let mut returned = false;
        super::scan::visit_block(&outer.body, &mut |s| {
            if let Stmt::Return(r) = s {
                if r.value
                    .as_deref()
                    .is_some_and(|v| keys_in(v).contains(name))
                {
                    returned = true;
                }
            }
        });
        returned
    }

    /// Is the closure variable `key` cleared, trimmed or rebound in the function that made it,
    /// or in a function nested in that one? Or is it made afresh on every step, by a function
    /// that itself runs once per step (each step's closures get cells of their own)?
    pub fn closure_reset(&self, key: &str) -> bool {
        let Some(owner) = self.scopes[..self.scopes.len().saturating_sub(1)]
            .iter()
            .rev()
            .find(|s| s.env.contains_key(key))
        else {
            return false;
        };
        let mut bound = 0;
        for m in owner.body_facts.changes.get(key).into_iter().flatten() {
            match m {
                Mutation::Rebind => bound += 1,
                Mutation::Grow => {}
                _ => return true,
            }
        }
        // Made once (`metrics = {}`); a second binding starts it afresh.
        if bound > 1 {
            return true;
        }
        let ScopeKind::Function { def, .. } = owner.kind else {
            return false;
        };
        if self.training().cadence(def).grain().is_some() {
            return true;
        }
        // A function nested in the owner that clears, trims or pops the cell (the closure
        // itself, `events.clear()` before `events.append(e)`, or a sibling that drains it)
        // bounds it too. A binding there makes a local of its own (without `nonlocal`).
        let mut reset = false;
        super::facts::visit_body(&def.body, &mut |stmt| {
            if reset || !matches!(stmt, Stmt::Expr(_) | Stmt::Delete(_) | Stmt::Assign(_)) {
                return;
            }
            super::mutation::for_each_mutation(stmt, &mut |k, m, _| {
                reset |= k == key && !matches!(m, Mutation::Grow | Mutation::Rebind);
            });
        });
        reset
    }

    /// Is the local `name` bound within the current iteration (inside the training loop, or in
    /// the per-step call outside its loops)?
    fn made_in_iteration(&self, name: &str, it: Iteration) -> bool {
        let scope = self.scope();
        match (scope.bound_depth.get(name), it) {
            (Some(&bound), Iteration::Loop { depth, .. }) => bound > depth,
            (Some(_), Iteration::Call { .. }) => true,
            (None, _) => false,
        }
    }
}

/// `len(xs)`, `time.time()`, `id(obj)`, anywhere in the key: new values every time.
fn changing_call(expr: &Expr) -> bool {
    use ruff_python_ast::visitor::{walk_expr, Visitor as _};
    struct C(bool);
    impl<'a> ruff_python_ast::visitor::Visitor<'a> for C {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                if let Some(f) = dotted(&c.func) {
                    if matches!(
                        f.as_str(),
                        "len" | "id" | "time.time" | "time.perf_counter" | "time.monotonic"
                    ) {
                        self.0 = true;
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut c = C(false);
    c.visit_expr(expr);
    c.0
}

/// `agent.losses.clear()`, `env.episode_rewards = []`, `del trainer.history[:]` somewhere else
/// in the file: the owner's users reset it. Only run when about to report.
pub fn reset_from_outside(source: &str, name: &str) -> bool {
    let needle = format!(".{name}");
    source.match_indices(needle.as_str()).any(|(i, _)| {
        let before = &source[..i];
        if before.ends_with("self") || before.ends_with("cls") {
            return false;
        }
        let after = &source[i + needle.len()..];
        if after.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
            return false;
        }
        let after = after.trim_start();
        after.starts_with(".clear(")
            || after.starts_with("[:]")
            || after.starts_with("= ") && !after.starts_with("==")
            || after.starts_with(".pop(")
            || after.starts_with(".popleft(")
            || before.trim_end().ends_with("del") && after.starts_with('[')
    })
}

impl<'a> SemanticModel<'a> {
    /// Is every object of `class` (a class of this file that no other file makes or subclasses)
    /// scratch: made as a local of a function that neither trains nor runs a training loop,
    /// used there only through its attributes and methods, and never handed out by its own
    /// methods (`self` or a bound method passed to a call, as hooks are registered)? Then each
    /// lives for one call of a function that drives no training, and what it keeps is bounded
    /// by that call (a metric made in `compute()` for one batch).
    pub fn only_scratch_objects(&self, class: &str) -> bool {
        use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
        if self.external.used_elsewhere.contains(class) {
            return false;
        }
        let Some(def_class) = self.suite().iter().find_map(|s| match s {
            Stmt::ClassDef(c) if c.name.as_str() == class => Some(c),
            _ => None,
        }) else {
            return false;
        };
        // Its methods hand it out: `register_forward_hook(self._end)`, `registry.add(self)`.
        struct HandsOut<'m> {
            methods: Vec<&'m str>,
            found: bool,
        }
        impl<'e> Visitor<'e> for HandsOut<'_> {
            fn visit_expr(&mut self, expr: &'e Expr) {
                if let Expr::Call(c) = expr {
                    let out = c
                        .arguments
                        .args
                        .iter()
                        .chain(c.arguments.keywords.iter().map(|k| &k.value))
                        .any(|a| match a {
                            Expr::Name(n) => n.id.as_str() == "self",
                            Expr::Attribute(at) => {
                                matches!(&*at.value, Expr::Name(n) if n.id.as_str() == "self")
                                    && self.methods.contains(&at.attr.as_str())
                            }
                            _ => false,
                        });
                    self.found |= out;
                }
                walk_expr(self, expr);
            }
        }
        let methods: Vec<&str> = def_class
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::FunctionDef(f) => Some(f.name.as_str()),
                _ => None,
            })
            .collect();
        let mut hands = HandsOut {
            methods,
            found: false,
        };
        for s in &def_class.body {
            walk_stmt(&mut hands, s);
        }
        if hands.found {
            return false;
        }
        // Every construction: `x = Class(...)` in a function, `x` used there only as `x.attr`.
        struct Calls<'c> {
            class: &'c str,
            n: usize,
        }
        impl<'e> Visitor<'e> for Calls<'_> {
            fn visit_expr(&mut self, expr: &'e Expr) {
                if let Expr::Call(c) = expr {
                    if matches!(&*c.func, Expr::Name(n) if n.id.as_str() == self.class) {
                        self.n += 1;
                    }
                }
                walk_expr(self, expr);
            }
        }
        let mut calls = Calls { class, n: 0 };
        for s in self.suite() {
            walk_stmt(&mut calls, s);
        }
        struct Defs<'d> {
            found: Vec<&'d ruff_python_ast::StmtFunctionDef>,
        }
        impl<'d> Visitor<'d> for Defs<'d> {
            fn visit_stmt(&mut self, s: &'d Stmt) {
                if let Stmt::FunctionDef(f) = s {
                    self.found.push(f);
                }
                walk_stmt(self, s);
            }
        }
        let mut defs = Defs { found: Vec::new() };
        for s in self.suite() {
            defs.visit_stmt(s);
        }
        let mut locals = 0;
        for f in defs.found {
            let mut made: Vec<&str> = Vec::new();
            super::scan::visit_block(&f.body, &mut |s| {
                if let Stmt::Assign(a) = s {
                    if let (Expr::Call(c), [Expr::Name(t)]) = (&*a.value, &*a.targets) {
                        if matches!(&*c.func, Expr::Name(n) if n.id.as_str() == class) {
                            made.push(t.id.as_str());
                        }
                    }
                }
            });
            if made.is_empty() {
                continue;
            }
            let mut drives_training = self.training().trains(f);
            super::scan::visit_block(&f.body, &mut |s| {
                // A loop that trains, or whose names say it goes through steps, epochs or data
                // (`for step in range(steps)`: an environment stepped for a whole run); not one
                // that is a training loop only because it calls the object's own `step()`.
                if self.training().loop_trains(s) || super::iteration::named_grain(s).is_some() {
                    drives_training = true;
                }
            });
            if drives_training || made.iter().any(|name| escapes(&f.body, name)) {
                return false;
            }
            locals += made.len();
        }
        locals > 0 && locals == calls.n
    }
}

/// Is the local `name` used in `body` other than through its attributes (`x.step(...)`), in a
/// comparison (`x is None`) or as an assignment target: passed, returned, stored, yielded?
fn escapes(body: &[Stmt], name: &str) -> bool {
    use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
    struct Uses<'n> {
        name: &'n str,
        escaped: bool,
    }
    impl<'e> Visitor<'e> for Uses<'_> {
        fn visit_expr(&mut self, expr: &'e Expr) {
            match expr {
                Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == self.name) =>
                    {}
                Expr::Compare(c) => {
                    for e in std::iter::once(&*c.left).chain(c.comparators.iter()) {
                        if !matches!(e, Expr::Name(n) if n.id.as_str() == self.name) {
                            self.visit_expr(e);
                        }
                    }
                }
                Expr::Name(n) if n.id.as_str() == self.name && n.ctx.is_load() => {
                    self.escaped = true;
                }
                _ => walk_expr(self, expr),
            }
        }
    }
    let mut uses = Uses {
        name,
        escaped: false,
    };
    for s in body {
        walk_stmt(&mut uses, s);
    }
    uses.escaped
}

/// The resets of one key in a block, split by whether a periodic condition guards them.
#[derive(Default)]
struct Resets {
    /// The first reset under a periodic condition.
    periodic: Option<TextSize>,
    /// A reset that runs on other iterations too (or one this scan cannot place).
    always: bool,
}

impl Resets {
    fn scan(&mut self, body: &[Stmt], key: &str, under: bool) {
        for s in body {
            match s {
                Stmt::If(i) => {
                    self.scan(
                        &i.body,
                        key,
                        under || super::iteration::is_periodic(&i.test),
                    );
                    for clause in &i.elif_else_clauses {
                        self.scan(&clause.body, key, under);
                    }
                }
                Stmt::For(f) => {
                    self.scan(&f.body, key, under);
                    self.scan(&f.orelse, key, under);
                }
                Stmt::While(w) => {
                    self.scan(&w.body, key, under);
                    self.scan(&w.orelse, key, under);
                }
                Stmt::With(w) => self.scan(&w.body, key, under),
                Stmt::Try(t) => {
                    self.scan(&t.body, key, under);
                    for h in &t.handlers {
                        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                        self.scan(&h.body, key, under);
                    }
                    self.scan(&t.orelse, key, under);
                    self.scan(&t.finalbody, key, under);
                }
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                s if resets_key(s, key) => {
                    if under {
                        self.periodic
                            .get_or_insert(ruff_text_size::Ranged::start(s));
                    } else {
                        self.always = true;
                    }
                }
                _ => {}
            }
        }
    }
}

/// Does the statement rebind `key` to something not made from it, delete it, or empty it
/// (`key.clear()`, `del key[:]`)?
fn resets_key(stmt: &Stmt, key: &str) -> bool {
    let binds = |t: &Expr| match t {
        Expr::Tuple(t) => t.elts.iter().any(|e| dotted(e).as_deref() == Some(key)),
        e => dotted(e).as_deref() == Some(key),
    };
    let fresh = |v: &Expr| !keys_in(v).iter().any(|k| k == key);
    match stmt {
        Stmt::Assign(a) => a.targets.iter().any(binds) && fresh(&a.value),
        Stmt::AnnAssign(a) => binds(&a.target) && a.value.as_deref().is_some_and(fresh),
        Stmt::Delete(d) => d.targets.iter().any(|t| match t {
            Expr::Subscript(s) => dotted(&s.value).as_deref() == Some(key),
            e => dotted(e).as_deref() == Some(key),
        }),
        Stmt::Expr(e) => matches!(&*e.value, Expr::Call(c)
            if matches!(&*c.func, Expr::Attribute(a)
                if a.attr.as_str() == "clear" && dotted(&a.value).as_deref() == Some(key))),
        _ => false,
    }
}
