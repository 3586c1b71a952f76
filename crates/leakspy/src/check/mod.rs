//! Parts of `leakspy check` that are CLI business: configuration and file discovery.
pub mod config;
pub mod discover;
