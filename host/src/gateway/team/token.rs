//! Who is asking: a client's bearer token checked as a JWT access token of the
//! configured issuer (signature by a key of its JWKS, `iss`, `aud` = the gateway's
//! resource, `exp`/`nbf` within the allowed skew, RS256/ES256/EdDSA only) and turned
//! into a [`Principal`]; an opaque token goes to the introspection endpoint when one is
//! configured (`introspect.rs`). The key set is fetched once, kept, and fetched again when a
//! token names a key it lacks (at most once per [`REFETCH_INTERVAL`], so a stream of
//! made-up key ids cannot make the gateway hammer the identity provider).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::Url;
use serde_json::Value;
use sha2::Digest as _;

use super::TeamError;
use super::config::TeamConfig;
use super::introspect::{Introspection, Rejected};
use crate::auth::mcp::discovery;
use crate::sync::lock;

/// Algorithms a token may be signed with: never `none`, never HMAC (a public key used
/// as an HMAC secret is the classic forgery).
const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

/// Least time between two fetches of the key set caused by an unknown key id.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// A key set older than this is fetched again on the next token (keys rotate).
const MAX_KEY_AGE: Duration = Duration::from_secs(3600);

/// Longest token looked at: real access tokens are a few kilobytes.
const MAX_TOKEN_BYTES: usize = 16 << 10;

/// How long a verified token is believed without checking its signature again (never
/// past its `exp`): a client sends the same token with every request.
const VERIFIED_FOR: Duration = Duration::from_secs(60);

/// Tokens remembered as verified; the memory is emptied when full.
const MAX_VERIFIED: usize = 10_000;

/// How long an opaque token the introspection endpoint refused is refused without
/// asking again: a client repeating a dead token must not make the gateway hammer the
/// identity provider.
const REFUSED_FOR: Duration = Duration::from_secs(30);

/// Who a request runs as: the token's subject, its groups and its scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub sub: String,
    pub groups: Vec<String>,
    pub scopes: Vec<String>,
}

/// Why a token was not accepted: said to the client in `WWW-Authenticate`, and in the
/// log without the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token at all (401, no error code: RFC 6750 §3.1).
    Missing,
    /// Not a valid token for this gateway (401 `invalid_token`).
    Invalid(String),
    /// Valid, but without a scope the gateway requires (403 `insufficient_scope`).
    Scope(Vec<String>),
    /// The identity provider's keys cannot be had now (503: retry).
    Unavailable(String),
}

/// Checks tokens for one gateway configuration.
pub struct Verifier {
    issuer: String,
    audience: String,
    jwks_uri: Option<Url>,
    groups_claim: String,
    required_scopes: Vec<String>,
    leeway: u64,
    keys: tokio::sync::Mutex<Keys>,
    /// When an unknown key id last caused a fetch.
    last_refetch: Mutex<Option<Instant>>,
    /// Tokens verified lately, by their SHA-256, with whom they name and until when.
    verified: Mutex<HashMap<[u8; 32], (Principal, Instant)>>,
    /// Where opaque tokens are introspected, when configured.
    introspection: Option<Introspection>,
    /// Opaque tokens the endpoint refused lately, by SHA-256, with why and until when.
    refused: Mutex<HashMap<[u8; 32], (String, Instant)>>,
}

#[derive(Default)]
struct Keys {
    set: Vec<Jwk>,
    fetched: Option<Instant>,
    /// When a fetch last failed: the next is tried only [`REFETCH_INTERVAL`] later, so
    /// an identity provider that is down does not hold every request for its timeout.
    failed: Option<Instant>,
    /// Where the keys are, once found (from the config or the issuer's metadata).
    uri: Option<Url>,
}

impl Verifier {
    pub fn new(config: &TeamConfig) -> Verifier {
        Verifier {
            issuer: config.issuer.clone(),
            audience: config.resource.to_string(),
            jwks_uri: config.jwks_uri.clone(),
            groups_claim: config.groups_claim.clone(),
            required_scopes: config.required_scopes.clone(),
            leeway: config.leeway_seconds,
            keys: tokio::sync::Mutex::new(Keys::default()),
            last_refetch: Mutex::new(None),
            verified: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
            introspection: config
                .introspection
                .clone()
                .map(|i| Introspection::new(i.endpoint, i.client_id, i.client_secret)),
        }
    }

