//! Credentials written into a command line or a URL, masked for showing: a URL's
//! password, a query parameter named like a credential (`?api_key=...`), the value of a
//! flag named like one (`--token X`, `--api-key=X`) and an argument `NAME=VALUE` whose
//! name is one (`-e GITHUB_TOKEN=...`). Only by name and place, never by the value's
//! shape (that is the guard's secret rules, `guard::findings`); what is not masked is
//! kept exactly as written, and so is a `${VAR}` reference in a credential's place.

/// What a masked value is replaced with.
pub const MASK: &str = "***";

/// Whether a variable, header, flag or parameter is named like a credential
/// (`GITHUB_TOKEN`, `x-api-key`, `--client-secret`, `password`, `SSH_KEY`), and not
/// like where one is found (`--token-file`, `API_KEY_ENV`, `TOKEN_URL`).
pub fn credential_name(name: &str) -> bool {
    let n = name
        .trim_start_matches('-')
        .to_ascii_uppercase()
        .replace('-', "_");
    let pointer = [
        "_FILE",
        "_PATH",
        "_DIR",
        "_ENV",
        "_VAR",
        "_NAME",
        "_URL",
        "_ENDPOINT",
    ];
    if pointer.iter().any(|p| n.ends_with(p)) {
        return false;
    }
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "API_KEY",
        "APIKEY",
        "AUTHORIZATION",
        "CREDENTIAL",
        "_KEY",
    ]
    .iter()
    .any(|k| n.contains(k))
        // Not `PWD`: as a variable it is the working directory.
        || matches!(n.as_str(), "KEY" | "PASS" | "SIG" | "SIGNATURE" | "AUTH")
}

/// A command line's arguments, each credential masked (see the module's comment).
pub fn args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut value_next = false;
    for a in args {
        if std::mem::take(&mut value_next) && !a.starts_with('-') {
            out.push(if reference(a) {
                a.clone()
            } else {
                MASK.to_owned()
            });
            continue;
        }
        // A plain name: what `NAME=VALUE` and `Name: value` start with (not a URL, not a
        // header's value that holds an `=` of its own).
        let plain = |name: &str| {
            !name.is_empty() && !name.contains(|c: char| c.is_whitespace() || ":/?@".contains(c))
        };
        let masked = match (a.split_once('='), a.split_once(':')) {
            // `--token=X`, `GITHUB_TOKEN=X`: the name decides.
            (Some((name, value)), _) if plain(name) && credential_name(name) => {
                if reference(value) {
                    a.clone()
                } else {
                    format!("{name}={MASK}")
                }
            }
            (Some((name, value)), _) if plain(name) && value.contains("://") => {
                format!("{name}={}", url(value))
            }
            // A header given as an argument (`--header "Authorization: Bearer X"`).
            (_, Some((name, value))) if plain(name) && credential_name(name) => {
                if reference(value) {
                    a.clone()
                } else {
                    format!("{name}: {MASK}")
                }
            }
            _ => {
                value_next = a.starts_with('-') && credential_name(a);
                url(a)
            }
        };
        out.push(masked);
    }
    out
}

/// Free text (a server's stderr line) with every URL in it masked as [`url`] masks one:
/// a URL runs from its scheme to the next space, quote or angle bracket, or to where
/// the next URL's scheme begins (`redis://u:p@a/0,redis://u:p@b/0` is two).
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme = scheme_start(&rest[..at]);
        let mut end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .map_or(rest.len(), |i| at + i);
        if let Some(next) = rest[at + 3..end].find("://") {
            end = scheme_start(&rest[..at + 3 + next]).max(at + 3);
        }
        out.push_str(&rest[..scheme]);
        out.push_str(&url(&rest[scheme..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the scheme that `before` ends with begins: just after its last character that
/// cannot be in a scheme (which may be several bytes long: `错误postgres://...`).
fn scheme_start(before: &str) -> usize {
    before
        .char_indices()
        .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// A URL with its password and its credential-named query values masked; anything
/// else (not a URL, or nothing to mask) as it is.
pub fn url(s: &str) -> String {
    let Some(scheme_end) = s.find("://") else {
        return s.to_owned();
    };
    let rest_at = scheme_end + 3;
    let authority_end = s[rest_at..]
        .find(['/', '?', '#'])
        .map_or(s.len(), |i| rest_at + i);
    let mut out = String::with_capacity(s.len());
    out.push_str(&s[..rest_at]);
    let authority = &s[rest_at..authority_end];
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(if reference(password) { password } else { MASK });
                }
                // A lone user part is often the token itself (`https://TOKEN@host`).
                None if credential_like(userinfo) => out.push_str(MASK),
                None => out.push_str(userinfo),
            }
            out.push('@');
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    let rest = &s[authority_end..];
    let (before_fragment, fragment) = rest.split_at(rest.find('#').unwrap_or(rest.len()));
    match before_fragment.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, value)) if credential_name(name) && !reference(value) => {
                        format!("{name}={MASK}")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        None => out.push_str(before_fragment),
    }
    out.push_str(fragment);
    out
}

/// A value that names a variable (`${GITHUB_TOKEN}`) rather than holds a credential:
/// shown as written, since it says where the credential comes from.
fn reference(value: &str) -> bool {
    value.contains("${")
}

