//! Function summaries: what one file tells the rest of the project, and what the project tells
//! one file. The second layer of the analysis (project index -> function summaries -> semantic
//! model -> rules).
//!
//! A [`FileSummary`] is made by every check of a file (`extract.rs`, from the semantic model
//! once the walk is done) and depends on nothing but the file's text and what the project told
//! it ([`ExternalFacts`]), so it can be cached by content hash (`project::cache`). It says, in
//! types the index can merge and serialize:
//! - which classes the file defines, their bases (as the file's imports name them), methods,
//!   attributes and whether they are `nn.Module`s;
//! - what each function returns, per tuple element and dict key: a graph, a graph when argument
//!   *i* carries one, a figure, a module;
//! - how often each function runs by the file's own account (a framework hook, a function that
//!   trains, a `forward`, or called from a training loop of the file);
//! - every call that leaves the file (a function or class of another module, a method of an
//!   object of such a class, a method a subclass elsewhere may define): which arguments carry a
//!   graph or pass a parameter on, and whether it runs per step there;
//! - which attributes the file resets on objects other than `self`.
//!
//! The project index (`project/index.rs`) answers with [`ExternalFacts`] per file: what the
//! functions and classes it uses from other files return and hold, which of its parameters
//! callers elsewhere pass graphs to, which of its functions run per step because of a caller
//! elsewhere. The semantic model takes them in (`semantic::external`) and the rules never know
//! where a fact came from.

pub mod extract;

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use serde::{Deserialize, Serialize};

use crate::semantic::iteration::Grain;
use crate::semantic::value::{Graph, Kind, Origin, Parts, Value};

/// What one file tells the project.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    /// Names the module's top-level imports bind, with the dotted name each stands for: how a
    /// package's `__init__` re-exports (`from .metrics import Metric`).
    pub aliases: Vec<(String, String)>,
    pub functions: Vec<FunctionSummary>,
    pub classes: Vec<ClassSummary>,
    pub calls: Vec<CallFact>,
    /// Attributes the file resets (clears, trims, rebinds) on objects other than `self`
    /// (`meter.values.clear()`, `model.cache = None`), by name.
    pub resets_attrs: Vec<String>,
    /// Module-level names bound once to a number or a string, sorted.
    #[serde(default)]
    pub constants: Vec<String>,
    /// Top-level functions and context-manager classes whose body turns autograd off (a
    /// decorator such as `smart_inference_mode()`, `class eval_context`), sorted.
    #[serde(default)]
    pub grad_off: Vec<String>,
}

