//! The semantic model the rules share: imports and torch facts, file-wide facts about classes
//! and globals, block scans, and the value lattice.
pub mod facts;
pub mod mutation;
pub mod names;
pub mod scan;
pub mod value;
