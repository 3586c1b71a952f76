//! Human units for evidence strings.

use serde::Serialize;

/// What the y values of a series measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueUnit {
    /// Bytes, shown in KiB/MiB/GiB.
    Bytes,
    /// Plain counts (objects, tensors).
    Count,
    /// Steps per second.
    StepsPerSecond,
}

/// `1536` -> `"1.5 KiB"`; binary units, three significant digits.
pub fn fmt_bytes(b: f64) -> String {
    let a = b.abs();
    let sign = if b < 0.0 { "-" } else { "" };
    const UNITS: [(&str, f64); 5] = [
        ("TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("GiB", 1024.0 * 1024.0 * 1024.0),
        ("MiB", 1024.0 * 1024.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    for (name, size) in UNITS {
        if a >= size * 0.9995 || name == "B" {
            let v = a / size;
            if name == "B" {
                return format!("{sign}{v:.0} B");
            }
            return format!("{sign}{} {name}", three_digits(v));
        }
    }
    unreachable!()
}

/// `v` in the binary unit that [`fmt_bytes`] would pick for `reference`, so
/// that a slope and its interval read in one unit ("0.99 MiB .. 1.01 MiB").
pub fn fmt_bytes_as(v: f64, reference: f64) -> String {
    let r = reference.abs();
    const K: f64 = 1024.0;
    let (name, size) = if r >= K * K * K * K * 0.9995 {
        ("TiB", K * K * K * K)
    } else if r >= K * K * K * 0.9995 {
        ("GiB", K * K * K)
    } else if r >= K * K * 0.9995 {
        ("MiB", K * K)
    } else if r >= K * 0.9995 {
        ("KiB", K)
    } else {
        return format!("{v:.0} B");
    };
    let x = v / size;
    let digits = if r / size >= 100.0 {
        0
    } else if r / size >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$} {name}")
}

/// `75000.0` -> `"75,000"`: a whole number with thousands separators.
pub fn fmt_thousands(v: f64) -> String {
    let digits = format!("{v:.0}");
    let (sign, digits) = match digits.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", digits.as_str()),
    };
    let mut out = String::from(sign);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Like [`fmt_bytes`] with an explicit `+` on growth.
pub fn fmt_signed_bytes(b: f64) -> String {
    if b > 0.0 {
        format!("+{}", fmt_bytes(b))
    } else {
        fmt_bytes(b)
    }
}

/// A value in its unit.
pub fn fmt_value(v: f64, unit: ValueUnit) -> String {
    match unit {
        ValueUnit::Bytes => fmt_bytes(v),
        ValueUnit::Count => {
            if v.fract() == 0.0 && v.abs() < 1e15 {
                format!("{v:.0}")
            } else {
                three_digits_signed(v)
            }
        }
        ValueUnit::StepsPerSecond => format!("{} steps/s", three_digits_signed(v)),
    }
}

fn three_digits_signed(v: f64) -> String {
    if v < 0.0 {
        format!("-{}", three_digits(-v))
    } else {
        three_digits(v)
    }
}

fn three_digits(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else if v >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(fmt_thousands(75000.0), "75,000");
        assert_eq!(fmt_thousands(999.0), "999");
        assert_eq!(fmt_thousands(1234567.0), "1,234,567");
        assert_eq!(fmt_thousands(-1234.0), "-1,234");
    }

    #[test]
    fn bytes() {
        assert_eq!(fmt_bytes(0.0), "0 B");
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(1536.0), "1.50 KiB");
        assert_eq!(fmt_bytes(1048576.0), "1.00 MiB");
        assert_eq!(fmt_bytes(-3.5 * 1048576.0), "-3.50 MiB");
        assert_eq!(fmt_bytes(700.0 * 1048576.0), "700 MiB");
        assert_eq!(fmt_bytes(175.0 * 1073741824.0), "175 GiB");
        assert_eq!(fmt_signed_bytes(2048.0), "+2.00 KiB");
        assert_eq!(fmt_bytes_as(0.994 * 1048576.0, 1048576.0), "0.99 MiB");
        assert_eq!(fmt_bytes_as(-1048576.0, 20.0 * 1048576.0), "-1.0 MiB");
    }

    #[test]
    fn counts() {
        assert_eq!(fmt_value(96.0, ValueUnit::Count), "96");
        assert_eq!(fmt_value(2.5, ValueUnit::Count), "2.50");
        assert_eq!(fmt_value(-2.5, ValueUnit::StepsPerSecond), "-2.50 steps/s");
    }
}