    /// Fetches the key set now (at start: a gateway that cannot reach its identity
    /// provider says so before it serves anyone).
    pub async fn load(&self) -> Result<usize, TeamError> {
        let mut keys = self.keys.lock().await;
        self.fetch(&mut keys).await?;
        Ok(keys.set.len())
    }

    /// Whether a key set is in hand (the gateway is ready).
    pub async fn ready(&self) -> bool {
        !self.keys.lock().await.set.is_empty()
    }

    /// The principal `authorization` (the whole header value) names, or why not.
    pub async fn check(&self, authorization: Option<&str>) -> Result<Principal, Refusal> {
        let token = bearer(authorization)?;
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some((principal, until)) = self.lock_verified().get(&digest)
            && Instant::now() < *until
        {
            return Ok(principal.clone());
        }
        let (principal, exp) = self.verify(token, &digest).await?;
        // Believed again until `exp` (minus the leeway it was given) or VERIFIED_FOR.
        let left = exp.saturating_sub(crate::clock::now());
        let until = Instant::now() + VERIFIED_FOR.min(Duration::from_secs(left));
        let mut verified = self.lock_verified();
        if verified.len() >= MAX_VERIFIED {
            verified.clear();
        }
        verified.insert(digest, (principal.clone(), until));
        Ok(principal)
    }

    fn lock_verified(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Principal, Instant)>> {
        lock(&self.verified)
    }

    /// The whole check of a token not seen lately; its principal and its `exp`.
    async fn verify(&self, token: &str, digest: &[u8; 32]) -> Result<(Principal, u64), Refusal> {
        // Not shaped like a JWT: an opaque token, for the introspection endpoint.
        if token.split('.').count() != 3
            && let Some(i) = &self.introspection
        {
            {
                let mut refused = lock(&self.refused);
                if let Some((why, until)) = refused.get(digest)
                    && Instant::now() < *until
                {
                    return Err(Refusal::Invalid(why.clone()));
                }
                refused.retain(|_, (_, until)| Instant::now() < *until);
            }
            let claims = match i
                .claims(token, &self.issuer, &self.audience, self.leeway)
                .await
            {
                Ok(c) => c,
                Err(Rejected::Invalid(why)) => {
                    let mut refused = lock(&self.refused);
                    if refused.len() < MAX_VERIFIED {
                        refused.insert(*digest, (why.clone(), Instant::now() + REFUSED_FOR));
                    }
                    return Err(Refusal::Invalid(why));
                }
                Err(Rejected::Unavailable(why)) => return Err(Refusal::Unavailable(why)),
            };
            let principal = self.principal(&claims)?;
            self.scoped(&principal)?;
            let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
            return Ok((principal, exp));
        }
        let claims = self.signed_claims(token, &self.audience).await?;
        let principal = self.principal(&claims)?;
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        self.scoped(&principal)?;
        Ok((principal, exp))
    }

