//! Random bytes from the operating system, on every platform (the `getrandom` crate: Linux's
//! `getrandom(2)`, macOS's `getentropy`, the BSDs' equivalents), for ids that must never repeat
//! across processes. Owns: nothing else. Must not touch: any platform call of its own.

/// Fills `buf` with random bytes from the operating system. Panics only if the OS has no
/// source of randomness at all (then no id this crate mints could be trusted to be unique).
#[cfg_attr(all(target_os = "linux", not(feature = "acp")), allow(dead_code))]
pub(crate) fn random_bytes(buf: &mut [u8]) {
    if let Err(error) = getrandom::fill(buf) {
        panic!("acp-bash: the operating system gave no random bytes: {error}");
    }
}

#[cfg(test)]
mod tests {
    /// Two draws of 16 bytes differ (the chance that they don't is 2^-128), and a draw is not
    /// left all zeros.
    #[test]
    fn random_bytes_fill_the_whole_buffer_anew_each_time() {
        let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
        super::random_bytes(&mut a);
        super::random_bytes(&mut b);
        assert_ne!(a, [0u8; 16]);
        assert_ne!(a, b);
    }
}
