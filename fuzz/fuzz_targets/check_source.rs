//! The front end of `check`: any bytes that are UTF-8 are parsed and every
//! rule runs; fixes applied to a file that parsed must leave a file that
//! still parses. Nothing may panic.
#![no_main]

use leakspy_lint::{apply_fixes, check_source, Applicability, RuleSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let rules = RuleSet::default();
    let checked = check_source(source, &rules);
    if checked.syntax_error.is_some() {
        return;
    }
    let fixed = apply_fixes(source, &checked.diagnostics, Applicability::Unsafe);
    if fixed.applied > 0 {
        let again = check_source(&fixed.source, &rules);
        assert!(
            again.syntax_error.is_none(),
            "a fix broke the file: {:?}",
            again.syntax_error
        );
    }
});
