//! Bytes as lower-case hexadecimal: digests, tokens and ids in names and records.

/// `bytes` as lower-case hexadecimal, two digits a byte.
pub fn lower(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_lower_case_digits_a_byte() {
        assert_eq!(super::lower(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert_eq!(super::lower(&[]), "");
    }
}
