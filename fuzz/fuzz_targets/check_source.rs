//! `check`'s front end and every rule on any input (see fuzz/bodies.rs).
#![no_main]

include!("../bodies.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check_source_body(data));
