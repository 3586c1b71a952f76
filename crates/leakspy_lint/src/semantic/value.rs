//! What the analysis knows about a value: does it carry an autograd graph, what kind of object
//! is it, does it live on an accelerator.

use std::rc::Rc;

use ruff_text_size::TextSize;

/// Where a graph-carrying value came from, for messages ("the graph of `self.critic(...)`").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Source text of the expression that created the graph, shortened.
    pub what: String,
    pub offset: TextSize,
    /// A loss: the function calls `.backward()` on it or it comes from a loss function.
    pub is_loss: bool,
    /// `.backward()` ran through it where it was made: only the autograd nodes remain.
    pub backpropagated: bool,
    /// Set only while learning a function's summary: the graph stands for whatever the caller
    /// passes as positional parameter `i`.
    pub param: Option<usize>,
    /// Where the graph was made when that is another file of the project (`models/net.py:31`,
    /// from the project index); `offset` is then meaningless here.
    pub site: Option<Rc<str>>,
    /// The graph reached the function being walked through its positional parameter `i` (a
    /// caller passed it): a summary returning it says "returns argument `i`'s graph", so that
    /// each caller gets its own argument's.
    pub through: Option<usize>,
    /// Set only while learning a summary, beside `param`: the graph also stands for what the
    /// caller passes as these positional parameters (bit `i`), when graphs that several
    /// parameters bring join into one value (`rewards[t] + gamma * R`).
    pub or_params: u32,
}

impl Origin {
    /// A graph made in this file by `what` at `offset`: not a loss, not backpropagated, not
    /// standing for a parameter's.
    pub fn new(what: String, offset: TextSize) -> Self {
        Origin {
            what,
            offset,
            is_loss: false,
            backpropagated: false,
            param: None,
            site: None,
            through: None,
            or_params: 0,
        }
    }

    /// The origin of a value made from two graph-carrying ones: a graph made here (not a
    /// placeholder) wins, since the value carries it whatever the caller passes; two
    /// placeholders give one that stands for either parameter's graph.
    fn joined(a: Rc<Origin>, b: Rc<Origin>) -> Rc<Origin> {
        match (a.param, b.param) {
            (None, _) => a,
            (Some(_), None) => b,
            (Some(i), Some(j)) => {
                let bit = |k: usize| 1u32.checked_shl(k as u32).unwrap_or(0);
                let more = (b.or_params | bit(j)) & !bit(i);
                if (a.or_params | more) == a.or_params {
                    return a;
                }
                let mut o = (*a).clone();
                o.or_params |= more;
                Rc::new(o)
            }
        }
    }

    /// The positional parameters (after `self`) whose graph this placeholder stands for.
    pub fn params(&self) -> impl Iterator<Item = usize> + '_ {
        self.param
            .into_iter()
            .chain((0..32).filter(|i| self.or_params & (1 << i) != 0))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Graph {
    /// Nothing is known either way (an unknown call). Rules treat it as "no graph": precision
    /// first.
    #[default]
    Unknown,
    /// Known to carry no graph: cut by `.item()`, `.detach()`, no_grad, or a plain value.
    No,
    Yes(Rc<Origin>),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    #[default]
    Unknown,
    Tensor,
    /// What calling a module returns: a tensor, or a tuple or dict of them (a model's output
    /// object). Indexing it or reading an attribute gives a tensor.
    Output,
    /// An `nn.Module` instance.
    Module,
    /// A loss function object (`nn.MSELoss()`) or function.
    LossFn,
    Optimizer,
    /// A matplotlib figure registered with pyplot.
    Figure,
    /// A numpy array.
    Array,
    /// A Python number or string.
    Plain,
    /// The parameters of a module (`model.parameters()`): each one requires grad, so what is
    /// computed from one with autograd on is recorded.
    Parameters,
    List,
    Tuple,
    Dict,
    Set,
    /// `collections.deque`; `bounded` when created with a `maxlen`.
    Deque {
        bounded: bool,
    },
}

/// What unpacking a value (`a, b = value`) gives each target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Parts {
    /// Each target gets the whole value (a module's outputs: `out, h = rnn(x, h)`).
    #[default]
    Same,
    /// The value of each element (a tuple literal, a function of this file returning one).
    Elements(Rc<[Value]>),
    /// The first target gets the value, the others are unknown: what a loss function returns
    /// beside its loss (a sample size, a logging dict) is metadata the analysis cannot see.
    FirstOnly,
    /// The value under each string key of a dict whose keys are all known
    /// (`{"loss": loss, "acc": acc.item()}`): `d["acc"]` and `d.get("acc")` read their own.
    Keys(Rc<[(Box<str>, Value)]>),
}

