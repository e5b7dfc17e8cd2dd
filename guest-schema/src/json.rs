//! Untrusted JSON text read into a `Value`, refusing an object that repeats a key.
//!
//! RFC 8259 leaves a repeated name to the reader: `serde_json` keeps the last, a
//! streaming reader (the findings scan, another client) may see the first. A server
//! could then show the scan one description and the model another, so a repeated key
//! anywhere refuses the item.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// `text` as a `Value`, or why not (not JSON, or a key repeated within one object).
pub(crate) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Unique.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Reads one value, refusing a repeated key in any object within it.
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Unique)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(format_args!(
                    "the key {} appears twice in one object",
                    crate::text::quote(&key, 64)
                )));
            }
            let value = map.next_value_seed(Unique)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_anywhere_is_refused_and_everything_else_reads_as_serde_json_does() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": [{"b": true, "c": null, "b": false}]}"#,
            r#"{"d": "one", "e": {}, "d": "two"}"#,
        ] {
            let e = parse(text).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("appears twice"), "{text}: {e}");
        }
        for text in [
            r#"{"a": 1, "b": [1, 2.5, -3, "s", null, true, {"a": {}}], "c": {"a": 1e300}}"#,
            "[]",
            "18446744073709551615",
            r#""\ud83d\ude00""#,
        ] {
            let ours = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let theirs: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(ours, theirs);
        }
        for text in ["{", "[1,]", r#"{"a": 1} x"#, ""] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
