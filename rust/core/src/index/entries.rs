//! The rules that read persisted entries (spec 03): which members of a summary message, an
//! index entry and a chain entry the index takes, and in what shape. They are written once,
//! against [`EntryReader`], a reader of one JSON-like value that the binding implements over
//! Python objects (pydantic-core's `Input` pattern) and the core over its own [`JsValue`]
//! (the unit tests below read through it).

use super::chains::ChainEntry;
use super::refs::ShortRef;
use crate::js::JsField;
use crate::json::{JsString, JsValue};
use crate::jsstr::{JsBuf, JsStr, key_form_str, key_form_units, utf16_to_wtf8};

/// One value of a persisted entry, read as the reference's JavaScript reads it.
pub trait EntryReader: Sized {
    /// What a read can fail with (the binding's Python error).
    type Error;

    /// The member `key` when the value is an object holding it.
    fn member(&self, key: &str) -> Result<Option<Self>, Self::Error>;

    /// The items when the value is an array (`Array.isArray`).
    fn items(&self) -> Result<Option<Vec<Self>>, Self::Error>;

    /// The text when the value is a string (lone surrogates kept).
    fn string(&self) -> Result<Option<JsStr>, Self::Error>;

    /// The key form of a string id or key (`crate::jsstr::key_form_units`), when the
    /// value is a string.
    fn key(&self) -> Result<Option<String>, Self::Error>;

    /// The value when it is a number (`typeof x === "number"`).
    fn number(&self) -> Result<Option<f64>, Self::Error>;

    /// The value as a persisted field.
    fn field(&self) -> Result<JsField, Self::Error>;

    /// [`EntryReader::field`] of a member (absent when missing).
    fn field_of(&self, key: &str) -> Result<JsField, Self::Error> {
        match self.member(key)? {
            Some(value) => value.field(),
            None => Ok(JsField::Absent),
        }
    }

    /// The field of an id or key: a string in its key form, any other value as a field.
    fn key_field(&self) -> Result<JsField, Self::Error> {
        match self.key()? {
            Some(key) => Ok(JsField::Str(JsStr::new(key))),
            None => self.field(),
        }
    }
}

/// `normalizeSummaryToolCallRefs(details)`: `details.toolCallRefs` when it is an array (its
/// object items with string `shortId` and `toolCallId`, a numeric `resultTimestamp` kept),
/// else `details.toolCallIds` when it is an array (its strings, each its own short id),
/// else none.
pub fn normalized_summary_refs<R: EntryReader>(
    details: Option<&R>,
) -> Result<Vec<ShortRef>, R::Error> {
    let Some(details) = details else {
        return Ok(Vec::new());
    };
    if let Some(Some(refs)) = details
        .member("toolCallRefs")?
        .map(|r| r.items())
        .transpose()?
    {
        let mut out = Vec::new();
        for r in refs {
            let (Some(short), Some(id)) = (r.member("shortId")?, r.member("toolCallId")?) else {
                continue;
            };
            let (Some(short), Some(id)) = (short.string()?, id.key()?) else {
                continue;
            };
            let ts = match r.member("resultTimestamp")? {
                Some(ts) => ts.number()?,
                None => None,
            };
            out.push(ShortRef::new(short, id, ts));
        }
        return Ok(out);
    }
    if let Some(Some(ids)) = details
        .member("toolCallIds")?
        .map(|r| r.items())
        .transpose()?
    {
        let mut out = Vec::new();
        for id in ids {
            if let (Some(short), Some(key)) = (id.string()?, id.key()?) {
                out.push(ShortRef::new(short, key, None));
            }
        }
        return Ok(out);
    }
    Ok(Vec::new())
}

/// Refs read raw (backfilled index entries, flush registration): of the object items, those
/// whose `shortId` and `toolCallId` are strings; `resultTimestamp` is taken as is.
pub fn raw_refs<R: EntryReader>(
    items: impl IntoIterator<Item = Result<R, R::Error>>,
) -> Result<Vec<ShortRef>, R::Error> {
    let mut out = Vec::new();
    for item in items {
        let r = item?;
        let (Some(short_id), Some(tool_call_id)) = (
            r.member("shortId")?
                .map(|v| v.string())
                .transpose()?
                .flatten(),
            r.member("toolCallId")?
                .map(|v| v.key())
                .transpose()?
                .flatten(),
        ) else {
            continue;
        };
        out.push(ShortRef {
            short_id,
            tool_call_id,
            result_timestamp: r.field_of("resultTimestamp")?,
        });
    }
    Ok(out)
}

/// A summary message's body.
#[derive(Debug, Clone, PartialEq)]
pub enum SummaryText {
    /// `content` is a string: the body is that very value.
    Content(JsStr),
    /// The `text` of the `type: "text"` blocks of an array `content`, joined with `"\n"`;
    /// `""` for any other `content`.
    Joined(JsStr),
}

impl SummaryText {
    /// The body's text.
    pub fn text(&self) -> &JsStr {
        match self {
            SummaryText::Content(text) | SummaryText::Joined(text) => text,
        }
    }

