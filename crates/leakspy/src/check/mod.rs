//! Parts of `leakspy check` that are CLI business: configuration, file discovery, notebooks.
pub mod config;
pub mod discover;
pub mod notebook;
pub mod project;
