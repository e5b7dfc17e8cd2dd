//! A tool's JSON text scanned as it is parsed: serde visits each string once, borrowed
//! where it has no escapes, and no `Value` tree is built (building it was half the
//! scan's time). A key given twice is scanned both times, as a model may read either.

use std::borrow::Cow;
use std::fmt::{self, Write};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{Findings, SCHEMA_WORDS, deceptive_name, invisible, words};

/// Numbers, booleans and null hold no words: a visitor of this file skips them (serde's
/// defaults would call them an error).
macro_rules! skip_scalars {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    };
}

/// The tool object: its name, its titles and description, and its input schema.
pub(super) struct Tool<'a>(pub(super) &'a mut Findings);

/// A string, borrowed from the JSON text when it has no escapes.
struct Text<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON value where a string is expected: a string is scanned, anything else is
/// skipped (`to-schema` judges the shape). For `annotations` (`holder`), the value is
/// the object whose `title` is that string: a string in its place is read by no one.
struct Field<'a> {
    out: &'a mut Findings,
    path: &'static str,
    name: bool,
    holder: bool,
}

impl<'de> DeserializeSeed<'de> for Field<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Field<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        if self.holder {
            return Ok(());
        }
        if self.name {
            invisible(s, self.path, self.out);
            deceptive_name(s, self.path, self.out);
        } else {
            words(s, self.path, true, self.out);
        }
        Ok(())
    }
    skip_scalars!();
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // `annotations`: only its `title` is read by the model.
        while let Some(key) = map.next_key::<Text<'de>>()? {
            if self.holder && key.0 == "title" {
                map.next_value_seed(Field {
                    out: self.out,
                    path: self.path,
                    name: false,
                    holder: false,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Tool<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Tool<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let (path, name) = match &*key.0 {
                "name" => ("/name", true),
                "title" => ("/title", false),
                "description" => ("/description", false),
                "annotations" => ("/annotations/title", false),
                "inputSchema" => {
                    map.next_value_seed(Schema {
                        out: self.0,
                        path: &mut "/inputSchema".to_owned(),
                    })?;
                    continue;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            map.next_value_seed(Field {
                out: self.0,
                path,
                name,
                holder: path == "/annotations/title",
            })?;
        }
        Ok(())
    }
}

/// Every string in an input schema: property names become part of the path; each value
/// is scanned as words (a property's `description` is read by the model too).
struct Schema<'a> {
    out: &'a mut Findings,
    path: &'a mut String,
}

impl<'de> DeserializeSeed<'de> for Schema<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Schema<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E>(self, s: &str) -> Result<(), E> {
        if !SCHEMA_WORDS.contains(&s) {
            words(s, self.path, false, self.out);
        }
        Ok(())
    }
    skip_scalars!();
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        loop {
            let len = self.path.len();
            let _ = write!(self.path, "/{i}");
            let more = seq.next_element_seed(Schema {
                out: self.out,
                path: self.path,
            })?;
            self.path.truncate(len);
            if more.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Text<'de>>()? {
            let k = &*key.0;
            let len = self.path.len();
            self.path.push('/');
            if k.contains(['~', '/']) {
                self.path.push_str(&k.replace('~', "~0").replace('/', "~1"));
            } else {
                self.path.push_str(k);
            }
            // A property's name is read by the model too (`sidenote`).
            if !SCHEMA_WORDS.contains(&k) {
                words(k, self.path, false, self.out);
            }
            map.next_value_seed(Schema {
                out: self.out,
                path: self.path,
            })?;
            self.path.truncate(len);
        }
        Ok(())
    }
}