    /// The body's text, owned.
    pub fn into_text(self) -> JsStr {
        match self {
            SummaryText::Content(text) | SummaryText::Joined(text) => text,
        }
    }
}

/// A summary message's body (`content`): the string itself; the `text` of its
/// `type: "text"` blocks joined with `"\n"` if an array (`String(text)` of each, nothing
/// for a nullish one); otherwise `""`.
pub fn summary_text<R: EntryReader>(content: Option<&R>) -> Result<SummaryText, R::Error> {
    let Some(content) = content else {
        return Ok(SummaryText::Joined(JsStr::default()));
    };
    if let Some(text) = content.string()? {
        return Ok(SummaryText::Content(text));
    }
    let Some(blocks) = content.items()? else {
        return Ok(SummaryText::Joined(JsStr::default()));
    };
    let mut text = JsBuf::new();
    let mut first = true;
    for block in blocks {
        let is_text = match block.member("type")? {
            Some(kind) => kind.string()?.is_some_and(|k| k.as_str() == "text"),
            None => false,
        };
        if is_text {
            if !first {
                text.push_str("\n");
            }
            first = false;
            let piece = block.field_of("text")?;
            if !piece.is_nullish() {
                piece.push_js_string(&mut text);
            }
        }
    }
    Ok(SummaryText::Joined(text.finish()))
}

/// `data[key]` as a list of fields when it is an array (`as_key`: of ids or keys).
fn field_list<R: EntryReader>(
    data: &R,
    key: &str,
    as_key: bool,
) -> Result<Option<Vec<JsField>>, R::Error> {
    let Some(Some(items)) = data.member(key)?.map(|v| v.items()).transpose()? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        out.push(if as_key {
            item.key_field()?
        } else {
            item.field()?
        });
    }
    Ok(Some(out))
}

/// A chain entry's `data` as a core view; `None` unless `blockId` is truthy and
/// `startUserTimestamp` is a number.
pub fn read_chain<R: EntryReader>(data: &R) -> Result<Option<ChainEntry>, R::Error> {
    let block_id = data.field_of("blockId")?;
    let start = data.field_of("startUserTimestamp")?;
    let Some(start) = ChainEntry::accepted_start(&block_id, &start) else {
        return Ok(None);
    };
    Ok(Some(ChainEntry {
        block_id,
        start_user_timestamp: start,
        final_assistant_timestamp: data.field_of("finalAssistantTimestamp")?,
        dropped_tool_call_ids: field_list(data, "droppedToolCallIds", true)?,
        dropped_occurrence_keys: field_list(data, "droppedOccurrenceKeys", true)?,
        protected_tool_call_ids: field_list(data, "protectedToolCallIds", true)?,
        tool_refs: field_list(data, "toolRefs", false)?,
        compressed_at: data.field_of("compressedAt")?,
        range_summary_text: data.field_of("rangeSummaryText")?,
        body_source: data.field_of("bodySource")?,
        slot: 0,
    }))
}

/// A core JSON value read as an entry (the reader the core's own tests use).
impl EntryReader for &JsValue {
    type Error = std::convert::Infallible;

    fn member(&self, key: &str) -> Result<Option<Self>, Self::Error> {
        Ok(self.get(key))
    }

    fn items(&self) -> Result<Option<Vec<Self>>, Self::Error> {
        Ok(match self {
            JsValue::Array(items) => Some(items.iter().collect()),
            _ => None,
        })
    }

    fn string(&self) -> Result<Option<JsStr>, Self::Error> {
        Ok(match self {
            JsValue::String(s) => Some(js_str(s)),
            _ => None,
        })
    }

    fn key(&self) -> Result<Option<String>, Self::Error> {
        Ok(match self {
            JsValue::String(JsString::Text(text)) => Some(key_form_str(text).into_owned()),
            JsValue::String(JsString::Units(units)) => Some(key_form_units(units)),
            _ => None,
        })
    }

    fn number(&self) -> Result<Option<f64>, Self::Error> {
        Ok(match self {
            JsValue::Number(x) => Some(*x),
            _ => None,
        })
    }

    fn field(&self) -> Result<JsField, Self::Error> {
        Ok(match self {
            JsValue::Null => JsField::Null,
            JsValue::Bool(b) => JsField::Bool(*b),
            JsValue::Number(x) => JsField::Number(*x),
            JsValue::String(s) => JsField::Str(js_str(s)),
            JsValue::Array(_) => JsField::Array(array_js_string(self)),
            JsValue::Object(_) => JsField::Object,
        })
    }
}

/// A core JSON string as a [`JsStr`] (lone surrogates kept).
fn js_str(s: &JsString) -> JsStr {
    match s {
        JsString::Text(text) => JsStr::new(text.clone()),
        JsString::Units(units) => utf16_to_wtf8(units),
    }
}

