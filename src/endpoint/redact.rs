//! [`Redactor`]: every form in which the client's secret left in a token
//! request, to scrub from whatever text the server sends back.
//!
//! A server (or a proxy in front of it) that echoes the request in an error
//! answer may echo the secret as it was sent (raw, percent-encoded,
//! form-encoded with `+` for a space, inside the Basic credential's base64)
//! or as it writes it back into JSON (escaped). Each of those is replaced
//! with `[redacted]` before the text goes into a [`TokenError`](crate::TokenError)
//! and from there into logs.

use crate::support::encoding::{base64, form_urlencode, percent_encode};

/// What replaces a secret.
const REDACTED: &str = "[redacted]";

/// The forms of one client's secret. See the [module](self).
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    /// Longest first, so that a form containing another goes whole.
    forms: Vec<String>,
}

impl Redactor {
    /// The forms of `secret` sent by `client_id`: the secret raw,
    /// percent-encoded and form-encoded (with upper- and lowercase hex), the
    /// Basic credential (`id:secret`, raw and percent-encoded) as base64, and
    /// each of those as a JSON string writes it. Nothing for an empty secret.
    pub(crate) fn new(client_id: &str, secret: &str) -> Self {
        if secret.is_empty() {
            return Redactor::default();
        }
        let mut sent = vec![
            secret.to_owned(),
            percent_encode(secret),
            form_urlencode(secret),
            base64(format!("{client_id}:{secret}").as_bytes()),
            base64(format!("{}:{}", percent_encode(client_id), percent_encode(secret)).as_bytes()),
            base64(format!("{}:{}", form_urlencode(client_id), form_urlencode(secret)).as_bytes()),
        ];
        let lowercase_hex: Vec<String> = sent[1..3].iter().map(|f| lower_hex(f)).collect();
        sent.extend(lowercase_hex);
        Redactor::default().with(sent)
    }

    /// These forms and `sent`, each also as a JSON string writes it. Longest
    /// first.
    fn with(&self, sent: Vec<String>) -> Redactor {
        let mut forms = self.forms.clone();
        for form in sent {
            forms.extend(json_forms(&form));
            forms.push(form);
        }
        forms.retain(|f| !f.is_empty());
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        Redactor { forms }
    }

    /// These forms, and those of each of `credentials` (the tokens and
    /// assertions a request carried in its body, a refresh token): raw,
    /// form-encoded and percent-encoded (with upper- and lowercase hex), as
    /// base64 (standard and URL-safe), and as JSON writes them. A credential
    /// under 8 characters is not looked for (it would scrub ordinary words).
    pub(crate) fn and(&self, credentials: &[String]) -> Redactor {
        use base64::Engine;
        let sent = credentials
            .iter()
            .filter(|c| c.len() >= 8)
            .flat_map(|c| {
                let (form, percent) = (form_urlencode(c), percent_encode(c));
                [
                    c.clone(),
                    lower_hex(&form),
                    lower_hex(&percent),
                    form,
                    percent,
                    base64(c.as_bytes()),
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(c),
                ]
            })
            .collect();
        self.with(sent)
    }

    /// `text` with every form of the secret replaced by `[redacted]`.
    pub(crate) fn scrub(&self, text: String) -> String {
        let mut text = text;
        for form in &self.forms {
            if text.contains(form.as_str()) {
                text = text.replace(form.as_str(), REDACTED);
            }
        }
        text
    }
}

/// `form` with the hex digits of its `%XX` escapes in lowercase.
fn lower_hex(form: &str) -> String {
    let mut out = String::with_capacity(form.len());
    let mut escape = 0;
    for c in form.chars() {
        if c == '%' {
            escape = 2;
            out.push(c);
        } else if escape > 0 {
            escape -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// How a JSON string may write `text` (without the quotes): as serde_json
/// writes it, with `/` escaped as `\/` too, and with every character
/// outside ASCII as `\uXXXX` escapes.
fn json_forms(text: &str) -> Vec<String> {
    let plain = serde_json::to_string(text).unwrap_or_default();
    let plain = plain
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or_default()
        .to_owned();
    let slash = plain.replace('/', "\\/");
    let mut ascii = String::with_capacity(plain.len());
    for c in plain.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    let ascii_slash = ascii.replace('/', "\\/");
    vec![plain, slash, ascii, ascii_slash]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_credentials_are_scrubbed_in_their_forms_short_ones_left() {
        let redactor = Redactor::new("id", "secret-value")
            .and(&["subject/token+value".to_owned(), "short".to_owned()]);
        let echoed = format!(
            "{} {} {} short secret-value",
            "subject/token+value",
            form_urlencode("subject/token+value"),
            serde_json::to_string("subject/token+value").unwrap()
        );
        assert_eq!(
            redactor.scrub(echoed),
            "[redacted] [redacted] \"[redacted]\" short [redacted]"
        );
    }

    #[test]
    fn every_form_sent_is_scrubbed() {
        let r = Redactor::new("svc", "pä ss+/&%=\"x");
        let sent = [
            "pä ss+/&%=\"x".to_owned(),
            percent_encode("pä ss+/&%=\"x"),
            form_urlencode("pä ss+/&%=\"x"),
            "p%c3%a4%20ss%2b%2f%26%25%3d%22x".to_owned(),
            "p%c3%a4+ss%2b%2f%26%25%3d%22x".to_owned(),
            base64("svc:pä ss+/&%=\"x".as_bytes()),
            base64(format!("svc:{}", percent_encode("pä ss+/&%=\"x")).as_bytes()),
            r#"pä ss+/&%=\"x"#.to_owned(),
            r#"p\u00e4 ss+\/&%=\"x"#.to_owned(),
        ];
        for form in sent {
            let echoed = format!("bad secret <{form}> here");
            assert_eq!(r.scrub(echoed), "bad secret <[redacted]> here", "{form}");
        }
        assert_eq!(r.scrub("nothing".into()), "nothing");
        assert_eq!(Redactor::new("svc", "").scrub("svc".into()), "svc");
    }
}
