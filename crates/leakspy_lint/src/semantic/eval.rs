//! What an expression holds at the current statement: does it carry an autograd graph (and
//! from where), what kind of object is it, does it live on an accelerator.
//!
//! Graphs come from module and loss calls, tensors that require grad and names that are
//! backpropagated; `.item()`, `.detach()`, `.data`, `no_grad`/`inference_mode` cut them;
//! `.cpu()`, `.to()`, `.clone()` keep them. Calls of this file's functions take their return
//! value from the function's summary (`summary.rs`).

use std::rc::Rc;

use ruff_python_ast::{Expr, ExprCall};
use ruff_text_size::Ranged;

use super::facts::{init_kind_of_call, is_loss_ctor, is_module_ctor, self_attr, PlaceFacts};
use super::model::{shorten, SemanticModel};
use super::names::{
    builtin_cuts, builtin_passes, dotted, is_dotted, is_functional_loss, is_snapshot_method,
    last_segment, returns_values_and_indices, tensor_attr_cuts, tensor_method_cuts,
    torch_function_cuts,
};
use super::value::{Graph, Kind, Origin, Parts, Value};

impl<'a> SemanticModel<'a> {
    /// What the analysis knows about the value of `expr` at this point.
    pub fn value(&self, expr: &Expr) -> Value {
        let mut v = self.value_inner(expr);
        // A summary pass's parameter placeholder never reaches a rule as a real graph.
        if v.origin().is_some_and(|o| o.param.is_some()) && self.reporting {
            v = Value::unknown();
        }
        if !self.grad_enabled()
            && v.has_graph()
            && !matches!(
                expr,
                Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_)
            )
        {
            // Computed under no_grad: no graph, whatever the inputs.
            return Value {
                graph: Graph::No,
                parts: Parts::Same,
                ..v
            };
        }
        v
    }

    fn origin_of_call(&self, call: &ExprCall, is_loss: bool) -> Origin {
        Origin {
            is_loss,
            ..Origin::new(
                format!("{}(...)", shorten(&self.source[call.func.range()])),
                call.start(),
            )
        }
    }

    pub(crate) fn value_inner(&self, expr: &Expr) -> Value {
        match expr {
            Expr::Name(name) => {
                let id = name.id.as_str();
                if let Some(v) = self.lookup(id) {
                    return v.clone();
                }
                if self.facts.plain_globals.contains(id) || self.external.constants.contains(id) {
                    return Value::plain();
                }
                if let Some(g) = self.facts.globals.get(id) {
                    return Value::of_kind(g.init);
                }
                Value::unknown()
            }
            Expr::Attribute(attr) => {
                if let Some(key) = dotted(expr) {
                    if let Some(v) = self.lookup(&key) {
                        return v.clone();
                    }
                }
                if let Some(a) = self_attr(expr) {
                    if let Some(place) = self.attr_facts(a) {
                        if place.holds_numbers() {
                            return Value::plain();
                        }
                        return Value::of_kind(place.init);
                    }
                }
                let recv = self.value_inner(&attr.value);
                let name = attr.attr.as_str();
                if recv.kind == Kind::Module {
                    // `model.weight`, `model.fc`: parameters and submodules.
                    return Value {
                        device: recv.device,
                        ..Value::no_graph(Kind::Unknown)
                    };
                }
                if tensor_attr_cuts(name) {
                    return Value {
                        device: recv.device,
                        ..Value::no_graph(Kind::Unknown)
                    };
                }
                if recv.has_graph() {
                    return Value {
                        kind: Kind::Tensor,
                        parts: Parts::Same,
                        ..recv
                    };
                }
                Value::unknown()
            }
            Expr::Subscript(sub) => {
                let recv = self.value_inner(&sub.value);
                // `out["acc"]` of a dict whose entries are known: that entry.
                if let Expr::StringLiteral(k) = &*sub.slice {
                    if let Some(v) = recv.entry(k.value.to_str()) {
                        return v.clone();
                    }
                }
                // `pair[0]` of a known tuple: that element.
                if let (Parts::Elements(e), Expr::NumberLiteral(n)) = (&recv.parts, &*sub.slice) {
                    if let Some(i) = n.value.as_int().and_then(|i| i.as_u64()) {
                        if let Some(v) = e.get(i as usize) {
                            return v.clone();
                        }
                    }
                }
                if recv.has_graph() {
                    return Value {
                        kind: Kind::Tensor,
                        parts: Parts::Same,
                        ..recv
                    };
                }
                Value {
                    graph: recv.graph,
                    kind: if recv.kind == Kind::Array {
                        Kind::Array
                    } else {
                        Kind::Unknown
                    },
                    device: recv.device,
                    parts: Parts::Same,
                    scalar: false,
                }
            }
            Expr::BinOp(bin) => {
                let l = self.value_inner(&bin.left);
                let r = self.value_inner(&bin.right);
                arith(l, r)
            }
            Expr::UnaryOp(u) => {
                if matches!(u.op, ruff_python_ast::UnaryOp::Not) {
                    Value::plain()
                } else {
                    self.value_inner(&u.operand)
                }
            }
            Expr::Compare(_) | Expr::BoolOp(_) => Value::plain(),
            Expr::If(e) => {
                // `x if isinstance(x, Number) else x.item()`: where the test says `x` is a number,
                // it is one.
                let branch = |b: &Expr, number_if: bool| match number_test(&e.test) {
                    Some((name, when)) if when == number_if && is_dotted(b, name) => Value::plain(),
                    _ => self.value_inner(b),
                };
                branch(&e.body, true).join(branch(&e.orelse, false))
            }
            Expr::Named(n) => self.value_inner(&n.value),
            Expr::Starred(s) => self.value_inner(&s.value),
            Expr::Await(a) => self.value_inner(&a.value),
            Expr::List(l) => self.container(l.elts.iter(), Kind::List),
            Expr::Tuple(t) => {
                let elems: Vec<Value> = t.elts.iter().map(|e| self.value_inner(e)).collect();
                let v = container_of(elems.iter().cloned(), Kind::Tuple);
                if t.elts.iter().any(|e| matches!(e, Expr::Starred(_))) {
                    return v;
                }
                Value {
                    parts: Parts::Elements(elems.into()),
                    ..v
                }
            }
            Expr::Set(s) => self.container(s.elts.iter(), Kind::Set),
            Expr::Dict(d) => {
                let string_keys = !d.items.is_empty()
                    && d.items
                        .iter()
                        .all(|i| matches!(i.key, Some(Expr::StringLiteral(_))));
                if !string_keys {
                    return self.container(d.items.iter().map(|i| &i.value), Kind::Dict);
                }
                // Each value evaluated once, for its entry and for the dict as a whole.
                let entries: Vec<(Box<str>, Value)> = d
                    .items
                    .iter()
                    .map(|i| {
                        let key = match &i.key {
                            Some(Expr::StringLiteral(k)) => k.value.to_str().into(),
                            _ => Box::default(),
                        };
                        (key, self.value_inner(&i.value))
                    })
                    .collect();
                let v = container_of(entries.iter().map(|(_, v)| v.clone()), Kind::Dict);
                Value {
                    parts: Parts::Keys(entries.into()),
                    ..v
                }
            }
            Expr::ListComp(c) => {
                let v = self.comprehension_value(&c.elt, &c.generators);
                Value {
                    kind: Kind::List,
                    parts: Parts::Same,
                    ..v
                }
            }
            Expr::SetComp(c) => Value {
                kind: Kind::Set,
                ..self.comprehension_value(&c.elt, &c.generators)
            },
            Expr::Generator(c) => self.comprehension_value(&c.elt, &c.generators),
            Expr::DictComp(c) => {
                let v = self.comprehension_value(&c.value, &c.generators);
                Value {
                    kind: Kind::Dict,
                    parts: Parts::Same,
                    ..v
                }
            }
            Expr::Call(call) => self.call_value(call),
            Expr::NumberLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::BytesLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::EllipsisLiteral(_)
            | Expr::FString(_)
            | Expr::TString(_)
            | Expr::Lambda(_) => Value::plain(),
            _ => Value::unknown(),
        }
    }

    fn container<'e>(&self, elts: impl Iterator<Item = &'e Expr>, kind: Kind) -> Value {
        // Lazy: elements after the first that carries a graph are not evaluated.
        container_of(elts.map(|e| self.value_inner(e)), kind)
    }

    /// The element of a comprehension: its generators' targets take the graph of what they
    /// iterate (a list of losses yields losses).
    fn comprehension_value(
        &self,
        elt: &Expr,
        generators: &[ruff_python_ast::Comprehension],
    ) -> Value {
        let v = self.value_inner(elt);
        if v.has_graph() {
            return v;
        }
        // `[l for l in losses]`: elements of a graph container keep the graph.
        if let Expr::Name(n) = elt {
            for g in generators {
                if is_dotted(&g.target, n.id.as_str()) {
                    let it = self.value_inner(&g.iter);
                    if it.has_graph() {
                        return Value {
                            kind: Kind::Tensor,
                            parts: Parts::Same,
                            ..it
                        };
                    }
                }
            }
        }
        v
    }

    /// What each iteration of `for target in iter` binds: numbers from `range`, an index and an
    /// element from `enumerate`, one element of each sequence from `zip` (each keeps its own
    /// provenance); the rows of a tensor; an element of a graph-carrying container.
    pub fn element_value(&self, iter: &Expr) -> Value {
        if let Expr::Call(call) = iter {
            let builtin = match &*call.func {
                Expr::Name(n) if self.lookup(n.id.as_str()).is_none() => Some(n.id.as_str()),
                _ => None,
            };
            let args = &call.arguments.args;
            let first = || args.first().map(|a| self.element_value(a));
            match builtin {
                Some("range") => return Value::plain(),
                Some("enumerate") if args.len() == 1 => {
                    let parts = [Value::plain(), first().unwrap_or_default()];
                    return Value {
                        kind: Kind::Tuple,
                        parts: Parts::Elements(parts.into()),
                        ..self.element_of(self.value_inner(&args[0]))
                    };
                }
                Some("zip") if call.arguments.keywords.is_empty() => {
                    let parts: Vec<Value> = args.iter().map(|a| self.element_value(a)).collect();
                    if !args.iter().any(|a| matches!(a, Expr::Starred(_))) {
                        let whole = parts
                            .iter()
                            .cloned()
                            .fold(Value::no_graph(Kind::Tuple), Value::join);
                        return Value {
                            kind: Kind::Tuple,
                            parts: Parts::Elements(parts.into()),
                            ..whole
                        };
                    }
                }
                Some("reversed" | "sorted" | "list" | "iter") if args.len() == 1 => {
                    return first().unwrap_or_default();
                }
                _ => {}
            }
            // A progress bar yields what it wraps (`tqdm(enumerate(data))`, `Tqdm.tqdm(...)`),
            // and `trange` numbers.
            match super::names::dotted(&call.func)
                .as_deref()
                .map(super::names::last_segment)
            {
                Some("tqdm") if !args.is_empty() => return first().unwrap_or_default(),
                Some("trange") => return Value::plain(),
                _ => {}
            }
        }
        self.element_of(self.value_inner(iter))
    }

    /// An element of a collection whose value is `iter`.
    fn element_of(&self, iter: Value) -> Value {
        match iter.graph {
            Graph::Yes(_) => Value {
                kind: Kind::Tensor,
                parts: Parts::Same,
                ..iter
            },
            // The elements of a tensor are tensors (rows, or 0-d tensors).
            _ if iter.kind == Kind::Tensor => Value {
                parts: Parts::Same,
                scalar: false,
                ..iter
            },
            _ => Value::unknown(),
        }
    }

    /// The dotted, import-resolved name of a function being called, when the call is of a
    /// module-level function (`torch.cat`, `F.mse_loss`, `np.zeros`), not a method on a value.
    pub fn qualified_function(&self, func: &Expr) -> Option<Rc<str>> {
        // Every call hook of every rule asks this of the same callee; the environment does not
        // change between them, so the last answer is kept until the next statement.
        let at = func as *const Expr as usize;
        if let Some((key, q)) = &*self.qualified_memo.borrow() {
            if *key == at {
                return q.clone();
            }
        }
        let q: Option<Rc<str>> = self.qualify_uncached(func).map(Rc::from);
        *self.qualified_memo.borrow_mut() = Some((at, q.clone()));
        q
    }

    /// What a function of the project returns as its summary says, before any caller's
    /// arguments stand in for its parameters: a function of this file, or of another file whose
    /// summary the index gave. `None` for a library's function, whose body the analysis has not
    /// read.
    pub fn project_summary(&self, func: &Expr) -> Option<&Value> {
        if let Expr::Name(n) = func {
            if self.facts.functions.contains(n.id.as_str()) {
                return self.summaries.get(n.id.as_str());
            }
        }
        let q = self.qualified_function(func)?;
        if q.contains('.') {
            self.summaries.get(&*q)
        } else {
            None
        }
    }

    fn qualify_uncached(&self, func: &Expr) -> Option<String> {
        let mut head = func;
        while let Expr::Attribute(a) = head {
            head = &a.value;
        }
        let Expr::Name(n) = head else { return None };
        let head = n.id.as_str();
        if head == "self" || self.lookup(head).is_some() {
            return None;
        }
        self.facts.imports.qualify(func)
    }

    fn call_value(&self, call: &ExprCall) -> Value {
        let grad = self.grad_enabled();
        self.current_call_args.set(call.arguments.args.len());
        // Calling an instance of a module class of this file runs its `forward`: the graphs
        // passed here reach `forward`'s parameters (`self.norm(self.encoder(x))`).
        if !self.reporting
            && grad
            && self.facts.has_module_forward
            && !call.arguments.args.is_empty()
        {
            if let Some(class) = self.submodule_class(&call.func) {
                self.summary_call(&format!("{class}.forward"), call, grad);
            }
        }
        if let Some(q) = self.qualified_function(&call.func) {
            return self.function_call_value(call, &q, grad);
        }
        match &*call.func {
            Expr::Attribute(attr) => self.method_call_value(call, attr, grad),
            other => {
                let callee = self.value_inner(other);
                self.call_of_value(call, &callee, grad)
            }
        }
    }

    pub(crate) fn args_value(&self, call: &ExprCall) -> Value {
        let mut v = Value::no_graph(Kind::Unknown);
        for a in &*call.arguments.args {
            v = v.join(self.value_inner(a));
        }
        for k in &call.arguments.keywords {
            v = v.join(self.value_inner(&k.value));
        }
        v
    }

    pub(crate) fn call_of_value(&self, call: &ExprCall, callee: &Value, grad: bool) -> Value {
        match callee.kind {
            Kind::Module | Kind::LossFn => {
                let loss = callee.kind == Kind::LossFn;
                // A module's output may be a tensor, a tuple or a dict of them (a model's
                // output object); a loss function's is its loss first, then metadata.
                let (kind, parts) = if loss {
                    (Kind::Tensor, Parts::FirstOnly)
                } else {
                    (Kind::Output, Parts::Same)
                };
                if !grad {
                    return Value {
                        graph: Graph::No,
                        kind,
                        device: callee.device || call.arguments.args.iter().any(moved_to_device),
                        parts,
                        scalar: loss,
                    };
                }
                let args = self.args_value(call);
                // A module's output lives where its inputs live (`model(x.to(device))`).
                let moved = call.arguments.args.iter().any(moved_to_device);
                Value {
                    graph: Graph::Yes(Rc::new(self.origin_of_call(call, loss))),
                    kind,
                    device: callee.device || args.device || moved,
                    parts,
                    scalar: loss,
                }
            }
            _ => {
                // A function of this file.
                if let Some(name) = dotted(&call.func) {
                    if let Some(v) = self.summary_call(&name, call, grad) {
                        return v;
                    }
                    if let Some(c) = self.facts.classes.get(&name) {
                        return Value::of_kind(c.instance_kind());
                    }
                }
                Value::unknown()
            }
        }
    }

    fn function_call_value(&self, call: &ExprCall, q: &str, grad: bool) -> Value {
        let last = last_segment(q);
        let requires_grad = call.arguments.keywords.iter().any(|k| {
            k.arg
                .as_ref()
                .is_some_and(|a| a.as_str() == "requires_grad")
                && matches!(&k.value, Expr::BooleanLiteral(b) if b.value)
        });
        let on_device = call.arguments.keywords.iter().any(|k| {
            k.arg.as_ref().is_some_and(|a| a.as_str() == "device")
                && !matches!(&k.value, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
        });
        let tensor = |graph: Graph, device: bool| Value {
            graph,
            kind: Kind::Tensor,
            device,
            parts: Parts::Same,
            scalar: false,
        };
        // `hvd.allreduce(loss)`: the loss averaged over the ranks, graph and all.
        if super::hooks::collective_passes_value(q) {
            if let Some(first) = call.arguments.args.first() {
                let v = self.value_inner(first);
                return Value {
                    parts: Parts::Same,
                    ..v
                };
            }
        }
        if is_functional_loss(q) {
            // A loss is a 0-d tensor (the default reduction).
            let args = self.args_value(call);
            let graph = if !grad || args.graph == Graph::No {
                Graph::No
            } else {
                Graph::Yes(Rc::new(self.origin_of_call(call, true)))
            };
            return Value {
                scalar: true,
                ..tensor(graph, args.device)
            };
        }
        // A function of this file, or of another file of the project (`utils.viz.plot`, whose
        // summary the project index gave).
        if self.facts.functions.contains(q) || q.contains('.') && self.summaries.contains_key(q) {
            if let Some(v) = self.summary_call(q, call, grad) {
                return v;
            }
        }
        if is_module_ctor(q, &self.facts.classes) {
            if last == "Sequential" && !self.reporting {
                self.sequential_taints(call);
            }
            return Value::no_graph(Kind::Module);
        }
        if is_loss_ctor(q) {
            return Value::no_graph(Kind::LossFn);
        }
        if q.starts_with("torch.optim.") {
            return Value::no_graph(Kind::Optimizer);
        }
        if q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter" {
            return tensor(Graph::No, false);
        }
        // Differentiable operations live in `torch`, `torch.nn.functional`, `torch.linalg`,
        // `torch.fft` and `torch.special`, and are lowercase functions; classes and utilities
        // elsewhere in the package (`torch.utils.weak.TensorWeakRef`) are not operations.
        let op_namespace = matches!(
            q.rsplit_once('.').map(|(ns, _)| ns),
            Some("torch" | "torch.nn.functional" | "torch.linalg" | "torch.fft" | "torch.special")
        ) && last.starts_with(|c: char| c.is_ascii_lowercase());
        if q.starts_with("torch.") && !op_namespace {
            // torch's memory counters (`torch.cuda.max_memory_allocated()`) are numbers.
            if init_kind_of_call(call, &self.facts.imports, &self.facts.classes) == Kind::Plain {
                return Value::plain();
            }
            return Value::unknown();
        }
        if q.starts_with("torch.") && torch_function_makes_no_tensor(last) {
            return Value::no_graph(Kind::Unknown);
        }
        if q.starts_with("torch.") {
            // A leaf that requires grad: storing it is fine, but what is computed from it
            // carries a graph; report it as the origin.
            if requires_grad || torch_function_cuts(last) || !grad {
                return tensor(Graph::No, on_device);
            }
            if matches!(
                last,
                "zeros"
                    | "ones"
                    | "empty"
                    | "full"
                    | "randn"
                    | "rand"
                    | "tensor"
                    | "as_tensor"
                    | "from_numpy"
                    | "eye"
                    | "linspace"
                    | "logspace"
            ) {
                return tensor(Graph::No, on_device);
            }
            let args = self.args_value(call);
            // `torch.max(x, 1)`, `torch.topk(x, k)`: values with the graph, indices without.
            if returns_values_and_indices(last, call_arity(call).saturating_sub(1)) {
                return values_and_indices(args.graph, args.device || on_device);
            }
            // `torch.split`, `torch.chunk`, `torch.unbind` give a tuple of tensors.
            let kind = if matches!(
                last,
                "split" | "chunk" | "unbind" | "tensor_split" | "meshgrid" | "broadcast_tensors"
            ) {
                Kind::Tuple
            } else {
                Kind::Tensor
            };
            return Value {
                graph: args.graph,
                kind,
                device: args.device || on_device,
                parts: Parts::Same,
                scalar: false,
            };
        }
        if q.starts_with("numpy.") {
            return Value::no_graph(Kind::Array);
        }
        if q == "copy.deepcopy" || q == "copy.copy" {
            return call
                .arguments
                .args
                .first()
                .map(|a| self.value_inner(a))
                .unwrap_or_default();
        }
        if !q.contains('.') {
            if builtin_cuts(q) {
                return Value::plain();
            }
            if builtin_passes(q) {
                let v = self.args_value(call);
                let kind = match q {
                    // `list(model.parameters())` is still the module's parameters.
                    "list" | "tuple" if v.kind == Kind::Parameters => Kind::Parameters,
                    "list" | "sorted" => Kind::List,
                    "tuple" => Kind::Tuple,
                    "dict" => Kind::Dict,
                    "set" | "frozenset" => Kind::Set,
                    // `sum(losses)`, `max(a, b)` of tensors is a tensor.
                    "sum" | "max" | "min" | "abs" if v.has_graph() => Kind::Tensor,
                    "zip" | "enumerate" | "iter" | "reversed" | "next" => Kind::Unknown,
                    _ => v.kind,
                };
                return Value {
                    kind,
                    parts: Parts::Same,
                    ..v
                };
            }
        }
        if let Some(class) = self.facts.classes.get(q) {
            return Value::of_kind(class.instance_kind());
        }
        let kind = init_kind_of_call(call, &self.facts.imports, &self.facts.classes);
        Value::of_kind(kind)
    }

    /// `nn.Sequential(nn.Conv2d(...), ManualBatchNorm2d(6), ...)`: each layer's `forward` gets
    /// the previous layer's output, which carries a graph when the sequence runs with autograd
    /// on. A layer of a module class of this file placed after a module then receives a graph
    /// in its `forward`, as `self.norm(self.encoder(x))` would give it.
    fn sequential_taints(&self, call: &ExprCall) {
        for (layer, origin) in self.layers_fed_by_modules(&call.arguments.args) {
            let Some(class) = self.class_of(layer) else {
                continue;
            };
            let has_forward = self
                .facts
                .class(&class)
                .is_some_and(|c| c.is_module && c.methods.contains("forward"));
            if !has_forward {
                continue;
            }
            let mut map = self.param_taint.borrow_mut();
            let entry = map.entry(format!("{class}.forward")).or_default();
            if entry.is_empty() {
                entry.push(Some(Rc::new(origin)));
            } else if entry[0].is_none() {
                entry[0] = Some(Rc::new(origin));
            }
        }
    }

    /// The layers of `elts` (a `Sequential`'s arguments, or a list of layers that a
    /// `Sequential(*layers)` runs) placed right after a module's constructor, each with the
    /// origin of what its `forward` receives: that module's output, a graph with autograd on.
    pub(crate) fn layers_fed_by_modules<'e>(&self, elts: &'e [Expr]) -> Vec<(&'e Expr, Origin)> {
        let mut out = Vec::new();
        for pair in elts.windows(2) {
            let [Expr::Call(prev), layer] = pair else {
                continue;
            };
            let prev_is_module = self
                .qualified_function(&prev.func)
                .is_some_and(|q| is_module_ctor(&q, &self.facts.classes));
            if !prev_is_module {
                continue;
            }
            out.push((
                layer,
                Origin {
                    through: Some(0),
                    ..Origin::new(
                        format!("{}(...)", shorten(&self.source[prev.func.range()])),
                        prev.start(),
                    )
                },
            ));
        }
        out
    }

    fn method_call_value(
        &self,
        call: &ExprCall,
        attr: &ruff_python_ast::ExprAttribute,
        grad: bool,
    ) -> Value {
        let method = attr.attr.as_str();
        let recv_expr = &*attr.value;
        // A method of a string written out (`"".join(chars)`, `"{}".format(x)`) gives a string,
        // a number or a list of strings: never a graph.
        if matches!(recv_expr, Expr::StringLiteral(_) | Expr::FString(_)) {
            return Value::plain();
        }
        // `accelerator.gather(x)`: `x`'s values from every process, with its graph on one.
        if super::hooks::accelerate_passes_value(method)
            && call.arguments.args.len() == 1
            && call.arguments.keywords.is_empty()
            && !self.value_inner(recv_expr).is_tensor_like()
        {
            return self.value_inner(&call.arguments.args[0]);
        }
        // `out.get("acc")`, `out.pop("acc")` of a dict whose entries are known: that entry.
        if matches!(method, "get" | "pop") {
            if let Some(Expr::StringLiteral(k)) = call.arguments.args.first() {
                if let Some(v) = self.value_inner(recv_expr).entry(k.value.to_str()) {
                    return v.clone();
                }
            }
        }
        // `self.fc(x)`, `self.criterion(a, b)`: an attribute holding a module or loss.
        if let Some(a) = self_attr(&call.func) {
            let mut held = match self.lookup(&format!("self.{a}")) {
                Some(v) => v.kind,
                None => self.attr_facts(a).map(|p| p.init).unwrap_or_default(),
            };
            // `self.loss(pred, y)`, `self.criterion(...)`: a callable named as a loss is one.
            if held == Kind::Unknown && self.facts.uses_torch && names_a_loss(a) {
                held = Kind::LossFn;
            }
            if matches!(held, Kind::Module | Kind::LossFn) {
                return self.call_of_value(call, &Value::no_graph(held), grad);
            }
        }
        // A method of a class of this file, on an instance whose class is known; or an
        // attribute of it that holds a module (`agent.actor(obs)`).
        if let Some(class) = self.class_of(recv_expr) {
            let held = self
                .facts
                .class(&class)
                .and_then(|c| c.attrs.get(method))
                .map(|p| p.init);
            if let Some(kind @ (Kind::Module | Kind::LossFn)) = held {
                return self.call_of_value(call, &Value::no_graph(kind), grad);
            }
            if self
                .facts
                .class(&class)
                .is_some_and(|c| c.methods.contains(method))
            {
                let key = format!("{class}.{method}");
                return self.summary_call(&key, call, grad).unwrap_or_default();
            }
        }
        // `self.helper(...)`: a method of this class.
        if matches!(recv_expr, Expr::Name(n) if n.id.as_str() == "self") {
            if let Some(class) = self.class() {
                let key = format!("{}.{}", class.name.as_str(), method);
                if let Some(v) = self.summary_call(&key, call, grad) {
                    return v;
                }
            }
        }
        let recv = self.value_inner(recv_expr);
        // `model.parameters()`: the module's parameters, each a leaf that requires grad.
        if method == "parameters"
            && call.arguments.args.is_empty()
            && matches!(recv.kind, Kind::Module | Kind::Unknown)
            && !recv.has_graph()
        {
            return Value::no_graph(Kind::Parameters);
        }
        if recv.kind == Kind::Module || recv.kind == Kind::LossFn {
            return match method {
                "forward" | "__call__" => self.call_of_value(call, &recv, grad),
                "to" | "cuda" => Value {
                    device: method == "cuda"
                        || !call.arguments.args.first().is_some_and(is_cpu_literal),
                    ..recv
                },
                "cpu" | "train" | "eval" | "float" | "half" | "double" | "requires_grad_"
                | "bfloat16" => recv,
                _ => self
                    .unique_method_summary(method, call, grad)
                    .unwrap_or_else(|| Value::no_graph(Kind::Unknown)),
            };
        }
        if recv.kind == Kind::Optimizer {
            return Value::plain();
        }
        // A parameter's placeholder graph (summary pass) may be any object: a method of a class
        // of this file explains the call better than "a tensor method".
        if recv.origin().is_some_and(|o| o.param.is_some()) {
            if let Some(v) = self.unique_method_summary(method, call, grad) {
                return v;
            }
        }
        if recv.has_graph() {
            if tensor_method_cuts(method) {
                let kind = match method {
                    m if super::names::tensor_method_counts(m) => Kind::Plain,
                    "tolist" => Kind::List,
                    "numpy" => Kind::Array,
                    "keys" | "count" | "index" | "__len__" => Kind::Unknown,
                    _ => Kind::Tensor,
                };
                return Value {
                    graph: Graph::No,
                    kind,
                    device: recv.device && method != "numpy" && kind == Kind::Tensor,
                    parts: Parts::Same,
                    // `.detach()` of a loss is still a number-sized tensor.
                    scalar: kind == Kind::Plain || recv.scalar && kind == Kind::Tensor,
                };
            }
            if !grad && !recv.is_container() {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: recv.device,
                    parts: Parts::Same,
                    scalar: recv.scalar || reduces(method, call),
                };
            }
            let device = match method {
                "cpu" | "numpy" => false,
                "cuda" => true,
                "to" => !call.arguments.args.first().is_some_and(is_cpu_literal) || recv.device,
                _ => recv.device,
            };
            // Reading a dict-like output (`out.get("loss")`, `out.items()`) keeps the graph
            // but says nothing of the kind.
            let dict_read = matches!(
                method,
                "pop" | "get" | "values" | "items" | "copy" | "popleft" | "setdefault"
            );
            return match recv.kind {
                k if recv.is_container()
                    || (matches!(k, Kind::Unknown | Kind::Output) && dict_read) =>
                {
                    if dict_read {
                        Value {
                            kind: Kind::Unknown,
                            parts: Parts::Same,
                            ..recv
                        }
                    } else {
                        Value::plain()
                    }
                }
                _ if returns_values_and_indices(method, call_arity(call)) => {
                    values_and_indices(recv.graph, device)
                }
                _ => Value {
                    kind: match method {
                        "split" | "chunk" | "unbind" | "tensor_split" => Kind::Tuple,
                        _ => Kind::Tensor,
                    },
                    device,
                    parts: Parts::Same,
                    scalar: recv.scalar && is_snapshot_method(method) || reduces(method, call),
                    ..recv
                },
            };
        }
        match method {
            m if super::names::tensor_method_counts(m) => return Value::plain(),
            "tolist" => return Value::no_graph(Kind::List),
            "detach" | "detach_" => {
                return Value {
                    device: recv.device,
                    scalar: recv.scalar,
                    ..Value::no_graph(Kind::Tensor)
                }
            }
            "numpy" => return Value::no_graph(Kind::Array),
            "cuda" => {
                return Value {
                    device: true,
                    kind: if recv.kind == Kind::Unknown {
                        Kind::Tensor
                    } else {
                        recv.kind
                    },
                    ..recv
                }
            }
            "to" if call
                .arguments
                .args
                .first()
                .is_some_and(|a| !is_cpu_literal(a) && looks_like_device(a)) =>
            {
                return Value {
                    device: true,
                    ..recv
                };
            }
            "cpu" => {
                return Value {
                    device: false,
                    ..recv
                }
            }
            _ => {}
        }
        if recv.graph == Graph::No && recv.kind == Kind::Tensor {
            return Value {
                device: recv.device,
                ..Value::no_graph(Kind::Tensor)
            };
        }
        if matches!(recv_expr, Expr::Name(n) if n.id.as_str() == "self") {
            return Value::unknown();
        }
        self.unique_method_summary(method, call, grad)
            .unwrap_or_default()
    }

    /// The class of this file whose instance `expr` holds, when known.
    /// `self.norm` or a local `norm` holding an instance of a module class of this file that
    /// defines `forward`: its class.
    fn submodule_class(&self, func: &Expr) -> Option<String> {
        let class = match func {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
                let own = self.class()?;
                self.facts
                    .class(own.name.as_str())?
                    .attrs
                    .get(a.attr.as_str())?
                    .class
                    .clone()?
            }
            Expr::Name(_) => self.class_of(func)?,
            _ => return None,
        };
        self.facts
            .class(&class)
            .is_some_and(|c| c.is_module && c.methods.contains("forward"))
            .then_some(class)
    }

    pub fn class_of(&self, expr: &Expr) -> Option<String> {
        match expr {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if id == "self" {
                    return self.class().map(|c| c.name.as_str().to_string());
                }
                for scope in self.scopes.iter().rev() {
                    if let Some(c) = scope.instances.get(id) {
                        return Some(c.clone());
                    }
                    if scope.env.contains_key(id) {
                        return None;
                    }
                }
                self.facts.globals.get(id).and_then(|g| g.class.clone())
            }
            Expr::Attribute(a) => self.instance_attr(a)?.class.clone(),
            Expr::Call(call) => {
                let q = self.qualified_function(&call.func)?;
                self.facts.classes.contains_key(&*q).then(|| q.to_string())
            }
            Expr::Subscript(sub) => self.elem_class_of(&sub.value),
            _ => None,
        }
    }

    /// Facts of `obj.attr` when `obj` is an instance of a class of this file.
    fn instance_attr(&self, a: &ruff_python_ast::ExprAttribute) -> Option<&'a PlaceFacts> {
        let owner = self.class_of(&a.value)?;
        let facts = self.facts;
        facts.class(&owner)?.attrs.get(a.attr.as_str())
    }

    /// The class of the elements of a list of instances (`self.population`).
    pub fn elem_class_of(&self, expr: &Expr) -> Option<String> {
        match expr {
            Expr::Attribute(a) => self.instance_attr(a)?.elem_class.clone(),
            Expr::Name(n) => {
                let key = n.id.as_str();
                for scope in self.scopes.iter().rev() {
                    if let Some(c) = scope.elem_instances.get(key) {
                        return Some(c.clone());
                    }
                }
                self.facts
                    .globals
                    .get(n.id.as_str())
                    .and_then(|g| g.elem_class.clone())
            }
            Expr::Call(call) => {
                // `reversed(xs)`, `list(xs)`: the elements of `xs`.
                let Expr::Name(name) = &*call.func else {
                    return None;
                };
                if matches!(name.id.as_str(), "reversed" | "list" | "sorted" | "iter") {
                    return self.elem_class_of(call.arguments.args.first()?);
                }
                None
            }
            _ => None,
        }
    }
}