    /// The claims of a JWT the issuer signed for `audience`: an allowed algorithm, the
    /// key its `kid` names, `iss`, `aud`, `exp` and `nbf` within the leeway, and a `sub`.
    async fn signed_claims(&self, token: &str, audience: &str) -> Result<Value, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("not a JWT: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "signed with {:?}; accepted: RS256, ES256, EdDSA",
                header.alg
            )));
        }
        let key = self.key_for(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.leeway = self.leeway;
        validation.validate_nbf = true;
        validation.set_audience(&[audience]);
        validation.set_issuer(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        jsonwebtoken::decode::<Value>(token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| Refusal::Invalid(reason(&e)))
    }

    /// The `sub` of an OpenID Connect ID token the issuer signed for `client_id` (the
    /// gateway as a browser's client) with this `nonce`; or why it is not believed.
    pub async fn id_token(
        &self,
        token: &str,
        client_id: &str,
        nonce: &str,
    ) -> Result<String, Refusal> {
        let claims = self.signed_claims(token, client_id).await?;
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(Refusal::Invalid(
                "the ID token is not the one this sign-in asked for (nonce)".into(),
            ));
        }
        Ok(self.principal(&claims)?.sub)
    }

    /// Refuses a principal without every required scope.
    fn scoped(&self, principal: &Principal) -> Result<(), Refusal> {
        let missing: Vec<String> = self
            .required_scopes
            .iter()
            .filter(|s| !principal.scopes.contains(s))
            .cloned()
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Refusal::Scope(missing))
        }
    }

    fn principal(&self, claims: &Value) -> Result<Principal, Refusal> {
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control))
            .ok_or_else(|| Refusal::Invalid("the token's sub is not a usable name".into()))?;
        // `scope` is a space-separated string (RFC 9068); some providers send `scp`, a list.
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split_whitespace().map(str::to_owned).collect(),
            (_, Some(v)) => strings(v),
            _ => Vec::new(),
        };
        let groups = claims
            .get(&self.groups_claim)
            .map(strings)
            .unwrap_or_default();
        Ok(Principal {
            sub: sub.to_owned(),
            groups,
            scopes,
        })
    }

    /// The key `kid` names (the one usable key when the token names none), fetching
    /// the set again when it is old or, rate-limited, when the id is unknown.
    async fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let mut keys = self.keys.lock().await;
        let stale = keys.fetched.is_none_or(|t| t.elapsed() > MAX_KEY_AGE);
        let resting = keys.failed.is_some_and(|t| t.elapsed() < REFETCH_INTERVAL);
        if stale
            && !resting
            && let Err(e) = self.fetch(&mut keys).await
        {
            // An old set still serves while the provider is away.
            keys.failed = Some(Instant::now());
            tracing::warn!("{e}; using the key set fetched before, if any");
        }
        if keys.set.is_empty() {
            return Err(Refusal::Unavailable(
                "the identity provider's keys could not be fetched".into(),
            ));
        }
        if let Some(k) = pick(&keys.set, kid, alg)? {
            return Ok(k);
        }
        if kid.is_some() && self.may_refetch() {
            if let Err(e) = self.fetch(&mut keys).await {
                tracing::warn!("{e}");
            }
            if let Some(k) = pick(&keys.set, kid, alg)? {
                return Ok(k);
            }
        }
        Err(Refusal::Invalid(
            "signed by a key the issuer does not list".into(),
        ))
    }

    fn may_refetch(&self) -> bool {
        let mut last = lock(&self.last_refetch);
        if last.is_some_and(|t| t.elapsed() < REFETCH_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        true
    }

    async fn fetch(&self, keys: &mut Keys) -> Result<(), TeamError> {
        let http = crate::auth::oauth::http_client().map_err(|e| TeamError::Keys(e.to_string()))?;
        let uri = match (&keys.uri, &self.jwks_uri) {
            (Some(u), _) | (None, Some(u)) => u.clone(),
            (None, None) => self.discover(http).await?,
        };
        let doc = discovery::get_json(http, &uri)
            .await
            .map_err(|e| TeamError::Keys(e.to_string()))?
            .ok_or_else(|| TeamError::Keys(format!("no key set at {uri}")))?;
        let set: JwkSet = serde_json::from_value(doc)
            .map_err(|e| TeamError::Keys(format!("the key set at {uri} does not parse: {e}")))?;
        // Symmetric keys never verify anything here; keys of other algorithms neither.
        let usable: Vec<Jwk> = set.keys.into_iter().filter(usable).collect();
        if usable.is_empty() {
            return Err(TeamError::Keys(format!(
                "the key set at {uri} has no RS256, ES256 or EdDSA key"
            )));
        }
        tracing::debug!(keys = usable.len(), "fetched the issuer's key set");
        keys.set = usable;
        keys.fetched = Some(Instant::now());
        keys.failed = None;
        keys.uri = Some(uri);
        Ok(())
    }

    /// `jwks_uri` from the issuer's RFC 8414 or OpenID Connect metadata.
    async fn discover(&self, http: &reqwest::Client) -> Result<Url, TeamError> {
        let issuer = Url::parse(&self.issuer).map_err(|e| TeamError::Keys(e.to_string()))?;
        let (doc, _) = discovery::metadata_document(http, &issuer, true)
            .await
            .map_err(|e| TeamError::Keys(e.to_string()))?
            .ok_or_else(|| {
                TeamError::Keys(format!(
                    "{} publishes no metadata; set jwks_uri in the gateway config",
                    self.issuer
                ))
            })?;
        let uri = doc.get("jwks_uri").and_then(Value::as_str).ok_or_else(|| {
            TeamError::Keys(format!("{}'s metadata has no jwks_uri", self.issuer))
        })?;
        let uri = Url::parse(uri).map_err(|e| TeamError::Keys(format!("jwks_uri: {e}")))?;
        discovery::check_url(&uri, "jwks_uri").map_err(|e| TeamError::Keys(e.to_string()))?;
        Ok(uri)
    }
}