/// A URL's user part alone that looks like a token rather than a user name: long, and
/// letters mixed with digits.
fn credential_like(user: &str) -> bool {
    user.len() >= 20
        && user.chars().any(|c| c.is_ascii_digit())
        && user.chars().any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Whatever text surrounds it (any characters, several bytes long ones right
        /// before the scheme included), a URL's password never survives `urls_in`, and
        /// text without `://` comes back as it was.
        #[test]
        fn no_urls_password_survives_in_any_text(
            before in any::<String>(),
            scheme in "[a-z][a-z0-9+.-]{0,8}",
            password in "[A-Za-z0-9]{6,20}",
            after in any::<String>(),
        ) {
            let text = format!("{before}{scheme}://user:{password}@host.example/p {after}");
            let out = urls_in(&text);
            prop_assert!(!out.contains(&format!(":{password}@")), "{}", out);
            if !before.contains("://") {
                prop_assert!(out.starts_with(&before));
            }
            prop_assert_eq!(urls_in(&before.replace("://", "")), before.replace("://", ""));
        }
    }

    fn masked(args: &[&str]) -> Vec<String> {
        super::args(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_urls_password_and_credential_parameters_are_masked() {
        let cases = [
            (
                "postgresql://admin:hunter2@db.example.com/prod",
                "postgresql://admin:***@db.example.com/prod",
            ),
            (
                "https://u:p%40ss@h.example/mcp?api_key=abc&x=1&token=t#frag",
                "https://u:***@h.example/mcp?api_key=***&x=1&token=***#frag",
            ),
            (
                "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r.git",
                "https://***@github.com/o/r.git",
            ),
            ("https://git@github.com/o/r", "https://git@github.com/o/r"),
            (
                "https://mcp.example.com/mcp?key=s3cret",
                "https://mcp.example.com/mcp?key=***",
            ),
            // Nothing to mask: exactly as written.
            (
                "https://mcp.example.com/a?monkey=1&q=keys",
                "https://mcp.example.com/a?monkey=1&q=keys",
            ),
            ("not a url", "not a url"),
            ("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"),
        ];
        for (given, want) in cases {
            assert_eq!(url(given), want, "{given}");
        }
    }

    #[test]
    fn every_url_in_free_text_is_masked_and_the_rest_kept_exactly() {
        let cases = [
            (
                "retry 2: postgres://a:pw1@db/x failed, then \"https://u:pw2@h.example/p?token=t\" and <redis://:pw3@cache:6379>",
                "retry 2: postgres://a:***@db/x failed, then \"https://u:***@h.example/p?token=***\" and <redis://:***@cache:6379>",
            ),
            (
                "a://b c:// ://x:y@z plain://host/ é https://u:v@w",
                "a://b c:// ://x:***@z plain://host/ é https://u:***@w",
            ),
            (
                "no address here; ünïcödé kept",
                "no address here; ünïcödé kept",
            ),
            ("", ""),
        ];
        for (given, want) in cases {
            assert_eq!(urls_in(given), want, "{given}");
        }
    }

    #[test]
    fn credential_flags_and_assignments_are_masked_and_the_rest_kept() {
        assert_eq!(
            masked(&[
                "--api-key",
                "sk-proj-1",
                "--token=ghp_x",
                "-e",
                "GITHUB_TOKEN=ghp_y",
                "--root",
                "/home/me",
                "postgres://a:b@h/db",
                "--db=postgres://a:b@h/db",
            ]),
            [
                "--api-key",
                "***",
                "--token=***",
                "-e",
                "GITHUB_TOKEN=***",
                "--root",
                "/home/me",
                "postgres://a:***@h/db",
                "--db=postgres://a:***@h/db",
            ]
        );
        // A credential flag followed by another flag has no value to mask: what follows
        // is shown, so a flag can never hide behind one.
        assert_eq!(
            masked(&["--password", "--require=x.js"]),
            ["--password", "--require=x.js"]
        );
        assert_eq!(masked(&["--author", "me"]), ["--author", "me"]);
        // References say where a credential comes from, and are shown as written.
        let references = [
            "--token",
            "${GH_TOKEN}",
            "--api-key=${KEY}",
            "Authorization: Bearer ${T}",
            "postgres://u:${PW}@h/db?token=${T}",
        ];
        assert_eq!(masked(&references), references);
        // A header as an argument (mcp-remote's `--header`), and flags that say where a
        // credential is rather than hold one.
        assert_eq!(
            masked(&[
                "--header",
                "Authorization: Bearer abc",
                "--header",
                "X-Api-Key:abc",
                "--header",
                "Authorization: Basic dXNlcjpwYXNz==",
                "--header",
                "Accept: text/plain",
                "--token-file",
                "/run/secrets/t",
                "https://h/mcp",
            ]),
            [
                "--header",
                "Authorization: ***",
                "--header",
                "X-Api-Key: ***",
                "--header",
                "Authorization: ***",
                "--header",
                "Accept: text/plain",
                "--token-file",
                "/run/secrets/t",
                "https://h/mcp",
            ]
        );
    }

    #[test]
    fn names_like_credentials() {
        for yes in [
            "GITHUB_TOKEN",
            "x-api-key",
            "--client-secret",
            "password",
            "SSH_KEY",
            "key",
            "Authorization",
        ] {
            assert!(credential_name(yes), "{yes}");
        }
        for no in [
            "--author",
            "--root",
            "monkey",
            "KEYBOARD_LAYOUT",
            "path",
            "PWD",
            "--token-file",
            "API_KEY_ENV",
            "TOKEN_URL",
        ] {
            assert!(!credential_name(no), "{no}");
        }
    }
}
