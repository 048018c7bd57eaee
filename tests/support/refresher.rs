//! The baseline a Rust user would write by hand instead of this crate: a
//! `tokio::sync::RwLock` around the token, read on every request, and a
//! fetch under the write lock (checked again once taken) when it is missing
//! or expired. No back-off: while the endpoint fails, every request that
//! finds no token asks it again. Used by the benchmarks as a column, never
//! by the crate.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Request};
use tokio::sync::RwLock;

#[path = "reqwest_client.rs"]
mod reqwest_client;

/// A hand-written token refresher for the specification's endpoint.
#[derive(Clone)]
pub struct Refresher {
    token: Arc<RwLock<Option<(HeaderValue, Instant)>>>,
    http: reqwest::Client,
    url: String,
    body: String,
}

impl Refresher {
    pub fn new(auth_url: &str, client_id: &str, client_secret: &str) -> Self {
        Refresher {
            token: Arc::default(),
            http: reqwest_client::reqwest_client(),
            url: format!("{auth_url}/v1/oauth/accesstoken"),
            body: format!(
                "grant_type=client_credentials&client_id={client_id}&client_secret={client_secret}"
            ),
        }
    }

    /// The `Authorization` value to send now.
    pub async fn header(&self) -> Result<HeaderValue, String> {
        if let Some((header, until)) = &*self.token.read().await {
            if Instant::now() < *until {
                return Ok(header.clone());
            }
        }
        let mut slot = self.token.write().await;
        if let Some((header, until)) = &*slot {
            if Instant::now() < *until {
                return Ok(header.clone());
            }
        }
        let sent = Instant::now();
        let response = self
            .http
            .post(&self.url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(self.body.clone())
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("token endpoint: {}", response.status()));
        }
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        let json: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let token = json["access_token"].as_str().ok_or("no access_token")?;
        let lifetime = json["expires_in"].as_u64().unwrap_or(3600);
        let header =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        let until = sent + Duration::from_secs(lifetime).saturating_sub(Duration::from_secs(10));
        *slot = Some((header.clone(), until));
        Ok(header)
    }

    /// Sets the header on `req`.
    pub async fn authorize<B>(&self, mut req: Request<B>) -> Result<Request<B>, String> {
        let header = self.header().await?;
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, header);
        Ok(req)
    }
}
