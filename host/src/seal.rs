//! Authenticated encryption (AES-256-GCM, ring's) of what edgar hands out or stores and
//! must get back unaltered: a client's session id, an upstream token in the shared
//! database. A sealed value is its random 96-bit nonce followed by the ciphertext and
//! tag; what it is bound to (associated data) must match to open it.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// A key to seal and open with; never shown by `Debug`.
pub struct Sealer(LessSafeKey);

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

/// A new key from the OS random source (of this process only, unless it is kept).
pub fn random_key() -> std::io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key)
        .map_err(|e| std::io::Error::other(format!("the OS random source failed: {e}")))?;
    Ok(key)
}

impl Sealer {
    pub fn new(key: &[u8; 32]) -> Sealer {
        // AES-256 takes any 32 bytes: ring refuses only a wrong length.
        match UnboundKey::new(&AES_256_GCM, key) {
            Ok(k) => Sealer(LessSafeKey::new(k)),
            Err(_) => unreachable!("a 32-byte key is an AES-256 key"),
        }
    }

    /// A key of this process only, from the OS random source.
    pub fn random() -> std::io::Result<Sealer> {
        Ok(Sealer::new(&random_key()?))
    }

    /// `plain` sealed and bound to `bound` (each part length-prefixed, so no two lists
    /// of parts bind the same way); `None` only if the OS random source fails.
    pub fn seal(&self, bound: &[&str], plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad(bound)),
                &mut sealed,
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Some(out)
    }

    /// What [`Sealer::seal`] sealed with this key and the same `bound`; `None` for
    /// anything else (another key, another binding, a changed byte, a cut value).
    pub fn open(&self, bound: &[&str], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut body = body.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(aad(bound)), &mut body)
            .ok()?;
        Some(plain.to_vec())
    }
}

fn aad(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for part in parts {
        out.extend_from_slice(&(part.len() as u64).to_be_bytes());
        out.extend_from_slice(part.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_whole_with_its_key_and_binding() {
        let s = Sealer::new(&[7; 32]);
        let sealed = s.seal(&["up", "ada"], b"secret").unwrap_or_default();
        assert_eq!(
            s.open(&["up", "ada"], &sealed).as_deref(),
            Some(&b"secret"[..])
        );
        assert!(!sealed.windows(6).any(|w| w == b"secret"));
        assert_ne!(
            s.seal(&["up", "ada"], b"secret"),
            Some(sealed.clone()),
            "fresh nonce"
        );
        assert_eq!(s.open(&["up", "bob"], &sealed), None);
        assert_eq!(
            s.open(&["upa", "da"], &sealed),
            None,
            "parts are length-bound"
        );
        assert_eq!(Sealer::new(&[8; 32]).open(&["up", "ada"], &sealed), None);
        for i in 0..sealed.len() {
            let mut flipped = sealed.clone();
            flipped[i] ^= 1;
            assert_eq!(s.open(&["up", "ada"], &flipped), None, "byte {i}");
        }
        for n in 0..sealed.len() {
            assert_eq!(s.open(&["up", "ada"], &sealed[..n]), None, "cut at {n}");
        }
        assert_eq!(format!("{s:?}"), "Sealer(..)");
    }
}