/// `isinstance(x, int)`, `isinstance(x, (int, float))`, `isinstance(x, numbers.Number)` (or
/// `not` one of those): the name tested, and whether the test holds when `x` is a number.
fn number_test(test: &Expr) -> Option<(&str, bool)> {
    if let Expr::UnaryOp(u) = test {
        if matches!(u.op, ruff_python_ast::UnaryOp::Not) {
            return number_test(&u.operand).map(|(n, w)| (n, !w));
        }
        return None;
    }
    let Expr::Call(call) = test else { return None };
    if !is_dotted(&call.func, "isinstance") {
        return None;
    }
    let [Expr::Name(x), types] = &*call.arguments.args else {
        return None;
    };
    let number_type = |t: &Expr| {
        dotted(t).is_some_and(|d| {
            matches!(
                last_segment(&d),
                "int" | "float" | "complex" | "bool" | "Number" | "Real" | "Integral"
            )
        })
    };
    let all_numbers = match types {
        Expr::Tuple(t) => !t.elts.is_empty() && t.elts.iter().all(number_type),
        t => number_type(t),
    };
    all_numbers.then(|| (x.id.as_str(), true))
}

/// Positional and keyword arguments of a call.
fn call_arity(call: &ExprCall) -> usize {
    call.arguments.args.len() + call.arguments.keywords.len()
}

