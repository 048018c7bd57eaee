//! Random numbers from the operating system (`getrandom`), for jitter and
//! lock values.

/// 64 random bits from the operating system. Should the system refuse
/// (it does not on supported platforms), the standard library's randomly
/// keyed hasher stands in: still different in every process and call.
pub(crate) fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    match getrandom::getrandom(&mut bytes) {
        Ok(()) => u64::from_ne_bytes(bytes),
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        }
    }
}

/// 128 random bits as 32 hex digits: a lock value, or a login's id, that
/// no other process holds.
pub(crate) fn random_hex() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// A random number in `[0, 1)`.
pub(crate) fn random_unit() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_values_are_128_bits_and_differ() {
        let (a, b) = (random_hex(), random_hex());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn draws_differ_and_stay_in_range() {
        let draws: std::collections::HashSet<u64> = (0..1000).map(|_| random_u64()).collect();
        assert_eq!(draws.len(), 1000);
        for _ in 0..10_000 {
            let x = random_unit();
            assert!((0.0..1.0).contains(&x), "{x}");
        }
    }
}