/// One function or method of the file (`f`, `Class.method`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionSummary {
    pub key: String,
    pub line: u32,
    /// What it returns, when that is more than a plain or unknown value.
    pub returns: Option<ValueSummary>,
    /// How often it runs by this file's own account.
    pub cadence: Option<Grain>,
    /// It backpropagates or steps an optimizer, itself or through a function of its file.
    pub trains: bool,
    /// It adds its positional parameter `.1` into its parameter `.0` in place
    /// (`buf.add_(value)`), at line `.2`.
    #[serde(default)]
    pub adds: Option<(usize, usize, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassSummary {
    pub name: String,
    pub line: u32,
    /// Each base as the file's imports name it (`torch.nn.Module`, `.base.Trainer`, `Base`).
    pub bases: Vec<String>,
    pub is_module: bool,
    /// It may make parameters or submodules (`nn.Linear(...)`, `nn.Parameter(...)`, a module
    /// passed in, a torch layer as a base); `false` when every attribute it sets is a number, a
    /// tensor made from numbers, a container of those or a plain name.
    pub makes_parameters: bool,
    pub framework_owned: bool,
    pub methods: Vec<MethodSig>,
    pub attrs: Vec<AttrSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodSig {
    pub name: String,
    /// Positional arguments besides `self`: required, and at most (`usize::MAX` with `*args`).
    pub min: usize,
    pub max: usize,
    /// Its body only documents it (`pass`, `...`, `raise NotImplementedError`), or it is an
    /// `@abstractmethod`: what runs is a subclass's.
    pub is_abstract: bool,
}

/// What an attribute is initialised with (in `__init__` or a set-up method).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrSummary {
    pub name: String,
    pub init: Kind,
    /// An instance (or a list of instances) of a class, named as the file names it.
    pub class: Option<String>,
    pub elem_class: Option<String>,
    /// Bound in `__init__` from its positional parameter `i` (after `self`): its class is
    /// what callers pass there.
    pub from_param: Option<usize>,
}

/// A call that leaves the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallFact {
    /// The function the call is in (`f`, `Class.method`; empty at module level).
    pub caller: String,
    pub callee: Callee,
    pub args: Vec<ArgFact>,
    /// It runs once per step or epoch where it is: in a training loop, or in a function the
    /// file says runs so.
    pub grain: Option<Grain>,
    /// Autograd records where it is.
    pub grad: bool,
    pub line: u32,
    /// A constructor call whose object a loop renews (`semantic::renewal`).
    #[serde(default)]
    pub renews: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Callee {
    /// A function or class by the dotted name the file's imports give it
    /// (`utils.viz.plot_step`, `.metrics.Metric`).
    Name(String),
    /// A method of an object of a class of another module (`meter.update(loss)` with `meter =
    /// Metric(...)`).
    Method { class: String, method: String },
    /// `self.method(...)` in a class of this file, where the method is abstract here or
    /// inherited from a base elsewhere: the index finds what runs.
    SelfMethod { class: String, method: String },
    /// `self.attr.method(...)` in a class of this file, where `__init__` bound `attr` from a
    /// parameter: what runs is the method of the class of what callers pass there.
    AttrMethod {
        class: String,
        attr: String,
        method: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ArgFact {
    /// The argument carries a graph.
    Graph(OriginSummary),
    /// The argument is the caller's positional parameter `i` (after `self`), passed on.
    Param(usize),
    /// The argument is an object of a class, by the name the caller's file gives the class
    /// (`agent` after `agent = DQNAgent(...)`: `agents.DQNAgent`).
    Instance(String),
    /// The argument is a module's parameters (`model.parameters()`).
    Parameters,
    Other,
}

/// What every call site of a function passes at one of its parameters, when they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Passed {
    /// An `nn.Module`.
    Module,
    /// A module's parameters (`model.parameters()`).
    Parameters,
    /// A tensor that carries a graph (`meter.update(loss)`).
    Tensor,
}

impl Passed {
    /// Joins what one more call site passes into a slot: `None` until one is seen,
    /// `Some(None)` once two disagree (or one passes something else).
    pub fn see(slot: &mut Option<Option<Passed>>, this: Option<Passed>) {
        *slot = Some(match *slot {
            None => this,
            Some(seen) => seen.filter(|s| Some(*s) == this),
        });
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginSummary {
    pub what: String,
    pub line: u32,
    pub is_loss: bool,
    pub backpropagated: bool,
    pub param: Option<usize>,
    /// Other parameters the graph stands for (see `Origin::or_params`).
    #[serde(default)]
    pub or_params: u32,
    /// `path:line` once the index knows which file it is in.
    pub site: Option<String>,
    /// The value that carries it is a tensor (where it is passed as an argument).
    #[serde(default)]
    pub tensor: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GraphSummary {
    Unknown,
    No,
    Yes(OriginSummary),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PartsSummary {
    Same,
    Elements(Vec<ValueSummary>),
    FirstOnly,
    Keys(Vec<(String, ValueSummary)>),
}

/// A [`Value`] in a form that outlives the file's walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueSummary {
    pub graph: GraphSummary,
    pub kind: Kind,
    pub device: bool,
    pub scalar: bool,
    pub parts: PartsSummary,
}

impl OriginSummary {
    fn of(o: &Origin, line: &dyn Fn(ruff_text_size::TextSize) -> u32) -> Self {
        Self {
            what: o.what.clone(),
            line: line(o.offset),
            is_loss: o.is_loss,
            backpropagated: o.backpropagated,
            param: o.param,
            or_params: o.or_params,
            site: o.site.as_deref().map(str::to_string),
            tensor: false,
        }
    }

    /// The origin, placed in the file at `path` unless it already names where it is.
    #[must_use]
    pub fn placed(mut self, path: &str) -> Self {
        if self.site.is_none() {
            self.site = Some(format!("{path}:{}", self.line));
        }
        self
    }

    pub fn to_origin(&self) -> Origin {
        Origin {
            what: self.what.clone(),
            offset: Default::default(),
            is_loss: self.is_loss,
            backpropagated: self.backpropagated,
            param: self.param,
            site: self.site.as_deref().map(Rc::from),
            through: None,
            or_params: self.or_params,
        }
    }
}

impl ValueSummary {
    pub fn of(v: &Value, line: &dyn Fn(ruff_text_size::TextSize) -> u32) -> Self {
        Self {
            graph: match &v.graph {
                Graph::Unknown => GraphSummary::Unknown,
                Graph::No => GraphSummary::No,
                Graph::Yes(o) => GraphSummary::Yes(OriginSummary::of(o, line)),
            },
            kind: v.kind,
            device: v.device,
            scalar: v.scalar,
            parts: match &v.parts {
                Parts::Same => PartsSummary::Same,
                Parts::FirstOnly => PartsSummary::FirstOnly,
                Parts::Elements(e) => {
                    PartsSummary::Elements(e.iter().map(|x| Self::of(x, line)).collect())
                }
                Parts::Keys(k) => PartsSummary::Keys(
                    k.iter()
                        .map(|(n, x)| (n.to_string(), Self::of(x, line)))
                        .collect(),
                ),
            },
        }
    }

    /// Worth telling other files: a graph somewhere in it (per element and key), or an object
    /// the rules follow (a figure, a module, a loss function).
    pub fn is_informative(&self) -> bool {
        matches!(self.graph, GraphSummary::Yes(_))
            || matches!(self.kind, Kind::Figure | Kind::Module | Kind::LossFn)
            || match &self.parts {
                PartsSummary::Elements(e) => e.iter().any(Self::is_informative),
                PartsSummary::Keys(k) => k.iter().any(|(_, v)| v.is_informative()),
                _ => false,
            }
    }

    /// Every origin placed in the file at `path`.
    #[must_use]
    pub fn placed(self, path: &str) -> Self {
        Self {
            graph: match self.graph {
                GraphSummary::Yes(o) => GraphSummary::Yes(o.placed(path)),
                g => g,
            },
            parts: match self.parts {
                PartsSummary::Elements(e) => {
                    PartsSummary::Elements(e.into_iter().map(|x| x.placed(path)).collect())
                }
                PartsSummary::Keys(k) => {
                    PartsSummary::Keys(k.into_iter().map(|(n, x)| (n, x.placed(path))).collect())
                }
                p => p,
            },
            ..self
        }
    }

    /// Two placed summaries of what one call may return (overrides of one method): a graph in
    /// either is a graph in the result, as `Value::join` says. Placed origins keep their site.
    #[must_use]
    pub fn join(self, other: ValueSummary) -> ValueSummary {
        ValueSummary::of(&self.to_value().join(other.to_value()), &|_| 0)
    }

    pub fn to_value(&self) -> Value {
        Value {
            graph: match &self.graph {
                GraphSummary::Unknown => Graph::Unknown,
                GraphSummary::No => Graph::No,
                GraphSummary::Yes(o) => Graph::Yes(Rc::new(o.to_origin())),
            },
            kind: self.kind,
            device: self.device,
            scalar: self.scalar,
            parts: match &self.parts {
                PartsSummary::Same => Parts::Same,
                PartsSummary::FirstOnly => Parts::FirstOnly,
                PartsSummary::Elements(e) => {
                    Parts::Elements(e.iter().map(Self::to_value).collect())
                }
                PartsSummary::Keys(k) => Parts::Keys(
                    k.iter()
                        .map(|(n, v)| (n.as_str().into(), v.to_value()))
                        .collect(),
                ),
            },
        }
    }
}

/// A class of another file as a file that uses it sees it (its own and inherited methods and
/// attributes, whether it is an `nn.Module`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExternalClass {
    pub is_module: bool,
    /// Some class along its MRO may make parameters or submodules.
    pub makes_parameters: bool,
    pub framework_owned: bool,
    pub methods: Vec<MethodSig>,
    pub attrs: Vec<AttrSummary>,
}

/// What the project tells one file. Empty for a file alone, and for most files of a project:
/// the check of a file whose facts are empty is the check of the file alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExternalFacts {
    /// Classes of other files that this file uses, keyed by the dotted name it uses for them.
    pub classes: BTreeMap<String, ExternalClass>,
    /// This file's classes whose bases are in other files: what they inherit.
    pub inherited: BTreeMap<String, ExternalClass>,
    /// What functions and methods of other files return, keyed as this file calls them
    /// (`utils.viz.plot_step`, `utils.metrics.Metric.update`, `Sub.fit` for a method `Sub`
    /// inherits from a base elsewhere).
    pub returns: BTreeMap<String, ValueSummary>,
    /// Abstract methods of this file's classes (`Class.method`): what the overrides of
    /// subclasses return.
    pub overrides: BTreeMap<String, ValueSummary>,
    /// Positional parameters (after `self`) of this file's functions that calls in other files
    /// pass graphs to.
    pub taints: BTreeMap<String, Vec<Option<OriginSummary>>>,
    /// This file's functions that run once per step or epoch because a caller elsewhere calls
    /// them so: the grain and the caller (`train() in train.py:29`).
    pub cadence: BTreeMap<String, (Grain, String)>,
    /// This file's classes whose objects other files make.
    pub made_elsewhere: BTreeSet<String>,
    /// This file's classes that other files make, each object afresh in a training loop or
    /// renewed by the loop that grows it (`semantic::renewal`): an object lives one epoch,
    /// episode or segment.
    #[serde(default)]
    pub fresh_elsewhere: BTreeSet<String>,
    #[serde(default)]
    /// This file's classes that other files make objects of or subclass: their methods may be
    /// called, and their attributes read, where this file cannot see.
    pub used_elsewhere: BTreeSet<String>,
    /// Attributes other files reset on objects, by name.
    pub reset_elsewhere: BTreeSet<String>,
    /// Functions this file calls that train (backpropagate or step an optimizer, themselves or
    /// through what they call) in another file, keyed as this file calls them
    /// (`utils.train_step`, `Class.method` for `self.method` run by overrides elsewhere).
    pub trains: BTreeSet<String>,
    /// This file's functions that calls in other files run, by key: `true` when one of those
    /// calls runs with autograd on, `false` when every one runs without.
    #[serde(default)]
    pub grad_calls: BTreeMap<String, bool>,
    /// Positional parameters (after `self`) of this file's functions that every call in other
    /// files passes the same kind of object to (an `nn.Module` of the project, a module's
    /// parameters).
    #[serde(default)]
    pub passed_params: BTreeMap<String, Vec<Option<Passed>>>,
    /// Names this file imports that stand for plain constants of other files of the project
    /// (`from helpers import all_characters`).
    #[serde(default)]
    pub constants: BTreeSet<String>,
    /// Names this file imports that stand for another file's functions or context-manager
    /// classes that turn autograd off.
    #[serde(default)]
    pub grad_off: BTreeSet<String>,
    /// Names this file imports that stand for another file's functions that add one of their
    /// parameters into another in place: (target, added, where: `utils.py:6`).
    #[serde(default)]
    pub adds: BTreeMap<String, (usize, usize, String)>,
}

impl ExternalFacts {
    /// The facts of a file alone.
    pub const NONE: ExternalFacts = ExternalFacts {
        classes: BTreeMap::new(),
        inherited: BTreeMap::new(),
        returns: BTreeMap::new(),
        overrides: BTreeMap::new(),
        taints: BTreeMap::new(),
        cadence: BTreeMap::new(),
        made_elsewhere: BTreeSet::new(),
        fresh_elsewhere: BTreeSet::new(),
        used_elsewhere: BTreeSet::new(),
        reset_elsewhere: BTreeSet::new(),
        trains: BTreeSet::new(),
        grad_calls: BTreeMap::new(),
        passed_params: BTreeMap::new(),
        constants: BTreeSet::new(),
        grad_off: BTreeSet::new(),
        adds: BTreeMap::new(),
    };

    pub fn is_empty(&self) -> bool {
        self == &Self::NONE
    }
}

/// The facts of a file alone, to borrow.
pub static NO_FACTS: ExternalFacts = ExternalFacts::NONE;
