//! JWT client assertions (RFC 7523 §2.2, `private_key_jwt`): a short-lived token,
//! signed with the client's own private key, that authenticates it to a token endpoint
//! instead of a shared secret. ES256 (P-256) and RS256 keys, read from PEM (PKCS#8, or
//! PKCS#1 for RSA). The key never leaves this module: it has no `Debug` output and no
//! error names its content.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair};
use serde_json::json;

use super::AuthError;

/// The `client_assertion_type` of a JWT assertion.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long an assertion is valid (RFC 7523 asks for a short time).
const LIFETIME_SECS: u64 = 120;

/// A client's signing key.
pub struct SigningKey {
    kind: Kind,
}

enum Kind {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({}, ***)", self.algorithm())
    }
}

impl SigningKey {
    /// Parses a PEM private key: `PRIVATE KEY` (PKCS#8, P-256 or RSA) or `RSA PRIVATE
    /// KEY` (PKCS#1). Errors say what is wrong with the file, never what is in it.
    pub fn from_pem(pem: &str) -> Result<SigningKey, AuthError> {
        let (label, der) = pem_block(pem)?;
        let rng = SystemRandom::new();
        let kind = match label.as_str() {
            "PRIVATE KEY" => {
                match EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    &der,
                    &rng,
                ) {
                    Ok(k) => Kind::Es256(k),
                    Err(_) => Kind::Rs256(RsaKeyPair::from_pkcs8(&der).map_err(|_| {
                        bad("it is neither a P-256 (ES256) nor an RSA (RS256) private key")
                    })?),
                }
            }
            "RSA PRIVATE KEY" => Kind::Rs256(
                RsaKeyPair::from_der(&der).map_err(|_| bad("the RSA private key is malformed"))?,
            ),
            "EC PRIVATE KEY" => {
                return Err(bad(
                    "an SEC1 \"EC PRIVATE KEY\" is not read; convert it with `openssl pkcs8 -topk8 -nocrypt -in KEY`",
                ));
            }
            "ENCRYPTED PRIVATE KEY" => {
                return Err(bad("an encrypted private key cannot be used unattended"));
            }
            other => {
                return Err(bad(&format!(
                    "a PEM block of type {other:?} is not a private key"
                )));
            }
        };
        Ok(SigningKey { kind })
    }

    /// `ES256` or `RS256`.
    pub fn algorithm(&self) -> &'static str {
        match self.kind {
            Kind::Es256(_) => "ES256",
            Kind::Rs256(_) => "RS256",
        }
    }

    /// The public key, for tests and for registering the client (SEC1 point for ES256,
    /// PKCS#1 for RS256).
    pub fn public_key(&self) -> Vec<u8> {
        match &self.kind {
            Kind::Es256(k) => k.public_key().as_ref().to_vec(),
            Kind::Rs256(k) => k.public_key().as_ref().to_vec(),
        }
    }

    /// A client assertion for `client_id` at `audience` (the authorization server's
    /// issuer), issued at `now` (Unix seconds), with a random `jti`.
    pub fn assertion(
        &self,
        client_id: &str,
        audience: &str,
        now: u64,
    ) -> Result<String, AuthError> {
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_SECS,
            "jti": super::oauth::random_token(16)?,
        });
        self.sign(&json!({"alg": self.algorithm(), "typ": "JWT"}), &claims)
    }

    /// A compact JWS of `claims` under `header`.
    pub fn sign(
        &self,
        header: &serde_json::Value,
        claims: &serde_json::Value,
    ) -> Result<String, AuthError> {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = SystemRandom::new();
        let failed = || AuthError::Config("signing the client assertion failed".into());
        let sig = match &self.kind {
            Kind::Es256(k) => k
                .sign(&rng, input.as_bytes())
                .map_err(|_| failed())?
                .as_ref()
                .to_vec(),
            Kind::Rs256(k) => {
                let mut sig = vec![0u8; k.public().modulus_len()];
                k.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .map_err(|_| failed())?;
                sig
            }
        };
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig)))
    }
}

fn bad(why: &str) -> AuthError {
    AuthError::Config(format!("the private key cannot be used: {why}"))
}

