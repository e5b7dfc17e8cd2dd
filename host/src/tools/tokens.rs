//! Counting tokens the way a model would, with a real BPE (o200k_base) whose data is
//! compiled into the binary: nothing is downloaded. Loaded on first use only.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    BPE.get_or_init(|| match tiktoken_rs::o200k_base() {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::warn!(
                "cannot load the o200k_base tokenizer ({e}); estimating 4 bytes a token"
            );
            None
        }
    })
    .as_ref()
}

/// Tokens in `text` (o200k_base; a 4-bytes-a-token estimate if the tokenizer failed to load).
pub fn count(text: &str) -> usize {
    match bpe() {
        Some(b) => b.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_real_tokens() {
        assert_eq!(super::count(""), 0);
        assert_eq!(super::count("hello world"), 2);
        assert!(super::count(&"schema ".repeat(100)) >= 100);
    }
}