/// `(values, indices)`: the values carry `graph`, the indices none.
fn values_and_indices(graph: Graph, device: bool) -> Value {
    let values = Value {
        graph: graph.clone(),
        kind: Kind::Tensor,
        device,
        parts: Parts::Same,
        scalar: false,
    };
    let indices = Value {
        device,
        ..Value::no_graph(Kind::Tensor)
    };
    Value {
        kind: Kind::Tuple,
        parts: Parts::Elements([values.clone(), indices].into()),
        ..values
    }
}

/// A container of values already evaluated: it carries a graph when an element does.
fn container_of(values: impl Iterator<Item = Value>, kind: Kind) -> Value {
    let mut graph = Graph::No;
    let mut device = false;
    for v in values {
        device |= v.device;
        match v.graph {
            Graph::Yes(o) => {
                graph = Graph::Yes(o);
                break;
            }
            Graph::Unknown => graph = Graph::Unknown,
            Graph::No => {}
        }
    }
    Value {
        graph,
        kind,
        device,
        parts: Parts::Same,
        scalar: false,
    }
}

/// Arithmetic: a graph on either side (or a leaf that requires grad) gives a graph. Lists and
/// tuples repeat or concatenate (`[loss] * n` is a list).
pub(crate) fn arith(l: Value, r: Value) -> Value {
    let sequence = [l.kind, r.kind]
        .into_iter()
        .find(|k| matches!(k, Kind::List | Kind::Tuple));
    let kind = if let Some(k) = sequence {
        k
    } else if l.kind == Kind::Tensor || r.kind == Kind::Tensor || l.has_graph() || r.has_graph() {
        Kind::Tensor
    } else if l.kind == Kind::Array || r.kind == Kind::Array {
        Kind::Array
    } else if l.kind == Kind::Plain && r.kind == Kind::Plain {
        Kind::Plain
    } else {
        Kind::Unknown
    };
    Value {
        kind,
        parts: Parts::Same,
        ..l.join(r)
    }
}