/// The first PEM block: its label and DER bytes.
fn pem_block(pem: &str) -> Result<(String, Vec<u8>), AuthError> {
    let mut lines = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("-----BEGIN "));
    let label = lines
        .next()
        .and_then(|l| l.strip_prefix("-----BEGIN "))
        .and_then(|l| l.strip_suffix("-----"))
        .ok_or_else(|| bad("no PEM \"-----BEGIN ...-----\" line"))?
        .to_owned();
    let end = format!("-----END {label}-----");
    let mut body = String::new();
    let mut ended = false;
    for l in lines {
        if l == end {
            ended = true;
            break;
        }
        if l.contains(':') {
            // RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`): an encrypted legacy key.
            return Err(bad("an encrypted private key cannot be used unattended"));
        }
        body.push_str(l);
    }
    if !ended {
        return Err(bad("the PEM block has no END line"));
    }
    let der = STANDARD
        .decode(body.as_bytes())
        .map_err(|_| bad("the PEM block is not valid base64"))?;
    Ok((label, der))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A P-256 key made for this test run only.
    fn es256_pem() -> String {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap_or_else(|e| panic!("{e}"));
        let b64 = STANDARD.encode(doc.as_ref());
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    fn parts(jwt: &str) -> Vec<Vec<u8>> {
        jwt.split('.')
            .map(|p| URL_SAFE_NO_PAD.decode(p).unwrap_or_else(|e| panic!("{e}")))
            .collect()
    }

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_names_the_client() {
        let key = SigningKey::from_pem(&es256_pem()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key.algorithm(), "ES256");
        let jwt = key
            .assertion("svc-client", "https://as.example", 1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        let p = parts(&jwt);
        assert_eq!(p.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&p[0]).unwrap_or_else(|e| panic!("{e}"));
        let claims: serde_json::Value =
            serde_json::from_slice(&p[1]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(header["alg"], "ES256");
        assert_eq!(claims["iss"], "svc-client");
        assert_eq!(claims["sub"], "svc-client");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1_800_000_000u64 + LIFETIME_SECS);
        assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));
        let signed = jwt.rsplit_once('.').map(|(s, _)| s).unwrap_or_default();
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            key.public_key(),
        );
        assert!(public.verify(signed.as_bytes(), &p[2]).is_ok());
        // Another message does not verify: the check above could fail.
        assert!(public.verify(b"something else", &p[2]).is_err());
        // Two assertions differ (their jti), so neither can be replayed as the other.
        let again = key
            .assertion("svc-client", "https://as.example", 1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(jwt, again);
    }

    #[test]
    fn an_rs256_assertion_verifies_with_the_public_key() {
        // A 2048-bit key generated for this test only (`openssl genpkey -algorithm RSA`).
        let key = SigningKey::from_pem(include_str!("testdata/rs256-test-only.pem"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(key.algorithm(), "RS256");
        let jwt = key
            .assertion("svc", "https://as.example/", 1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        let p = parts(&jwt);
        let header: serde_json::Value =
            serde_json::from_slice(&p[0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(header["alg"], "RS256");
        let signed = jwt.rsplit_once('.').map(|(s, _)| s).unwrap_or_default();
        let public = signature::UnparsedPublicKey::new(
            &signature::RSA_PKCS1_2048_8192_SHA256,
            key.public_key(),
        );
        assert!(public.verify(signed.as_bytes(), &p[2]).is_ok());
        assert!(public.verify(b"tampered", &p[2]).is_err());
    }

    #[test]
    fn unusable_keys_are_refused_without_showing_them() {
        let pem = es256_pem();
        let secret_line = pem.lines().nth(1).unwrap_or_default().to_owned();
        let cases = [
            String::new(),
            "not a key".to_owned(),
            pem.replace("-----END PRIVATE KEY-----", ""),
            pem.replace("PRIVATE KEY", "EC PRIVATE KEY"),
            pem.replace("PRIVATE KEY", "CERTIFICATE"),
            pem.replacen(&secret_line, &secret_line[..secret_line.len() / 2], 1),
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END RSA PRIVATE KEY-----".to_owned(),
        ];
        for case in cases {
            let e = SigningKey::from_pem(&case)
                .err()
                .unwrap_or_else(|| panic!("accepted {case:?}"))
                .to_string();
            assert!(e.starts_with("the private key cannot be used"), "{e}");
            assert!(!e.contains(&secret_line[..20]), "{e}");
        }
        let key = SigningKey::from_pem(&pem).unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{key:?}").contains(&secret_line[..20]));
    }
}