/// The token in an `Authorization: Bearer` header.
pub fn bearer(authorization: Option<&str>) -> Result<&str, Refusal> {
    let value = authorization.ok_or(Refusal::Missing)?;
    let (scheme, token) = value.split_once(' ').ok_or(Refusal::Missing)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Refusal::Missing);
    }
    let token = token.trim();
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
        return Err(Refusal::Invalid("the token is empty or too long".into()));
    }
    Ok(token)
}

fn usable(k: &Jwk) -> bool {
    let right_use = k
        .common
        .public_key_use
        .as_ref()
        .is_none_or(|u| *u == jsonwebtoken::jwk::PublicKeyUse::Signature);
    right_use && !matches!(k.algorithm, AlgorithmParameters::OctetKey(_))
}

/// The key for `kid` and `alg`: `Ok(None)` when the set has none; an error when the
/// key named is of another kind than the algorithm (an RSA key for ES256).
fn pick(set: &[Jwk], kid: Option<&str>, alg: Algorithm) -> Result<Option<DecodingKey>, Refusal> {
    let fits = |k: &Jwk| {
        let kind_fits = matches!(
            (&k.algorithm, alg),
            (AlgorithmParameters::RSA(_), Algorithm::RS256)
                | (AlgorithmParameters::EllipticCurve(_), Algorithm::ES256)
                | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
        );
        // A key that says which algorithm it is for is used for that one only.
        let alg_fits = k
            .common
            .key_algorithm
            .is_none_or(|a| format!("{a:?}") == format!("{alg:?}"));
        kind_fits && alg_fits
    };
    let chosen = match kid {
        Some(kid) => {
            let Some(k) = set.iter().find(|k| k.common.key_id.as_deref() == Some(kid)) else {
                return Ok(None);
            };
            if !fits(k) {
                return Err(Refusal::Invalid(format!(
                    "the key it names is not a {alg:?} key"
                )));
            }
            k
        }
        None => {
            let mut candidates = set.iter().filter(|k| fits(k));
            match (candidates.next(), candidates.next()) {
                (Some(k), None) => k,
                (None, _) => return Ok(None),
                (Some(_), Some(_)) => {
                    return Err(Refusal::Invalid(
                        "the token names no key id and the issuer has several keys".into(),
                    ));
                }
            }
        }
    };
    DecodingKey::from_jwk(chosen)
        .map(Some)
        .map_err(|e| Refusal::Invalid(format!("the issuer's key does not load: {e}")))
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => {
            let set: HashSet<&str> = a.iter().filter_map(Value::as_str).collect();
            let mut out: Vec<String> = set.into_iter().map(str::to_owned).collect();
            out.sort();
            out
        }
        _ => Vec::new(),
    }
}

/// What went wrong, in words a client's user can act on (never the token).
fn reason(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidAudience => "the token is not for this gateway (aud)".into(),
        K::InvalidIssuer => "the token is from another issuer (iss)".into(),
        K::InvalidSignature => "the token's signature does not verify".into(),
        K::InvalidAlgorithm => "the token's algorithm does not fit its key".into(),
        K::MissingRequiredClaim(c) => format!("the token has no {c} claim"),
        _ => format!("the token does not parse: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_header_carries_a_token() {
        assert_eq!(bearer(None), Err(Refusal::Missing));
        assert_eq!(bearer(Some("Basic abc")), Err(Refusal::Missing));
        assert_eq!(bearer(Some("Bearer")), Err(Refusal::Missing));
        assert!(matches!(bearer(Some("Bearer  ")), Err(Refusal::Invalid(_))));
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert!(matches!(bearer(Some(&long)), Err(Refusal::Invalid(_))));
        assert_eq!(bearer(Some("bearer x.y.z")), Ok("x.y.z"));
    }

    #[test]
    fn groups_and_scopes_come_as_lists_or_strings() {
        assert_eq!(strings(&serde_json::json!(["b", "a", "b", 3])), ["a", "b"]);
        assert_eq!(strings(&serde_json::json!("eng")), ["eng"]);
        assert!(strings(&serde_json::json!({"x": 1})).is_empty());
    }

    #[test]
    fn a_symmetric_key_is_never_used() {
        let set: JwkSet = serde_json::from_value(serde_json::json!({"keys": [
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
        ]}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(!set.keys.iter().any(usable));
    }
}
