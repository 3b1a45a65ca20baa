//! The manifest parser on arbitrary text: it must return a manifest or a
//! located error, never panic or hang.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use toolhost::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = Manifest::parse(
        Path::new("fuzz.toml"),
        Path::new("/nonexistent/fuzz"),
        text,
    ) {
        // Rendering the message walks the spans back into the text.
        let _ = error.to_string();
    }
});