/// `x.mean()`, `x.sum()`, `x.norm()` with no dimension: a 0-d tensor.
fn reduces(method: &str, call: &ExprCall) -> bool {
    matches!(
        method,
        "mean" | "sum" | "norm" | "std" | "var" | "prod" | "max" | "min" | "amax" | "amin"
    ) && call.arguments.args.is_empty()
        && !call
            .arguments
            .keywords
            .iter()
            .any(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "dim"))
}

/// The name of a callable that computes a loss: `loss`, `criterion`, `loss_fn`...
fn names_a_loss(name: &str) -> bool {
    name == "loss" || super::names::is_conventional_loss_param(name)
}

/// `torch.device("cuda")`, `torch.Size(...)`, `torch.is_tensor(x)`: what they return is not a
/// tensor.
fn torch_function_makes_no_tensor(func: &str) -> bool {
    matches!(
        func,
        "device"
            | "dtype"
            | "Size"
            | "get_default_dtype"
            | "is_tensor"
            | "is_grad_enabled"
            | "is_floating_point"
            | "numel"
            | "manual_seed"
            | "save"
            | "load"
            | "no_grad"
            | "inference_mode"
            | "enable_grad"
            | "set_grad_enabled"
            | "equal"
            | "allclose"
            | "cuda"
    )
}

/// `x.cuda()`, `x.to(device)`, `x.to("cuda")`: whatever `x` is, the result is on an
/// accelerator.
fn moved_to_device(e: &Expr) -> bool {
    let Expr::Call(c) = e else { return false };
    let Expr::Attribute(a) = &*c.func else {
        return false;
    };
    match a.attr.as_str() {
        "cuda" => true,
        "to" => {
            c.arguments.args.first().is_some_and(looks_like_device)
                || c.arguments.keywords.iter().any(|k| {
                    k.arg.as_ref().is_some_and(|n| n.as_str() == "device")
                        && looks_like_device(&k.value)
                })
        }
        _ => false,
    }
}

fn is_cpu_literal(e: &Expr) -> bool {
    matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
}

fn looks_like_device(e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(s) => {
            let v = s.value.to_str();
            v.starts_with("cuda") || v == "mps" || v.starts_with("xpu")
        }
        Expr::Name(n) => n.id.as_str().contains("device") || n.id.as_str() == "dev",
        Expr::Attribute(a) => a.attr.as_str().contains("device"),
        Expr::Call(c) => dotted(&c.func).is_some_and(|d| d.ends_with("device")),
        _ => false,
    }
}
