//! The semantic model the rules share: imports and torch facts, framework hooks as data, file-wide facts about classes
//! and globals, block scans, the value lattice, and the model of the file as the walk goes
//! through it (`model.rs`), with its answers about values (`eval.rs`), function summaries
//! (`summary.rs`), lifetimes (`lifetime.rs`) and training iterations (`iteration.rs`).
pub mod dead_gradient;
pub mod eval;
pub mod facts;
pub mod guard;
pub mod hook_grad;
pub mod hook_scope;
pub mod hooks;
pub mod iteration;
pub mod lifetime;
pub mod located;
pub mod model;
pub mod mutation;
pub mod names;
pub mod renewal;
pub mod scan;
pub mod summary;
pub mod uses;
pub mod value;
