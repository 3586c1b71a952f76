//! The trace reader, the diagnosis and the renderers on any input (see
//! fuzz/bodies.rs).
#![no_main]

include!("../bodies.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| trace_reader_body(data));
