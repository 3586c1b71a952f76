//! Inline SVG line charts with human axis units (no scripts, no fonts to load).
