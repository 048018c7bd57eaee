//! Authorization details (RFC 9396, `authorization_details`): what a token
//! is for, one transaction at a time ("pay 25 EUR to ..."). Checked before
//! anything is sent, kept in one canonical form (so that equal details name
//! the same token slot, whatever the order of their members), and compared
//! with what a server answered.

use serde_json::Value;

/// The name of the parameter (RFC 9396 section 2).
pub(crate) const AUTHORIZATION_DETAILS: &str = "authorization_details";

/// The longest `authorization_details` taken, as JSON text: a few
/// transactions, not a document.
pub(crate) const MAX_DETAILS_LEN: usize = 8 * 1024;

/// The most objects one `authorization_details` holds.
const MAX_DETAILS: usize = 16;

/// `details` checked (RFC 9396 section 2: a non-empty array of objects,
/// each with a `type` string) and in canonical form: no spaces, the members
/// of every object in order of their names. Why not, for an error.
pub(crate) fn canonical(details: &Value) -> Result<String, String> {
    let Value::Array(items) = details else {
        return Err("is not a JSON array (RFC 9396 section 2)".into());
    };
    if items.is_empty() || items.len() > MAX_DETAILS {
        return Err(format!(
            "holds {} objects: 1 to {MAX_DETAILS} are taken",
            items.len()
        ));
    }
    for item in items {
        let Value::Object(members) = item else {
            return Err("holds an element that is not a JSON object".into());
        };
        match members.get("type") {
            Some(Value::String(kind)) if !kind.is_empty() => {}
            _ => return Err("holds an object without a `type` string".into()),
        }
    }
    let mut text = String::new();
    write_canonical(details, &mut text);
    if text.len() > MAX_DETAILS_LEN {
        return Err(format!(
            "is {} bytes long as JSON, over the {MAX_DETAILS_LEN} taken",
            text.len()
        ));
    }
    Ok(text)
}

/// What `details` is sent as: its canonical form, or, for details that are
/// not RFC 9396's, their JSON as given, which the request's checks refuse
/// with why (a setter cannot fail).
pub(crate) fn param_text(details: &Value) -> String {
    canonical(details).unwrap_or_else(|_| details.to_string())
}

/// `text`, an `authorization_details` as JSON, checked and in canonical
/// form.
pub(crate) fn canonical_text(text: &str) -> Result<String, String> {
    if text.len() > MAX_DETAILS_LEN {
        return Err(format!("is over the {MAX_DETAILS_LEN} bytes taken"));
    }
    let value: Value = serde_json::from_str(text).map_err(|_| "is not JSON".to_owned())?;
    canonical(&value)
}

/// Whether `answered` grants the same details as `asked` (both checked):
/// the same objects, member for member, in any order, a number equal to
/// the same number however written (`25`, `25.0`).
pub(crate) fn same(asked: &Value, answered: &Value) -> bool {
    let (Some(asked), Some(answered)) = (asked.as_array(), answered.as_array()) else {
        return false;
    };
    if asked.len() != answered.len() {
        return false;
    }
    // Each asked object matched by one answered object, each used once.
    let mut used = vec![false; answered.len()];
    asked.iter().all(|wanted| {
        let found = answered
            .iter()
            .enumerate()
            .find(|(i, got)| !used[*i] && equal(wanted, got));
        found.map(|(i, _)| used[i] = true).is_some()
    })
}

/// JSON equality, numbers by their value.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        (x, y) => x == y,
    }
}

/// The `type` of each of `details`' objects, for `Debug`: the rest may be
/// personal data (an account, a creditor).
pub(crate) fn types(details: &Value) -> Vec<&str> {
    details
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("type")?.as_str())
        .collect()
}

/// `value` as JSON with every object's members sorted by name, whatever
/// order the map keeps them in.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(members) => {
            let mut names: Vec<&String> = members.keys().collect();
            names.sort();
            out.push('{');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(name.clone()).to_string());
                out.push(':');
                write_canonical(&members[name], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn details_are_checked_and_one_form_whatever_the_order_of_members() {
        let a = json!([{"type": "payment", "amount": {"value": "25", "currency": "EUR"}}]);
        let b: Value = serde_json::from_str(
            r#"[ {"amount": {"currency": "EUR", "value": "25"}, "type": "payment"} ]"#,
        )
        .unwrap();
        assert_eq!(canonical(&a).unwrap(), canonical(&b).unwrap());
        assert_eq!(
            canonical(&a).unwrap(),
            r#"[{"amount":{"currency":"EUR","value":"25"},"type":"payment"}]"#
        );
        for bad in [
            json!({"type": "payment"}),
            json!([]),
            json!(["payment"]),
            json!([{"amount": 1}]),
            json!([{"type": ""}]),
            json!([{"type": "x", "blob": "a".repeat(MAX_DETAILS_LEN)}]),
        ] {
            assert!(canonical(&bad).is_err(), "{bad}");
        }
        assert!(canonical_text("[{\"type\":\"x\"}").is_err());
    }

    #[test]
    fn the_same_details_in_another_order_are_the_same_and_nothing_else_is() {
        let asked = json!([{"type": "a", "n": 1}, {"type": "b"}]);
        assert!(same(&asked, &json!([{"type": "b"}, {"n": 1, "type": "a"}])));
        assert!(!same(
            &asked,
            &json!([{"type": "a", "n": 2}, {"type": "b"}])
        ));
        assert!(!same(&asked, &json!([{"type": "a", "n": 1}])));
        assert!(!same(
            &asked,
            &json!([{"type": "a", "n": 1}, {"type": "b"}, {"type": "c"}])
        ));
        assert!(!same(&asked, &json!({"type": "a"})));
        // Numbers by their value, as a server that reads and writes JSON
        // again gives them back; each asked object matched once.
        assert!(same(
            &json!([{"type": "a", "n": 25.0}]),
            &json!([{"type": "a", "n": 25}])
        ));
        let twice = json!([{"type": "a"}, {"type": "a"}]);
        assert!(!same(&twice, &json!([{"type": "a"}, {"type": "b"}])));
        assert_eq!(types(&asked), ["a", "b"]);
    }
}