impl Parts {
    /// The same structure with `f` applied to each element or entry.
    #[must_use]
    pub fn map(&self, f: impl Fn(&Value) -> Value) -> Parts {
        match self {
            Parts::Elements(e) => Parts::Elements(e.iter().map(&f).collect()),
            Parts::Keys(k) => Parts::Keys(k.iter().map(|(n, v)| (n.clone(), f(v))).collect()),
            p => p.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Value {
    pub graph: Graph,
    pub kind: Kind,
    /// Lives on an accelerator (`.cuda()`, `.to(device)`).
    pub device: bool,
    pub parts: Parts,
    /// A number or a 0-d tensor: a loss, a `.mean()`, a `.item()`.
    pub scalar: bool,
}

impl Value {
    pub fn unknown() -> Self {
        Self::default()
    }
    pub fn plain() -> Self {
        Self {
            scalar: true,
            ..Self::no_graph(Kind::Plain)
        }
    }
    pub fn of_kind(kind: Kind) -> Self {
        Self {
            graph: Graph::Unknown,
            kind,
            ..Default::default()
        }
    }
    pub fn no_graph(kind: Kind) -> Self {
        Self {
            graph: Graph::No,
            kind,
            ..Default::default()
        }
    }
    pub fn graph(origin: Origin) -> Self {
        Self {
            graph: Graph::Yes(Rc::new(origin)),
            kind: Kind::Tensor,
            ..Default::default()
        }
    }
    /// A value known to be a tensor on which `.detach()`, `.cpu()` or `.item()` can be called.
    pub fn is_tensor(&self) -> bool {
        self.kind == Kind::Tensor
    }
    /// A tensor, or a module's output that is most likely one.
    pub fn is_tensor_like(&self) -> bool {
        matches!(self.kind, Kind::Tensor | Kind::Output)
    }
    pub fn is_container(&self) -> bool {
        matches!(
            self.kind,
            Kind::List | Kind::Tuple | Kind::Dict | Kind::Set | Kind::Deque { .. }
        )
    }
    /// The value the `i`-th of `n` targets gets when the value is unpacked.
    pub fn part(&self, i: usize, n: usize) -> Value {
        match &self.parts {
            Parts::Elements(e) if e.len() == n => e[i].clone(),
            Parts::FirstOnly if i > 0 => Value::unknown(),
            Parts::FirstOnly => Value {
                parts: Parts::Same,
                ..self.clone()
            },
            _ => Value {
                parts: Parts::Same,
                ..self.clone()
            },
        }
    }
    /// The value under the string key `key`, when the dict's entries are known.
    pub fn entry(&self, key: &str) -> Option<&Value> {
        match &self.parts {
            Parts::Keys(k) => k.iter().find(|(n, _)| &**n == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn has_graph(&self) -> bool {
        matches!(self.graph, Graph::Yes(_))
    }
    pub fn origin(&self) -> Option<&Origin> {
        match &self.graph {
            Graph::Yes(o) => Some(o),
            _ => None,
        }
    }
    pub fn is_module(&self) -> bool {
        self.kind == Kind::Module
    }

    /// Joins two values flowing into one (operands of `a + b`, branches of `x if c else y`):
    /// a graph on either side is a graph on the result.
    #[must_use]
    pub fn join(self, other: Value) -> Value {
        let graph = match (self.graph, other.graph) {
            (Graph::Yes(a), Graph::Yes(b)) => Graph::Yes(Origin::joined(a, b)),
            (Graph::Yes(a), _) | (_, Graph::Yes(a)) => Graph::Yes(a),
            (Graph::No, Graph::No) => Graph::No,
            _ => Graph::Unknown,
        };
        let kind = if self.kind == other.kind {
            self.kind
        } else if self.kind == Kind::Tensor || other.kind == Kind::Tensor {
            Kind::Tensor
        } else if self.kind == Kind::Output || other.kind == Kind::Output {
            Kind::Output
        } else {
            Kind::Unknown
        };
        let parts = match (self.parts, other.parts) {
            (Parts::Elements(a), Parts::Elements(b)) if a.len() == b.len() => Parts::Elements(
                a.iter()
                    .zip(b.iter())
                    .map(|(x, y)| x.clone().join(y.clone()))
                    .collect(),
            ),
            (Parts::FirstOnly, Parts::FirstOnly) => Parts::FirstOnly,
            // Dicts with known entries: each key's values joined; a key only one side has holds
            // that side's value (reading it from the other would fail).
            (Parts::Keys(a), Parts::Keys(b)) => {
                let mut keys: Vec<(Box<str>, Value)> = a.to_vec();
                for (n, v) in b.iter() {
                    match keys.iter_mut().find(|(m, _)| m == n) {
                        Some((_, w)) => *w = w.clone().join(v.clone()),
                        None => keys.push((n.clone(), v.clone())),
                    }
                }
                Parts::Keys(keys.into())
            }
            _ => Parts::Same,
        };
        Value {
            graph,
            kind,
            device: self.device || other.device,
            parts,
            scalar: self.scalar && other.scalar,
        }
    }
}