/// `String(value)` of an array value.
fn array_js_string(value: &JsValue) -> String {
    match value {
        JsValue::Array(items) => items
            .iter()
            .map(|item| match item {
                JsValue::Null => String::new(),
                JsValue::Array(_) => array_js_string(item),
                JsValue::Object(_) => "[object Object]".to_owned(),
                other => other.field().map_or_else(|e| match e {}, |f| f.js_string()),
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.field().map_or_else(|e| match e {}, |f| f.js_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn value(text: &str) -> JsValue {
        parse(text).expect("test JSON")
    }

    #[test]
    fn summary_refs_prefer_tool_call_refs_and_skip_malformed_items() {
        let details = value(
            r#"{"toolCallRefs":[{"shortId":"t1","toolCallId":"a","resultTimestamp":5},
                1, {"shortId":"t2"}, {"shortId":2,"toolCallId":"b"},
                {"shortId":"t3","toolCallId":"c","resultTimestamp":"x"}],
               "toolCallIds":["z"]}"#,
        );
        let refs = normalized_summary_refs(Some(&&details)).unwrap();
        assert_eq!(
            refs,
            vec![
                ShortRef::new("t1", "a", Some(5.0)),
                ShortRef::new("t3", "c", None)
            ]
        );
    }

    #[test]
    fn summary_refs_fall_back_to_tool_call_ids_then_to_none() {
        let ids = value(r#"{"toolCallRefs":"no","toolCallIds":["a",3,"b"]}"#);
        assert_eq!(
            normalized_summary_refs(Some(&&ids)).unwrap(),
            vec![ShortRef::new("a", "a", None), ShortRef::new("b", "b", None)]
        );
        for other in [r#"{"toolCallIds":{"0":"a"}}"#, "[1]", r#""text""#, "null"] {
            assert_eq!(
                normalized_summary_refs(Some(&&value(other))).unwrap(),
                vec![]
            );
        }
        assert_eq!(normalized_summary_refs::<&JsValue>(None).unwrap(), vec![]);
    }

    #[test]
    fn raw_refs_keep_the_result_timestamp_as_it_is() {
        let list = value(
            r#"[{"shortId":"t1","toolCallId":"a","resultTimestamp":"2024"},
                {"shortId":"t2","toolCallId":null}, "x",
                {"shortId":"t3","toolCallId":"b"}]"#,
        );
        let JsValue::Array(items) = &list else {
            unreachable!()
        };
        let refs = raw_refs(items.iter().map(Ok)).unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[0].result_timestamp, JsField::str("2024"));
        assert_eq!(refs[1], ShortRef::new("t3", "b", None));
    }

    #[test]
    fn summary_text_is_the_string_or_the_joined_text_blocks() {
        let text = value(r#""the body""#);
        assert_eq!(
            summary_text(Some(&&text)).unwrap(),
            SummaryText::Content(JsStr::new("the body".into()))
        );
        let blocks = value(
            r#"[{"type":"text","text":"a"},{"type":"image"},"s",
                {"type":"text","text":null},{"type":"text","text":7},{"type":"text"}]"#,
        );
        // A nullish `text` adds nothing but still takes its "\n" (the reference's join).
        assert_eq!(
            summary_text(Some(&&blocks)).unwrap().text().as_str(),
            "a\n\n7\n"
        );
        for other in ["{}", "3", "null"] {
            assert_eq!(
                summary_text(Some(&&value(other))).unwrap().text().as_str(),
                ""
            );
        }
        assert_eq!(summary_text::<&JsValue>(None).unwrap().text().as_str(), "");
    }

    #[test]
    fn a_chain_entry_needs_a_truthy_block_id_and_a_numeric_start() {
        let entry = value(
            r#"{"blockId":"b1","startUserTimestamp":10,"finalAssistantTimestamp":null,
                "droppedToolCallIds":["a","b"],"toolRefs":[1,"x",[2,3]],
                "protectedToolCallIds":"no","bodySource":"deterministic"}"#,
        );
        let chain = read_chain(&&entry).unwrap().expect("accepted");
        assert_eq!(chain.block_id, JsField::str("b1"));
        assert_eq!(chain.start_user_timestamp, 10.0);
        assert_eq!(chain.final_assistant_timestamp, JsField::Null);
        assert_eq!(
            chain.dropped_tool_call_ids,
            Some(vec![JsField::str("a"), JsField::str("b")])
        );
        assert_eq!(
            chain.tool_refs,
            Some(vec![
                JsField::Number(1.0),
                JsField::str("x"),
                JsField::Array("2,3".into())
            ])
        );
        assert_eq!(chain.protected_tool_call_ids, None);
        assert_eq!(chain.dropped_occurrence_keys, None);
        assert_eq!(chain.compressed_at, JsField::Absent);
        for rejected in [
            r#"{"blockId":"","startUserTimestamp":1}"#,
            r#"{"blockId":"b1","startUserTimestamp":"1"}"#,
            r#"{"startUserTimestamp":1}"#,
        ] {
            assert!(
                read_chain(&&value(rejected)).unwrap().is_none(),
                "{rejected}"
            );
        }
    }
}
